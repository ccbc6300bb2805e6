/* backend_cpu.c - the CPU backends. The reference: plain, obviously
 * correct C, one thread, arithmetic in double precision; every other path
 * (the GPU kernels, the fast CPU convolution) is tested against it, and it
 * against scipy.ndimage. The cpu backend shares its tone operations and
 * convolves with cpu_conv.c, which gives the same bytes on threads. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_conv.h"
#include "util.h"

/* Sample i of an image of 8 or 16 bits a sample, as a double. */
static double sample_at(const void *src, int depth, size_t i)
{
    return depth == 16 ? (double)((const uint16_t *)src)[i] : (double)((const unsigned char *)src)[i];
}

/* gf_conv2d_cpu_exact over samples of either depth. */
static double conv_exact(const void *src, int depth, int width, int height, int channels,
                         const gf_mask *mask, gf_border border, int x, int y, int c)
{
    const int ax = mask->width / 2, ay = mask->height / 2;
    double sums[GF_MASK_MAX_MATRICES] = {0};
    for (int my = 0; my < mask->height; my++) {
        int sy = gf_border_index(y + my - ay, height, border);
        for (int mx = 0; mx < mask->width; mx++) {
            int sx = gf_border_index(x + mx - ax, width, border);
            double px = (sx < 0 || sy < 0)
                            ? 0.0
                            : sample_at(src, depth, ((size_t)sy * width + sx) * channels + c);
            for (int k = 0; k < mask->count; k++)
                sums[k] += px * mask->weights[k][my * mask->width + mx];
        }
    }
    /* the matrix responses combined */
    double v = 0.0;
    for (int k = 0; k < mask->count; k++) {
        double r = sums[k] / mask->scale[k] + mask->offset[k];
        switch (mask->combine) {
        case GF_COMBINE_MAGNITUDE: v += r * r; break;
        case GF_COMBINE_MAX: v = k == 0 ? r : fmax(v, r); break;
        case GF_COMBINE_MIN: v = k == 0 ? r : fmin(v, r); break;
        default: v += r; break;  /* NONE (one matrix), SUM and UNSHARP's blur */
        }
    }
    if (mask->combine == GF_COMBINE_UNSHARP) {
        const double s = sample_at(src, depth, ((size_t)y * width + x) * channels + c), d = s - v;
        return fabs(d) >= mask->threshold ? s + mask->amount * d : s;
    }
    return mask->combine == GF_COMBINE_MAGNITUDE ? sqrt(v) : v;
}

double gf_conv2d_cpu_exact(const unsigned char *src, int width, int height, int channels,
                           const gf_mask *mask, gf_border border, int x, int y, int c)
{
    return conv_exact(src, 8, width, height, channels, mask, border, x, y, c);
}

double gf_conv2d_cpu_exact16(const uint16_t *src, int width, int height, int channels,
                             const gf_mask *mask, gf_border border, int x, int y, int c)
{
    return conv_exact(src, 16, width, height, channels, mask, border, x, y, c);
}

/* An exact value rounded half to even (the default rounding mode) and
 * clamped to 0..top; NaN gives 0. */
static double finish_value(double exact, double top)
{
    const double v = nearbyint(exact);
    return v > 0.0 ? (v < top ? v : top) : 0.0;
}

/* Every value of the reference convolution, at either depth. */
static void conv_reference(const void *src, void *dst, int depth, int width, int height,
                           int channels, int channels_filtered, const gf_mask *mask,
                           gf_border border)
{
    const double top = depth == 16 ? 65535.0 : 255.0;
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++)
            for (int c = 0; c < channels; c++) {
                const size_t at = ((size_t)y * width + x) * channels + c;
                const double v = c >= channels_filtered
                                     ? sample_at(src, depth, at)
                                     : finish_value(conv_exact(src, depth, width, height, channels,
                                                               mask, border, x, y, c), top);
                if (depth == 16)
                    ((uint16_t *)dst)[at] = (uint16_t)v;
                else
                    ((unsigned char *)dst)[at] = (unsigned char)v;
            }
}

