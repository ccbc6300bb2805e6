/* backend_cuda.c - host side of the GPU backend: device, buffers, tile
 * choice, launches. One upload and one download per image; every operation
 * in between runs on device buffers (two, used in turn). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../kernels/kernels.h"
#include "backend.h"
#include "util.h"

#define CUDA_CHECK(call, what)                                                        \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            gf_set_error("CUDA error while %s: %s", (what), cudaGetErrorString(err_)); \
            return -1;                                                                \
        }                                                                             \
    } while (0)

typedef struct {
    gf_backend base;
    gf_backend_options options;
    struct cudaDeviceProp prop;
    unsigned char *buffer[2];   /* current image in buffer[current] */
    int current;
    size_t buffer_bytes;
    float *weights;             /* GF_MASK_MAX_MATRICES * GF_MASK_MAX_TAPS */
    /* tone scratch: histograms, their CDFs, LUTs and a reduction, all on
     * the device; only statistics are ever copied back */
    unsigned long long *hist, *cdf;   /* 4 * GF_BINS each */
    unsigned char *lut;               /* 4 * GF_BINS */
    reduce_result *range;
    int width, height, channels;
    cudaEvent_t start, stop;
} cuda_backend;

/* ---- tile choice ------------------------------------------------------------ */

typedef struct {
    int blocks_per_sm;
    double occupancy;  /* resident warps / the SM's maximum */
} occupancy_info;

static int occupancy_of(const cuda_backend *b, int version, const conv2d_launch *p,
                        occupancy_info *info)
{
    int threads = p->tile_width * p->tile_height;
    size_t shared = conv2d_shared_bytes(version, p);
    const void *entry = conv2d_kernel_entry(version, p->channels);
    if (shared > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)shared), "raising the shared-memory limit");
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->blocks_per_sm, entry,
                                                             threads, shared),
               "querying occupancy");
    int warps = (threads + 31) / 32;
    info->occupancy = (double)(info->blocks_per_sm * warps) /
                      (double)(b->prop.maxThreadsPerMultiProcessor / 32);
    return 0;
}

/* Whether a tile can launch on this device; -2 and a message naming the
 * limit when it cannot (a usage error, not a device failure). */
static int tile_fits(const cuda_backend *b, int version, const conv2d_launch *p)
{
    const struct cudaDeviceProp *d = &b->prop;
    long threads = (long)p->tile_width * p->tile_height;
    if (threads > d->maxThreadsPerBlock || p->tile_width > d->maxThreadsDim[0] ||
        p->tile_height > d->maxThreadsDim[1]) {
        gf_set_error("tile %dx%d cannot launch on %s: %ld threads; the limit is %d per block "
                     "(and %d x %d in x and y)", p->tile_width, p->tile_height, d->name, threads,
                     d->maxThreadsPerBlock, d->maxThreadsDim[0], d->maxThreadsDim[1]);
        return -2;
    }
    size_t shared = conv2d_shared_bytes(version, p);
    if (shared > d->sharedMemPerBlockOptin) {
        gf_set_error("tile %dx%d with a %dx%d mask needs %zu bytes of shared memory; %s allows "
                     "%zu per block", p->tile_width, p->tile_height, p->mask_width,
                     p->mask_height, shared, d->name, d->sharedMemPerBlockOptin);
        return -2;
    }
    return 0;
}

/* Shared-memory bytes loaded per output pixel relative to a halo-free tile. */
static double halo_overhead(const conv2d_launch *p)
{
    return (double)(p->tile_width + p->mask_width - 1) * (p->tile_height + p->mask_height - 1) /
           ((double)p->tile_width * p->tile_height);
}

/* Default tile: the highest theoretical occupancy the occupancy API reports,
 * then the least halo overhead, then the larger tile. Widths are multiples
 * of 16 so that a row of the tile is read with coalesced accesses. */
