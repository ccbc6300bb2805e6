/* jpeg_turbo.c - JPEG decoding and encoding through libjpeg-turbo's
 * TurboJPEG API (Debian's libturbojpeg0-dev, linked statically) when the
 * build has it: its SIMD codec is about twice as fast as stb_image's, and
 * in a batch the codecs are the bound. Without it, or for a JPEG it will
 * not take (CMYK, a warning about damaged data), the caller uses stb_image,
 * so what is accepted never narrows. Encoding runs in strips on threads,
 * joined with restart markers (jpeg_strips.h). */
#include "jpeg_turbo.h"

#include <stdlib.h>
#include <string.h>

#ifdef GF_HAVE_TURBOJPEG
#include <stdatomic.h>
#include <turbojpeg.h>

#include "jpeg_strips.h"
#include "util.h"

int gf_jpeg_turbo_available(void)
{
    return 1;
}

unsigned char *gf_jpeg_turbo_decode(const unsigned char *data, size_t size, int *width,
                                    int *height, int *channels)
{
    tjhandle tj = tjInitDecompress();
    if (!tj)
        return NULL;
    unsigned char *pixels = NULL;
    int w, h, subsampling, colourspace;
    if (tjDecompressHeader3(tj, data, (unsigned long)size, &w, &h, &subsampling, &colourspace) == 0 &&
        (colourspace == TJCS_GRAY || colourspace == TJCS_YCbCr || colourspace == TJCS_RGB)) {
        const int c = colourspace == TJCS_GRAY ? 1 : 3;
        pixels = gf_malloc_large((size_t)w * (size_t)h * (size_t)c);
        /* accurate IDCT and smooth chroma upsampling: the library's defaults */
        if (pixels && tjDecompress2(tj, data, (unsigned long)size, pixels, w, 0, h,
                                    c == 1 ? TJPF_GRAY : TJPF_RGB, 0) != 0) {
            free(pixels);  /* an error, or a warning about damaged data */
            pixels = NULL;
        }
        *width = w;
        *height = h;
        *channels = c;
    }
    tjDestroy(tj);
    return pixels;
}

/* One image (or strip) in one piece; 0, or -1. */
static int encode_whole(const unsigned char *src, int width, int pitch, int height, int format,
                        int sampling, int quality, unsigned char **out, size_t *out_size)
{
    unsigned long capacity = tjBufSize(width, height, sampling);
    unsigned char *buffer = capacity != (unsigned long)-1 ? malloc(capacity) : NULL;
    tjhandle tj = tjInitCompress();
    int status = -1;
    if (buffer && tj) {
        unsigned long size = capacity;
        if (tjCompress2(tj, src, width, pitch, height, format, &buffer, &size, sampling, quality,
                        TJFLAG_NOREALLOC) == 0) {
            *out = buffer;
            *out_size = size;
            buffer = NULL;
            status = 0;
        }
    }
    if (tj)
        tjDestroy(tj);
    free(buffer);
    return status;
}

/* Strips of STRIP_ROWS rows (a whole number of MCU rows for every
 * sampling), a fixed height so that the file does not depend on the
 * threads; their restart markers cost 2 bytes and a partial byte each. */
#define STRIP_ROWS 128

typedef struct {
    const unsigned char *src;  /* the band's first row */
    int width, pitch, format, sampling, quality;
    int strip_rows, height, count;  /* the band's rows and strips */
    unsigned char **strips;
    size_t *sizes;
    atomic_int next, failed;
} strip_work;

static void *encode_strips(void *arg)
{
    strip_work *w = arg;
    for (int i; (i = atomic_fetch_add(&w->next, 1)) < w->count;) {
        const int y0 = i * w->strip_rows;
        const int rows = w->height - y0 < w->strip_rows ? w->height - y0 : w->strip_rows;
        if (encode_whole(w->src + (size_t)y0 * w->pitch, w->width, w->pitch, rows, w->format,
                         w->sampling, w->quality, &w->strips[i], &w->sizes[i]) < 0)
            atomic_store(&w->failed, 1);
    }
    return NULL;
}

/* The strip height of an image of this width and sampling, and the MCUs
 * of one strip (its restart interval, at most 65535). */
static int strip_rows_for(int width, int sampling, int *restart_mcus)
{
    const int mcu = sampling == TJSAMP_420 ? 16 : 8;
    const int mcus_per_row = (width + mcu - 1) / mcu;
    int rows = STRIP_ROWS;
    while (rows > mcu && mcus_per_row * (rows / mcu) > 65535)
        rows /= 2;
    *restart_mcus = mcus_per_row * (rows / mcu);
    return rows;
}

/* Encode the band's strips on gf_image_threads() threads into w->strips;
 * 0, or -1. The caller frees them (free_strips). */
static int encode_band(strip_work *w)
{
    w->count = (w->height + w->strip_rows - 1) / w->strip_rows;
    w->strips = calloc((size_t)w->count, sizeof *w->strips);
    w->sizes = calloc((size_t)w->count, sizeof *w->sizes);
    if (!w->strips || !w->sizes)
        return -1;
    atomic_store(&w->next, 0);
    const int threads = gf_image_threads();
    gf_run_shared(encode_strips, w, threads < w->count ? threads : w->count);
    return atomic_load(&w->failed) ? -1 : 0;
}

static void free_strips(strip_work *w)
{
    for (int i = 0; w->strips && i < w->count; i++)
        free(w->strips[i]);
    free(w->strips);
    free(w->sizes);
    w->strips = NULL;
    w->sizes = NULL;
}