void gf_conv2d_cpu(const unsigned char *src, unsigned char *dst, int width, int height,
                   int channels, int channels_filtered, const gf_mask *mask, gf_border border)
{
    conv_reference(src, dst, 8, width, height, channels, channels_filtered, mask, border);
}

void gf_conv2d_cpu16(const uint16_t *src, uint16_t *dst, int width, int height, int channels,
                     int channels_filtered, const gf_mask *mask, gf_border border)
{
    conv_reference(src, dst, 16, width, height, channels, channels_filtered, mask, border);
}

/* ---- tone operations -------------------------------------------------------- */

/* One channel's histogram (one bin a value), sum, sum of squares and range,
 * over samples of 'depth' bits. */
#define MEASURE_SAMPLES(samples, count, channels, c, s)           \
    do {                                                          \
        for (size_t i_ = 0; i_ < (count); i_++) {                 \
            const unsigned v_ = (samples)[i_ * (channels) + (c)];  \
            (s)->histogram[v_]++;                                 \
            (s)->sum += v_;                                       \
            (s)->sum_squares += (unsigned long long)v_ * v_;      \
            if ((int)v_ < (s)->min)                               \
                (s)->min = (int)v_;                               \
            if ((int)v_ > (s)->max)                               \
                (s)->max = (int)v_;                               \
        }                                                         \
    } while (0)

/* One channel's histogram (one bin a value), sum, sum of squares and range,
 * over samples of 'depth' bits. */
static void measure_channel(const void *pixels, int depth, size_t count, int channels, int c,
                            gf_channel_stats *s)
{
    memset(s->histogram, 0, (size_t)(depth == 16 ? GF_BINS16 : GF_BINS) * sizeof s->histogram[0]);
    s->sum = s->sum_squares = 0;
    s->max = 0;
    s->depth = depth;
    s->min = depth == 16 ? 65535 : 255;
    if (depth == 16)
        MEASURE_SAMPLES((const uint16_t *)pixels, count, channels, c, s);
    else
        MEASURE_SAMPLES((const unsigned char *)pixels, count, channels, c, s);
}

void gf_statistics_cpu(const unsigned char *pixels, size_t count, int channels,
                       gf_channel_stats *per_channel)
{
    for (int c = 0; c < channels; c++)
        measure_channel(pixels, 8, count, channels, c, &per_channel[c]);
}

static void cumulate(const unsigned long long *hist, unsigned long long *cdf, int bins)
{
    unsigned long long total = 0;
    for (int v = 0; v < bins; v++)
        cdf[v] = total += hist[v];
}

static void luma_histogram(const unsigned char *pixels, size_t count, int channels,
                           unsigned long long *hist)
{
    memset(hist, 0, GF_BINS * sizeof *hist);
    for (size_t i = 0; i < count; i++) {
        const unsigned char *p = pixels + i * channels;
        hist[gf_luma(p[0], p[1], p[2])]++;
    }
}

static void apply_lut(unsigned char *pixels, size_t count, int channels, int c,
                      const unsigned char *lut)
{
    for (size_t i = 0; i < count; i++)
        pixels[i * channels + c] = lut[pixels[i * channels + c]];
}

void gf_equalize_cpu(unsigned char *pixels, size_t count, int channels, gf_equalize_mode mode,
                     int colour)
{
    unsigned long long hist[GF_BINS], cdf[GF_BINS];
    unsigned char lut[GF_BINS];
    if (mode == GF_EQUALIZE_LUMINANCE && colour == 3) {
        luma_histogram(pixels, count, channels, hist);
        cumulate(hist, cdf, GF_BINS);
        gf_equalize_lut(hist, cdf, lut);
        /* an identity table (a constant image) leaves the pixels as they
         * are, rather than round-tripping them through 8-bit YCrCb */
        if (gf_is_identity_lut(lut))
            return;
        for (size_t i = 0; i < count; i++)
            gf_map_luma(pixels + i * channels, lut);
        return;
    }
    for (int c = 0; c < colour; c++) {
        memset(hist, 0, sizeof hist);
        for (size_t i = 0; i < count; i++)
            hist[pixels[i * channels + c]]++;
        cumulate(hist, cdf, GF_BINS);
        gf_equalize_lut(hist, cdf, lut);
        apply_lut(pixels, count, channels, c, lut);
    }
}