static int choose_tile(const cuda_backend *b, int version, conv2d_launch *p)
{
    static const int widths[] = {16, 32, 64, 128, 256};
    static const int heights[] = {1, 2, 4, 8, 16, 32, 64};
    double best_occupancy = -1.0, best_overhead = 0.0;
    int best_w = 32, best_h = 8;
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        for (size_t j = 0; j < sizeof heights / sizeof heights[0]; j++) {
            conv2d_launch c = *p;
            c.tile_width = widths[i];
            c.tile_height = heights[j];
            int threads = c.tile_width * c.tile_height;
            if (threads < 64 || tile_fits(b, version, &c) < 0)
                continue;
            occupancy_info info;
            if (occupancy_of(b, version, &c, &info) < 0)
                return -1;
            if (info.blocks_per_sm == 0)
                continue;
            double overhead = halo_overhead(&c);
            int better = info.occupancy > best_occupancy + 1e-9 ||
                         (fabs(info.occupancy - best_occupancy) <= 1e-9 &&
                          (overhead < best_overhead - 1e-9 ||
                           (fabs(overhead - best_overhead) <= 1e-9 && threads > best_w * best_h)));
            if (better) {
                best_occupancy = info.occupancy;
                best_overhead = overhead;
                best_w = c.tile_width;
                best_h = c.tile_height;
            }
        }
    p->tile_width = best_w;
    p->tile_height = best_h;
    return 0;
}

/* ---- backend primitives ----------------------------------------------------- */

static int cuda_upload(gf_backend *self, const gf_image *img)
{
    cuda_backend *b = (cuda_backend *)self;
    size_t bytes = gf_image_bytes(img);
    /* a batch calls from several threads; each starts on device 0 */
    CUDA_CHECK(cudaSetDevice(b->options.device), "selecting the device");
    if (bytes > b->buffer_bytes) {
        for (int i = 0; i < 2; i++) {
            cudaFree(b->buffer[i]);
            b->buffer[i] = NULL;
        }
        b->buffer_bytes = 0;
        for (int i = 0; i < 2; i++)
            CUDA_CHECK(cudaMalloc((void **)&b->buffer[i], bytes), "allocating image buffers");
        b->buffer_bytes = bytes;
    }
    b->width = img->width;
    b->height = img->height;
    b->channels = img->channels;
    b->current = 0;
    CUDA_CHECK(cudaMemcpy(b->buffer[0], img->pixels, bytes, cudaMemcpyHostToDevice),
               "uploading the image");
    return 0;
}

static int upload_weights(cuda_backend *b, const gf_mask *mask, conv2d_launch *p)
{
    const int taps = mask->width * mask->height;
    float host[GF_MASK_MAX_MATRICES * GF_MASK_MAX_TAPS];
    for (int k = 0; k < mask->count; k++) {
        for (int i = 0; i < taps; i++)
            host[k * taps + i] = (float)mask->weights[k][i];
        p->scale[k] = (float)mask->scale[k];
        p->offset[k] = (float)mask->offset[k];
    }
    CUDA_CHECK(cudaMemcpy(b->weights, host, (size_t)mask->count * taps * sizeof(float),
                          cudaMemcpyHostToDevice), "uploading the mask");
    p->weights = b->weights;
    return 0;
}

static const char *const version_names[CONV2D_VERSIONS] = {"naive", "tiled"};

static void report_launch(const cuda_backend *b, int version, const conv2d_launch *p,
                          const gf_mask *mask, float ms)
{
    occupancy_info info = {0, 0.0};
    if (occupancy_of(b, version, p, &info) < 0)
        return;
    unsigned grid_x = (unsigned)((p->width + p->tile_width - 1) / p->tile_width);
    unsigned grid_y = (unsigned)((p->height + p->tile_height - 1) / p->tile_height);
    double pixels = (double)p->width * p->height;
    fprintf(b->options.log,
            "gpufilter: conv2d %s %s %dx%d on %dx%dx%d: tile %dx%d, block %d threads, "
            "grid %ux%u, occupancy %.0f%% (%d blocks/SM), shared %zu B, %.3f ms (%.1f Gpx/s) on %s\n",
            version_names[version], mask->name, mask->width, mask->height, p->width, p->height,
            p->channels, p->tile_width, p->tile_height, p->tile_width * p->tile_height, grid_x,
            grid_y, 100.0 * info.occupancy, info.blocks_per_sm, conv2d_shared_bytes(version, p),
            ms, ms > 0 ? pixels / (ms * 1e6) : 0.0, b->prop.name);
}

