/* cuda_depth16.c - the GPU backend's operations on a 16-bit image
 * (kernels/depth16.cu), whole or in strips.
 *
 * Convolution: one matrix that factors (and is not 1x1) takes the
 * separable kernels, every other mask the direct one; integer weights
 * whose sums stay under 2^31 are summed in int. --kernel and --tile choose
 * among the 8-bit kernels and are refused here.
 * Tone operations and statistics: 65536-bin histograms counted on the
 * device (added over the strips), the tables built on the host with
 * tone.h's arithmetic (the CPU backend's), then applied on the device;
 * statistics derive min, max, sum and sum of squares from the histograms,
 * exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/depth16.h"
#include "cuda_backend.h"

#define BINS16 GF_BINS16

/* ---- convolution ------------------------------------------------------------- */

typedef struct {
    depth16_conv p;
    int separable;
    const gf_mask *mask;
} conv16_job;

/* Integer weights whose every sum fits an int: 65535 x sum |w| < 2^31;
 * *bound: the largest 65535 x sum |w| of the matrices. */
static int integer_weights(const gf_mask *mask, double *bound)
{
    const int taps = mask->width * mask->height;
    *bound = 0.0;
    for (int k = 0; k < mask->count; k++) {
        double total = 0.0;
        for (int i = 0; i < taps; i++) {
            const double w = mask->weights[k][i];
            if (w != floor(w))
                return 0;
            total += fabs(w);
        }
        if (total * 65535.0 >= 2147483648.0)
            return 0;
        *bound = fmax(*bound, total * 65535.0);
    }
    return 1;
}