/* lo, hi: the least and greatest of the colour channels' samples, over a
 * pixel array of either sample type (lo and hi start at the type's top and
 * at 0). */
#define COLOUR_RANGE(pixels, count, channels, colour, lo, hi)       \
    do {                                                            \
        for (size_t i_ = 0; i_ < (count); i_++)                     \
            for (int c_ = 0; c_ < (colour); c_++) {                 \
                const int v_ = (pixels)[i_ * (channels) + c_];      \
                (lo) = v_ < (lo) ? v_ : (lo);                       \
                (hi) = v_ > (hi) ? v_ : (hi);                       \
            }                                                       \
    } while (0)

void gf_stretch_cpu(unsigned char *pixels, size_t count, int channels, const gf_stretch *how,
                    int colour)
{
    int lo = 255, hi = 0;
    if (how->kind == GF_STRETCH_NORMALIZE) {
        unsigned long long hist[GF_BINS] = {0}, cdf[GF_BINS];
        if (colour == 3)
            luma_histogram(pixels, count, channels, hist);
        else
            for (size_t i = 0; i < count; i++)
                hist[pixels[i * channels]]++;
        cumulate(hist, cdf, GF_BINS);
        gf_normalize_limits(cdf, how->black, how->white, &lo, &hi);
    } else {
        COLOUR_RANGE(pixels, count, channels, colour, lo, hi);
    }
    unsigned char lut[GF_BINS];
    gf_stretch_lut(lo, hi, lut);
    for (int c = 0; c < colour; c++)
        apply_lut(pixels, count, channels, c, lut);
}

/* ---- tone operations at 16 bits: one bin a value, 65536 ------------------- */

void gf_statistics_cpu16(const uint16_t *pixels, size_t count, int channels,
                         gf_channel_stats *per_channel)
{
    for (int c = 0; c < channels; c++)
        measure_channel(pixels, 16, count, channels, c, &per_channel[c]);
}

/* A histogram, its cdf and a table: too large for a thread's stack. */
typedef struct {
    unsigned long long hist[GF_BINS16], cdf[GF_BINS16];
    unsigned short lut[GF_BINS16];
} tables16;

static tables16 *new_tables16(void)
{
    tables16 *t = calloc(1, sizeof *t);
    if (!t)
        gf_set_error("out of memory for the 16-bit tone tables");
    return t;
}

/* The histogram of the luma of RGB pixels (colour 3), else of channel 0. */
static void colour_histogram16(const uint16_t *pixels, size_t count, int channels, int colour,
                               unsigned long long *hist)
{
    memset(hist, 0, GF_BINS16 * sizeof *hist);
    for (size_t i = 0; i < count; i++) {
        const uint16_t *p = pixels + i * channels;
        hist[colour == 3 ? gf_luma(p[0], p[1], p[2]) : p[0]]++;
    }
}

static void apply_lut16(uint16_t *pixels, size_t count, int channels, int c,
                        const unsigned short *lut)
{
    for (size_t i = 0; i < count; i++)
        pixels[i * channels + c] = lut[pixels[i * channels + c]];
}

int gf_equalize_cpu16(uint16_t *pixels, size_t count, int channels, gf_equalize_mode mode,
                      int colour)
{
    tables16 *t = new_tables16();
    if (!t)
        return -1;
    if (mode == GF_EQUALIZE_LUMINANCE && colour == 3) {
        colour_histogram16(pixels, count, channels, colour, t->hist);
        cumulate(t->hist, t->cdf, GF_BINS16);
        gf_equalize_lut16(t->hist, t->cdf, t->lut);
        /* a constant image stays as it is, as at 8 bits */
        if (!gf_is_identity_lut16(t->lut))
            for (size_t i = 0; i < count; i++)
                gf_map_luma16(pixels + i * channels, t->lut);
        free(t);
        return 0;
    }
    for (int c = 0; c < colour; c++) {
        memset(t->hist, 0, sizeof t->hist);
        for (size_t i = 0; i < count; i++)
            t->hist[pixels[i * channels + c]]++;
        cumulate(t->hist, t->cdf, GF_BINS16);
        gf_equalize_lut16(t->hist, t->cdf, t->lut);
        apply_lut16(pixels, count, channels, c, t->lut);
    }
    free(t);
    return 0;
}