static int cuda_convolve(gf_backend *self, const gf_mask *mask, gf_border border,
                         int channels_filtered)
{
    cuda_backend *b = (cuda_backend *)self;
    const int version = b->options.conv_version;
    conv2d_launch p = {
        .src = b->buffer[b->current],
        .dst = b->buffer[1 - b->current],
        .width = b->width,
        .height = b->height,
        .channels = b->channels,
        .channels_filtered = channels_filtered,
        .border = border,
        .mask_width = mask->width,
        .mask_height = mask->height,
        .mask_count = mask->count,
        .combine = mask->combine,
        .tile_width = b->options.tile_width,
        .tile_height = b->options.tile_height,
    };
    if (upload_weights(b, mask, &p) < 0)
        return -1;
    if (p.tile_width == 0) {
        if (choose_tile(b, version, &p) < 0)
            return -1;
    } else {
        int fits = tile_fits(b, version, &p);
        if (fits < 0)
            return fits;
    }
    if (b->options.log)
        CUDA_CHECK(cudaEventRecord(b->start, 0), "recording an event");
    CUDA_CHECK(conv2d_gpu(version, &p, 0), "launching conv2d");
    if (b->options.log) {
        float ms = 0.0f;
        CUDA_CHECK(cudaEventRecord(b->stop, 0), "recording an event");
        CUDA_CHECK(cudaEventSynchronize(b->stop), "running conv2d");
        CUDA_CHECK(cudaEventElapsedTime(&ms, b->start, b->stop), "timing conv2d");
        report_launch(b, version, &p, mask, ms);
    }
    b->current = 1 - b->current;
    return 0;
}

static size_t pixel_count(const cuda_backend *b)
{
    return (size_t)b->width * (size_t)b->height;
}

static int cuda_equalize(gf_backend *self, gf_equalize_mode mode, int colour)
{
    cuda_backend *b = (cuda_backend *)self;
    unsigned char *px = b->buffer[b->current];
    const size_t n = pixel_count(b);
    if (mode == GF_EQUALIZE_LUMINANCE && colour == 3) {
        CUDA_CHECK(histogram_gpu(1, px, n, b->channels, 1, b->hist, 0), "launching histogram");
        CUDA_CHECK(scan_gpu(1, b->hist, b->cdf, 1, 0), "launching scan");
        CUDA_CHECK(lut_equalize_gpu(b->hist, b->cdf, 1, b->lut, 0), "launching the LUT builder");
        CUDA_CHECK(lut_apply_luma_gpu(px, n, b->channels, b->lut, 0), "launching the LUT");
        return 0;
    }
    CUDA_CHECK(histogram_gpu(1, px, n, b->channels, 0, b->hist, 0), "launching histogram");
    CUDA_CHECK(scan_gpu(1, b->hist, b->cdf, colour, 0), "launching scan");
    CUDA_CHECK(lut_equalize_gpu(b->hist, b->cdf, colour, b->lut, 0), "launching the LUT builder");
    CUDA_CHECK(lut_apply_gpu(px, n, b->channels, colour, b->lut, 1, 0), "launching the LUT");
    return 0;
}

static int cuda_stretch(gf_backend *self, const gf_stretch *how, int colour)
{
    cuda_backend *b = (cuda_backend *)self;
    unsigned char *px = b->buffer[b->current];
    const size_t n = pixel_count(b);
    if (how->kind == GF_STRETCH_NORMALIZE) {
        /* gray: channel 0's histogram is the first of the per-channel ones */
        CUDA_CHECK(histogram_gpu(1, px, n, b->channels, colour == 3, b->hist, 0),
                   "launching histogram");
        CUDA_CHECK(scan_gpu(1, b->hist, b->cdf, 1, 0), "launching scan");
        CUDA_CHECK(lut_normalize_gpu(b->cdf, how->black, how->white, b->lut, 0),
                   "launching the LUT builder");
    } else {
        CUDA_CHECK(reduce_gpu(px, n, b->channels, b->range, 0), "launching reduce");
        CUDA_CHECK(lut_auto_level_gpu(b->range, colour, b->lut, 0), "launching the LUT builder");
    }
    CUDA_CHECK(lut_apply_gpu(px, n, b->channels, colour, b->lut, 0, 0), "launching the LUT");
    return 0;
}

static int cuda_statistics(gf_backend *self, gf_channel_stats *per_channel)
{
    cuda_backend *b = (cuda_backend *)self;
    const unsigned char *px = b->buffer[b->current];
    const size_t n = pixel_count(b);
    CUDA_CHECK(histogram_gpu(1, px, n, b->channels, 0, b->hist, 0), "launching histogram");
    CUDA_CHECK(reduce_gpu(px, n, b->channels, b->range, 0), "launching reduce");
    unsigned long long hist[4 * GF_BINS];
    reduce_result range;
    CUDA_CHECK(cudaMemcpy(hist, b->hist, (size_t)b->channels * GF_BINS * sizeof hist[0],
                          cudaMemcpyDeviceToHost), "downloading histograms");
    CUDA_CHECK(cudaMemcpy(&range, b->range, sizeof range, cudaMemcpyDeviceToHost),
               "downloading statistics");
    for (int c = 0; c < b->channels; c++) {
        gf_channel_stats *s = &per_channel[c];
        memcpy(s->histogram, hist + c * GF_BINS, sizeof s->histogram);
        s->min = (int)range.min[c];
        s->max = (int)range.max[c];
        s->sum = range.sum[c];
        s->sum_squares = range.sum_squares[c];
    }
    return 0;
}