static void *device_copy(const cuda_backend *b, const void *host, size_t bytes)
{
    void *device = NULL;
    if (cudaMalloc(&device, bytes) != cudaSuccess ||
        gf_cuda_to_device(b, device, host, bytes) != cudaSuccess ||
        cudaStreamSynchronize(b->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(device);
        return NULL;
    }
    return device;
}

/* The device copies of what the kernel reads: the row and column, or
 * every matrix (as integers where they are). */
static int upload_mask16(const cuda_backend *b, const gf_mask *mask, conv16_job *job)
{
    depth16_conv *p = &job->p;
    if (job->separable) {
        double *both = malloc((size_t)(mask->width + mask->height) * sizeof *both);
        if (!both)
            return -1;
        memcpy(both, mask->row, (size_t)mask->width * sizeof *both);
        memcpy(both + mask->width, mask->column, (size_t)mask->height * sizeof *both);
        double *device = device_copy(b, both, (size_t)(mask->width + mask->height) * sizeof *both);
        free(both);
        p->row = device;
        p->column = device ? device + mask->width : NULL;
        return device ? 0 : -1;
    }
    const size_t taps = (size_t)mask->width * (size_t)mask->height, n = (size_t)mask->count * taps;
    double bound;
    const int integer = integer_weights(mask, &bound);
    void *host = malloc(n * (integer ? sizeof(int) : sizeof(double)));
    if (!host)
        return -1;
    for (int k = 0; k < mask->count; k++)
        for (size_t i = 0; i < taps; i++) {
            if (integer)
                ((int *)host)[k * taps + i] = (int)mask->weights[k][i];
            else
                ((double *)host)[k * taps + i] = mask->weights[k][i];
        }
    void *device = device_copy(b, host, n * (integer ? sizeof(int) : sizeof(double)));
    free(host);
    /* one matrix of integers, an integer scale and offset: finished in integers */
    const double scale = mask->scale[0], offset = mask->offset[0];
    if (integer && mask->count == 1 && mask->combine == GF_COMBINE_NONE && scale == floor(scale) &&
        scale >= 1.0 && scale <= 1073741824.0 && offset == floor(offset) && fabs(offset) <= 1048576.0) {
        depth16_set_integer_scale(p, (int)scale, (int)offset, bound);
    }
    if (integer)
        p->int_weights = device;
    else
        p->weights = device;
    return device ? 0 : -1;
}

static void free_job16(conv16_job *job)
{
    cudaFree((void *)job->p.weights);
    cudaFree((void *)job->p.int_weights);
    cudaFree((void *)job->p.row);  /* the column shares its allocation */
    cudaFree(job->p.scratch);
}

static int run_band16(cuda_backend *b, void *arg, const unsigned char *src, unsigned char *dst,
                      int height)
{
    conv16_job *job = arg;
    job->p.src = (const uint16_t *)(const void *)src;
    job->p.dst = (uint16_t *)(void *)dst;
    job->p.height = height;
    if (b->options.log)
        CUDA_CHECK(cudaEventRecord(b->start, b->stream), "recording an event");
    CUDA_CHECK(job->separable ? depth16_conv_separable(&job->p, b->stream)
                              : depth16_conv_direct(&job->p, b->stream),
               "launching conv2d");
    if (b->options.log) {
        float ms = 0.0f;
        CUDA_CHECK(cudaEventRecord(b->stop, b->stream), "recording an event");
        CUDA_CHECK(cudaEventSynchronize(b->stop), "running conv2d");
        CUDA_CHECK(cudaEventElapsedTime(&ms, b->start, b->stop), "timing conv2d");
        const double pixels = (double)job->p.width * height;
        fprintf(b->options.log,
                "gpufilter: conv2d 16-bit %s (sums in %s) %s %dx%d on %dx%dx%d: %.3f ms "
                "(%.1f Gpx/s) on %s (device %d)\n",
                job->separable ? "separable" : "direct", job->p.int_weights ? "int" : "double",
                job->mask->name, job->mask->width, job->mask->height, job->p.width, height,
                job->p.channels, ms, ms > 0 ? pixels / (ms * 1e6) : 0.0, b->prop.name,
                b->options.device);
    }
    return 0;
}

static void job_of(const cuda_backend *b, const gf_mask *mask, gf_border border,
                   int channels_filtered, conv16_job *job)
{
    *job = (conv16_job){.mask = mask};
    depth16_conv *p = &job->p;
    p->width = b->width;
    p->height = b->strips ? (int)b->strip_rows : b->height;
    p->channels = b->channels;
    p->channels_filtered = channels_filtered;
    p->border = (int)border;
    p->mask_width = mask->width;
    p->mask_height = mask->height;
    p->mask_count = mask->count;
    p->combine = mask->combine;
    for (int k = 0; k < mask->count; k++) {
        p->scale[k] = mask->scale[k];
        p->offset[k] = mask->offset[k];
    }
    p->amount = mask->amount;
    p->threshold = mask->threshold;
    job->separable = mask->separable && mask->count == 1 && mask->width * mask->height > 1 &&
                     mask->row && mask->column;
}

int gf_cuda_convolve16(cuda_backend *b, const gf_mask *mask, gf_border border,
                       int channels_filtered)
{
    if (b->options.conv_version != GF_CONV_AUTO || b->options.tile_width) {
        gf_set_error("--kernel and --tile choose among the 8-bit kernels; a 16-bit image has its "
                     "own (--depth 8 converts it)");
        return -2;
    }
    conv16_job job;
    job_of(b, mask, border, channels_filtered, &job);
    int status = upload_mask16(b, mask, &job);
    const size_t scratch = job.separable ? depth16_scratch_bytes(&job.p) : 0;
    if (status == 0 && scratch && cudaMalloc((void **)&job.p.scratch, scratch) != cudaSuccess) {
        (void)cudaGetLastError();
        status = -1;
    }
    if (status < 0) {
        free_job16(&job);
        gf_set_error("out of GPU memory for the %dx%d mask %s on a 16-bit %dx%d image (%zu MB of "
                     "scratch); --backend cpu runs it", mask->width, mask->height, mask->name,
                     b->width, b->height, scratch >> 20);
        return -1;
    }
    if (b->strips)
        status = gf_cuda_filter_strips(b, mask, border, run_band16, &job);
    else if ((status = run_band16(b, &job, b->buffer[b->current], b->buffer[1 - b->current],
                                  b->height)) == 0)
        b->current = 1 - b->current;
    if (cudaStreamSynchronize(b->stream) != cudaSuccess && status == 0) {
        gf_set_error("CUDA error while running conv2d: %s", cudaGetErrorString(cudaGetLastError()));
        status = -1;
    }
    free_job16(&job);
    return status;
}

/* ---- histograms and tables ------------------------------------------------------ */

static int ensure_tone16(cuda_backend *b)
{
    if (!b->hist16)
        CUDA_CHECK(cudaMalloc((void **)&b->hist16, 4 * BINS16 * sizeof *b->hist16),
                   "allocating histograms");
    if (!b->lut16)
        CUDA_CHECK(cudaMalloc((void **)&b->lut16, 4 * BINS16 * sizeof *b->lut16),
                   "allocating look-up tables");
    return 0;
}

static const uint16_t *pixels_at(const unsigned char *buffer)
{
    return (const uint16_t *)(const void *)buffer;
}

/* 65536-bin histograms of the image into hist (host): one of the luma, or
 * one per channel; added over the strips. */
static int histograms16(cuda_backend *b, int luma, unsigned long long *hist)
{
    const size_t counters = (size_t)(luma ? 1 : b->channels) * BINS16;
    unsigned int *band = malloc(counters * sizeof *band);
    if (!band || ensure_tone16(b) < 0) {
        free(band);
        if (!band)
            gf_set_error("out of memory for histograms");
        return -1;
    }
    memset(hist, 0, counters * sizeof *hist);
    const int step = b->strips ? (int)b->strip_rows : b->height;
    int status = 0;
    for (int y0 = 0; y0 < b->height && status == 0; y0 += step) {
        const int rows = b->strips ? gf_cuda_band_rows(b, y0) : b->height;
        if (b->strips && gf_cuda_upload_band(b, y0, rows) < 0) {
            status = -1;
            break;
        }
        const unsigned char *src = b->strips ? b->buffer[0] : b->buffer[b->current];
        cudaError_t err = depth16_histogram(pixels_at(src), (size_t)rows * b->width,
                                            b->channels, luma, b->hist16, b->stream);
        if (err == cudaSuccess)
            err = gf_cuda_to_host(b, band, b->hist16, counters * sizeof *band);
        if (err != cudaSuccess) {
            gf_set_error("CUDA error while counting histograms: %s", cudaGetErrorString(err));
            status = -1;
            break;
        }
        for (size_t i = 0; i < counters; i++)
            hist[i] += band[i];
    }
    free(band);
    return status;
}

/* Map channels 0..colour-1 through the tables (host, 'tables' of them). */
static int apply_tables16(cuda_backend *b, const uint16_t *tables, int count, int colour, int mode)
{
    if (ensure_tone16(b) < 0)
        return -1;
    CUDA_CHECK(gf_cuda_to_device(b, b->lut16, tables, (size_t)count * BINS16 * sizeof *tables),
               "uploading look-up tables");
    if (!b->strips) {
        CUDA_CHECK(depth16_apply_lut((uint16_t *)(void *)b->buffer[b->current], (size_t)b->width * b->height,
                                     b->channels, colour, b->lut16, mode, b->stream),
                   "launching the LUT");
        CUDA_CHECK(cudaStreamSynchronize(b->stream), "applying the LUT");
        return 0;
    }
    const size_t line = gf_cuda_row_bytes(b);
    for (int y0 = 0; y0 < b->height; y0 += (int)b->strip_rows) {
        const int rows = gf_cuda_band_rows(b, y0);
        if (gf_cuda_upload_band(b, y0, rows) < 0)
            return -1;
        CUDA_CHECK(depth16_apply_lut((uint16_t *)(void *)b->buffer[0], (size_t)rows * b->width,
                                     b->channels, colour, b->lut16, mode, b->stream),
                   "launching the LUT");
        CUDA_CHECK(gf_cuda_to_host(b, b->host[b->host_current] + (size_t)y0 * line, b->buffer[0],
                                   (size_t)rows * line),
                   "downloading a strip");
    }
    return 0;
}

static void cumulate16(const unsigned long long *hist, unsigned long long *cdf)
{
    unsigned long long total = 0;
    for (int v = 0; v < BINS16; v++)
        cdf[v] = total += hist[v];
}

/* Host scratch for one operation: histograms, a CDF and the tables. */
typedef struct {
    unsigned long long *hist, *cdf;
    uint16_t *tables;
} tone16_scratch;

static int scratch16(tone16_scratch *s, int channels)
{
    s->hist = malloc((size_t)channels * BINS16 * sizeof *s->hist);
    s->cdf = malloc(BINS16 * sizeof *s->cdf);
    s->tables = malloc((size_t)channels * BINS16 * sizeof *s->tables);
    if (s->hist && s->cdf && s->tables)
        return 0;
    gf_set_error("out of memory for the tone tables");
    return -1;
}

static void free_scratch16(tone16_scratch *s)
{
    free(s->hist);
    free(s->cdf);
    free(s->tables);
}

int gf_cuda_equalize16(cuda_backend *b, gf_equalize_mode mode, int colour)
{
    const int luma = mode == GF_EQUALIZE_LUMINANCE && colour == 3;
    tone16_scratch s;
    int status = scratch16(&s, b->channels);
    if (status == 0)
        status = histograms16(b, luma, s.hist);
    if (status == 0) {
        const int tables = luma ? 1 : colour;
        for (int c = 0; c < tables; c++) {
            cumulate16(s.hist + (size_t)c * BINS16, s.cdf);
            gf_equalize_lut16(s.hist + (size_t)c * BINS16, s.cdf, s.tables + (size_t)c * BINS16);
        }
        /* as the CPU: an identity table (a constant image) leaves the pixels
         * as they are, rather than round-tripping them through YCrCb */
        if (!(luma && gf_is_identity_lut16(s.tables)))
            status = apply_tables16(b, s.tables, tables, colour,
                                    luma ? DEPTH16_LUT_LUMA : DEPTH16_LUT_PER_CHANNEL);
    }
    free_scratch16(&s);
    return status;
}

int gf_cuda_stretch16(cuda_backend *b, const gf_stretch *how, int colour)
{
    tone16_scratch s;
    int status = scratch16(&s, b->channels);
    int lo = BINS16 - 1, hi = 0;
    if (status == 0 && how->kind == GF_STRETCH_NORMALIZE) {
        /* gray: channel 0's histogram is the first of the per-channel ones */
        status = histograms16(b, colour == 3, s.hist);
        if (status == 0) {
            cumulate16(s.hist, s.cdf);
            gf_normalize_limits_bins(s.cdf, BINS16, how->black, how->white, &lo, &hi);
        }
    } else if (status == 0) {
        status = histograms16(b, 0, s.hist);
        for (int c = 0; c < colour && status == 0; c++)
            for (int v = 0; v < BINS16; v++)
                if (s.hist[(size_t)c * BINS16 + v]) {
                    lo = v < lo ? v : lo;
                    hi = v > hi ? v : hi;
                }
    }
    if (status == 0) {
        gf_stretch_lut16(lo, hi, s.tables);
        status = apply_tables16(b, s.tables, 1, colour, DEPTH16_LUT_SHARED);
    }
    free_scratch16(&s);
    return status;
}

int gf_cuda_statistics16(cuda_backend *b, gf_channel_stats *per_channel)
{
    unsigned long long *hist = malloc((size_t)b->channels * BINS16 * sizeof *hist);
    if (!hist) {
        gf_set_error("out of memory for histograms");
        return -1;
    }
    if (histograms16(b, 0, hist) < 0) {
        free(hist);
        return -1;
    }
    for (int c = 0; c < b->channels; c++) {
        gf_channel_stats *s = &per_channel[c];
        memcpy(s->histogram, hist + (size_t)c * BINS16, BINS16 * sizeof s->histogram[0]);
        s->depth = 16;
        s->sum = s->sum_squares = 0;
        s->min = BINS16 - 1;
        s->max = 0;
        for (int v = 0; v < BINS16; v++) {
            const unsigned long long n = s->histogram[v];
            if (!n)
                continue;
            s->min = v < s->min ? v : s->min;
            s->max = v;
            s->sum += n * (unsigned long long)v;
            s->sum_squares += n * (unsigned long long)v * (unsigned long long)v;
        }
    }
    free(hist);
    return 0;
}

void gf_cuda_free16(cuda_backend *b)
{
    cudaFree(b->hist16);
    cudaFree(b->lut16);
    b->hist16 = NULL;
    b->lut16 = NULL;
}