int gf_stretch_cpu16(uint16_t *pixels, size_t count, int channels, const gf_stretch *how,
                     int colour)
{
    tables16 *t = new_tables16();
    if (!t)
        return -1;
    int lo = 65535, hi = 0;
    if (how->kind == GF_STRETCH_NORMALIZE) {
        colour_histogram16(pixels, count, channels, colour, t->hist);
        cumulate(t->hist, t->cdf, GF_BINS16);
        gf_normalize_limits_bins(t->cdf, GF_BINS16, how->black, how->white, &lo, &hi);
    } else {
        COLOUR_RANGE(pixels, count, channels, colour, lo, hi);
    }
    gf_stretch_lut16(lo, hi, t->lut);
    for (int c = 0; c < colour; c++)
        apply_lut16(pixels, count, channels, c, t->lut);
    free(t);
    return 0;
}

/* ---- the backend object --------------------------------------------------- */

typedef struct {
    gf_backend base;
    gf_image *current, *scratch;
    int fast;     /* cpu_conv.c's convolution, else the reference's */
    FILE *log;    /* -v: the path and threads of each convolution */
    gf_rows_ready ahead;  /* the next convolution's source rows still arriving (wait set) */
} cpu_backend;

/* The image's own buffer becomes the backend's (no copy), and img gets a
 * fresh one; download swaps them back, so a CPU run copies no pixels. */
static int cpu_upload(gf_backend *self, gf_image *img)
{
    cpu_backend *b = (cpu_backend *)self;
    gf_image_free(b->current);
    gf_image_free(b->scratch);
    b->scratch = NULL;
    b->current = gf_image_new_depth(img->width, img->height, img->channels,
                                    img->depth == 16 ? 16 : 8);
    if (!b->current)
        return -1;
    unsigned char *fresh = b->current->pixels;
    b->current->pixels = img->pixels;
    img->pixels = fresh;
    return 0;
}

static void reference_convolve(const gf_image *src, gf_image *dst, const gf_mask *mask,
                               gf_border border, int channels_filtered)
{
    if (src->depth == 16)
        gf_conv2d_cpu16(gf_image_samples16(src), (uint16_t *)(void *)dst->pixels, src->width,
                        src->height, src->channels, channels_filtered, mask, border);
    else
        gf_conv2d_cpu(src->pixels, dst->pixels, src->width, src->height, src->channels,
                      channels_filtered, mask, border);
}

/* The bands gf_conv2d_fast ran, or -1. */
static int fast_convolve(const gf_image *src, gf_image *dst, const gf_mask *mask,
                         gf_border border, int channels_filtered, const gf_rows_ready *ahead)
{
    if (ahead->wait && src->depth == 8)
        return gf_conv2d_fast_ahead(src->pixels, dst->pixels, src->width, src->height,
                                    src->channels, channels_filtered, mask, border, ahead);
    if (src->depth == 16)
        return gf_conv2d_fast16(gf_image_samples16(src), (uint16_t *)(void *)dst->pixels,
                                src->width, src->height, src->channels, channels_filtered, mask,
                                border, 0);
    return gf_conv2d_fast(src->pixels, dst->pixels, src->width, src->height, src->channels,
                          channels_filtered, mask, border, 0);
}