static int cuda_finish(gf_backend *self)
{
    (void)self;
    CUDA_CHECK(cudaDeviceSynchronize(), "running the kernels");
    return 0;
}

static int cuda_download(gf_backend *self, gf_image *img)
{
    cuda_backend *b = (cuda_backend *)self;
    CUDA_CHECK(cudaMemcpy(img->pixels, b->buffer[b->current], gf_image_bytes(img),
                          cudaMemcpyDeviceToHost), "downloading the image");
    return 0;
}

static void cuda_destroy(gf_backend *self)
{
    cuda_backend *b = (cuda_backend *)self;
    cudaFree(b->buffer[0]);
    cudaFree(b->buffer[1]);
    cudaFree(b->weights);
    cudaFree(b->hist);
    cudaFree(b->cdf);
    cudaFree(b->lut);
    cudaFree(b->range);
    if (b->start)
        cudaEventDestroy(b->start);
    if (b->stop)
        cudaEventDestroy(b->stop);
    free(b);
}

static const char *no_device_reason(cudaError_t err)
{
    switch (err) {
    case cudaSuccess:
    case cudaErrorNoDevice:
        return "no CUDA device found";
    case cudaErrorInsufficientDriver:
        return "no NVIDIA driver, or one too old for this build's CUDA runtime";
    default:
        return cudaGetErrorString(err);
    }
}

static int cuda_open(cuda_backend *b)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        gf_set_error("no usable GPU (%s)", no_device_reason(err));
        return -1;
    }
    if (b->options.device < 0 || b->options.device >= count) {
        gf_set_error("no CUDA device %d (this machine has %d)", b->options.device, count);
        return -1;
    }
    CUDA_CHECK(cudaSetDevice(b->options.device), "selecting the device");
    CUDA_CHECK(cudaGetDeviceProperties(&b->prop, b->options.device), "reading device properties");
    CUDA_CHECK(cudaMalloc((void **)&b->weights,
                          GF_MASK_MAX_MATRICES * GF_MASK_MAX_TAPS * sizeof(float)),
               "allocating the mask buffer");
    CUDA_CHECK(cudaMalloc((void **)&b->hist, 4 * GF_BINS * sizeof *b->hist), "allocating histograms");
    CUDA_CHECK(cudaMalloc((void **)&b->cdf, 4 * GF_BINS * sizeof *b->cdf), "allocating histograms");
    CUDA_CHECK(cudaMalloc((void **)&b->lut, 4 * GF_BINS), "allocating look-up tables");
    CUDA_CHECK(cudaMalloc((void **)&b->range, sizeof *b->range), "allocating statistics");
    CUDA_CHECK(cudaEventCreate(&b->start), "creating an event");
    CUDA_CHECK(cudaEventCreate(&b->stop), "creating an event");
    return 0;
}

gf_backend *gf_backend_cuda_new(const gf_backend_options *options)
{
    cuda_backend *b = calloc(1, sizeof *b);
    if (!b) {
        gf_set_error("out of memory");
        return NULL;
    }
    b->base = (gf_backend){
        .name = "cuda",
        .upload = cuda_upload,
        .convolve = cuda_convolve,
        .equalize = cuda_equalize,
        .stretch = cuda_stretch,
        .statistics = cuda_statistics,
        .finish = cuda_finish,
        .download = cuda_download,
        .destroy = cuda_destroy,
    };
    b->options = *options;
    if (cuda_open(b) < 0) {
        cuda_destroy(&b->base);
        return NULL;
    }
    return &b->base;
}

int gf_cuda_list_devices(FILE *out)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        gf_set_error("no usable GPU (%s)", no_device_reason(err));
        return -1;
    }
    for (int i = 0; i < count; i++) {
        struct cudaDeviceProp d;
        CUDA_CHECK(cudaGetDeviceProperties(&d, i), "reading device properties");
        fprintf(out, "%d: %s, compute capability %d.%d, %d SMs, %.1f GiB, %zu KiB shared per block (opt-in)\n",
                i, d.name, d.major, d.minor, d.multiProcessorCount,
                (double)d.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), d.sharedMemPerBlockOptin / 1024);
    }
    return count;
}