/* The image in strips, joined; 1 when it is one strip or the strips cannot
 * be joined (then it is encoded whole). */
static int encode_in_strips(strip_work *w, unsigned char **out, size_t *out_size)
{
    int restart_mcus;
    w->strip_rows = strip_rows_for(w->width, w->sampling, &restart_mcus);
    if (w->height <= w->strip_rows)
        return 1;
    int status = encode_band(w);
    if (status == 0)
        status = gf_jpeg_join_strips(w->strips, w->sizes, w->count, w->height, restart_mcus, out,
                                     out_size);
    free_strips(w);
    return status;
}

/* stb_image_write's choices, kept: alpha dropped, gray stays gray, full
 * chroma resolution above quality 90 */
static strip_work strip_work_for(const unsigned char *src, int width, int height, int channels,
                                 int quality)
{
    return (strip_work){
        .src = src,
        .width = width,
        .pitch = width * (channels == 2 ? 1 : channels),
        .format = channels <= 2 ? TJPF_GRAY : channels == 3 ? TJPF_RGB : TJPF_RGBX,
        .sampling = channels <= 2 ? TJSAMP_GRAY : quality > 90 ? TJSAMP_444 : TJSAMP_420,
        .quality = quality,
        .height = height,
    };
}

int gf_jpeg_turbo_encode(const unsigned char *pixels, int width, int height, int channels,
                         int quality, unsigned char **out, size_t *out_size)
{
    const unsigned char *src = pixels;
    unsigned char *gray = NULL;
    if (channels == 2) {
        size_t n = (size_t)width * (size_t)height;
        if (!(gray = malloc(n)))
            return -1;
        for (size_t i = 0; i < n; i++)
            gray[i] = pixels[2 * i];
        src = gray;
    }
    strip_work w = strip_work_for(src, width, height, channels, quality);
    int status = encode_in_strips(&w, out, out_size);
    if (status == 1)
        status = encode_whole(src, width, w.pitch, height, w.format, w.sampling, quality, out,
                              out_size);
    free(gray);
    return status;
}

/* ---- an image written a band at a time ---------------------------------------- */

struct gf_jpeg_stream {
    strip_work shape;  /* width, pitch, format, sampling, quality, strip_rows */
    int height, rows_written;
    gf_jpeg_joiner *joiner;
};

gf_jpeg_stream *gf_jpeg_stream_new(int width, int height, int channels, int quality,
                                   gf_jpeg_sink sink, void *user)
{
    if (channels == 2 || width < 1 || height < 1 || height > 65535)
        return NULL;
    gf_jpeg_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->shape = strip_work_for(NULL, width, height, channels, quality);
    int restart_mcus;
    s->shape.strip_rows = strip_rows_for(width, s->shape.sampling, &restart_mcus);
    s->height = height;
    if (height <= s->shape.strip_rows ||
        !(s->joiner = gf_jpeg_joiner_new(height, restart_mcus, sink, user))) {
        free(s);
        return NULL;
    }
    return s;
}

int gf_jpeg_stream_strip_rows(const gf_jpeg_stream *s)
{
    return s->shape.strip_rows;
}

int gf_jpeg_stream_write(gf_jpeg_stream *s, const unsigned char *pixels, int rows)
{
    if (rows < 1 || rows > s->height - s->rows_written ||
        (rows % s->shape.strip_rows && rows != s->height - s->rows_written))
        return -1;
    strip_work w = s->shape;
    w.src = pixels;
    w.height = rows;
    int status = encode_band(&w);
    for (int i = 0; i < w.count && status == 0; i++)
        status = gf_jpeg_joiner_add(s->joiner, w.strips[i], w.sizes[i]) == 0 ? 0 : -1;
    free_strips(&w);
    s->rows_written += rows;
    return status;
}

int gf_jpeg_stream_end(gf_jpeg_stream *s)
{
    return s->rows_written == s->height ? gf_jpeg_joiner_end(s->joiner) : -1;
}

void gf_jpeg_stream_free(gf_jpeg_stream *s)
{
    if (s)
        gf_jpeg_joiner_free(s->joiner);
    free(s);
}

#else

int gf_jpeg_turbo_available(void)
{
    return 0;
}

unsigned char *gf_jpeg_turbo_decode(const unsigned char *data, size_t size, int *width,
                                    int *height, int *channels)
{
    (void)data;
    (void)size;
    (void)width;
    (void)height;
    (void)channels;
    return NULL;
}

int gf_jpeg_turbo_encode(const unsigned char *pixels, int width, int height, int channels,
                         int quality, unsigned char **out, size_t *out_size)
{
    (void)pixels;
    (void)width;
    (void)height;
    (void)channels;
    (void)quality;
    (void)out;
    (void)out_size;
    return -1;
}

gf_jpeg_stream *gf_jpeg_stream_new(int width, int height, int channels, int quality,
                                   gf_jpeg_sink sink, void *user)
{
    (void)width;
    (void)height;
    (void)channels;
    (void)quality;
    (void)sink;
    (void)user;
    return NULL;
}

int gf_jpeg_stream_strip_rows(const gf_jpeg_stream *stream)
{
    (void)stream;
    return 0;
}

int gf_jpeg_stream_write(gf_jpeg_stream *stream, const unsigned char *pixels, int rows)
{
    (void)stream;
    (void)pixels;
    (void)rows;
    return -1;
}

int gf_jpeg_stream_end(gf_jpeg_stream *stream)
{
    (void)stream;
    return -1;
}

void gf_jpeg_stream_free(gf_jpeg_stream *stream)
{
    (void)stream;
}

#endif