static int cpu_convolve(gf_backend *self, const gf_mask *mask, gf_border border,
                        int channels_filtered)
{
    cpu_backend *b = (cpu_backend *)self;
    if (!b->scratch)
        b->scratch = gf_image_new_depth(b->current->width, b->current->height,
                                        b->current->channels, b->current->depth);
    if (!b->scratch)
        return -1;
    gf_image *src = b->current, *dst = b->scratch;
    const gf_rows_ready ahead = b->ahead;
    b->ahead = (gf_rows_ready){0};  /* every row read by the end of this one */
    if (!b->fast)
        reference_convolve(src, dst, mask, border, channels_filtered);
    else {
        const int bands = fast_convolve(src, dst, mask, border, channels_filtered, &ahead);
        if (bands == -2) {
            gf_set_error("the image's decoding stopped");
            return -1;
        }
        if (bands < 0) {
            gf_set_error("out of memory for the CPU convolution of a %dx%d image", src->width,
                         src->height);
            return -1;
        }
        if (b->log) {
            int taps = 0;
            const gf_cpu_path path = gf_cpu_conv_path_depth(mask, src->depth, &taps);
            fprintf(b->log, "gpufilter: cpu: %s: %s sums (%d taps a value), %d thread%s\n",
                    mask->name, gf_cpu_path_name(path), taps, bands, bands == 1 ? "" : "s");
        }
    }
    b->current = dst;
    b->scratch = src;
    return 0;
}

static size_t pixel_count(const gf_image *img)
{
    return (size_t)img->width * (size_t)img->height;
}

static uint16_t *samples16(gf_image *img)
{
    return (uint16_t *)(void *)img->pixels;
}

static int cpu_equalize(gf_backend *self, gf_equalize_mode mode, int colour)
{
    gf_image *img = ((cpu_backend *)self)->current;
    if (img->depth == 16)
        return gf_equalize_cpu16(samples16(img), pixel_count(img), img->channels, mode, colour);
    gf_equalize_cpu(img->pixels, pixel_count(img), img->channels, mode, colour);
    return 0;
}

static int cpu_stretch(gf_backend *self, const gf_stretch *how, int colour)
{
    gf_image *img = ((cpu_backend *)self)->current;
    if (img->depth == 16)
        return gf_stretch_cpu16(samples16(img), pixel_count(img), img->channels, how, colour);
    gf_stretch_cpu(img->pixels, pixel_count(img), img->channels, how, colour);
    return 0;
}

static int cpu_statistics(gf_backend *self, gf_channel_stats *per_channel)
{
    gf_image *img = ((cpu_backend *)self)->current;
    if (img->depth == 16)
        gf_statistics_cpu16(gf_image_samples16(img), pixel_count(img), img->channels,
                            per_channel);
    else
        gf_statistics_cpu(img->pixels, pixel_count(img), img->channels, per_channel);
    return 0;
}

static int cpu_on_host(gf_backend *self, gf_host_op op, const void *arg)
{
    return op(((cpu_backend *)self)->current, arg);
}

static int cpu_finish(gf_backend *self)
{
    (void)self;
    return 0;
}

static int cpu_download(gf_backend *self, gf_image *img)
{
    cpu_backend *b = (cpu_backend *)self;
    unsigned char *result = b->current->pixels;
    b->current->pixels = img->pixels;
    img->pixels = result;
    return 0;
}

static void cpu_destroy(gf_backend *self)
{
    cpu_backend *b = (cpu_backend *)self;
    gf_image_free(b->current);
    gf_image_free(b->scratch);
    free(b);
}

static gf_backend *new_cpu_backend(const gf_backend_options *options, int fast)
{
    cpu_backend *b = calloc(1, sizeof *b);
    if (!b) {
        gf_set_error("out of memory");
        return NULL;
    }
    b->base = (gf_backend){
        .name = fast ? "cpu" : "reference",
        .upload = cpu_upload,
        .convolve = cpu_convolve,
        .equalize = cpu_equalize,
        .stretch = cpu_stretch,
        .statistics = cpu_statistics,
        .on_host = cpu_on_host,
        .finish = cpu_finish,
        .download = cpu_download,
        .destroy = cpu_destroy,
    };
    b->fast = fast;
    b->log = options ? options->log : NULL;
    return &b->base;
}

gf_backend *gf_backend_cpu_new(const gf_backend_options *options)
{
    return new_cpu_backend(options, 1);
}

gf_backend *gf_backend_reference_new(const gf_backend_options *options)
{
    return new_cpu_backend(options, 0);
}

void gf_backend_cpu_rows_ahead(gf_backend *cpu, const gf_rows_ready *ahead)
{
    ((cpu_backend *)cpu)->ahead = ahead ? *ahead : (gf_rows_ready){0};
}
