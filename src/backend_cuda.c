/* backend_cuda.c - host side of the GPU backend: device, buffers,
 * launches (the tile rule: tile_rule.c; --tile sweep: cuda_sweep.c). One
 * upload and one download per image; every operation in between runs on
 * device buffers (two, used in turn).
 *
 * An image whose two buffers do not fit the GPU memory budget (what the
 * device has free, or --gpu-memory) is processed in strips: it stays in host
 * memory and every operation streams it through the device a band of rows at
 * a time. A convolution uploads each band with its halo rows (mapped through
 * the border mode, so wrap and reflect read the right rows) and keeps the
 * band's interior; histograms and reductions are accumulated over the bands
 * before the look-up table is built, so the result equals the whole-image
 * path.
 *
 * GPUFILTER_TEST_FAULT (tests only): "alloc" makes every image-buffer
 * allocation ask the device for more than it has; "launch" launches conv2d
 * with a block over the device's limit. Both are real CUDA failures that
 * travel the normal error path. "query" makes the planner's device queries
 * report failure, so that its fallbacks run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"


/* ---- backend primitives ----------------------------------------------------- */

size_t gf_cuda_row_bytes(const cuda_backend *b)
{
    return (size_t)b->width * (size_t)b->channels * (b->depth == 16 ? 2u : 1u);
}

static void free_strip_host(cuda_backend *b)
{
    free(b->host[0]);
    free(b->host[1]);
    b->host[0] = b->host[1] = NULL;
    b->strips = 0;
}

/* Device bytes the image buffers may take: --gpu-memory, or what is free
 * now (counting the buffers this backend already holds) less a margin for
 * the runtime and the tone scratch. */
static size_t memory_budget(const cuda_backend *b)
{
    if (b->options.memory_limit)
        return b->options.memory_limit;
    size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess)
        return 0;
    const size_t margin = (size_t)64 << 20;
    free_bytes += 2 * b->buffer_bytes;
    return free_bytes > margin ? free_bytes - margin : 0;
}

/* Two device buffers of at least 'bytes' each. */
static cudaError_t ensure_buffers(cuda_backend *b, size_t bytes)
{
    if (bytes <= b->buffer_bytes)
        return cudaSuccess;
    for (int i = 0; i < 2; i++) {
        cudaFree(b->buffer[i]);
        b->buffer[i] = NULL;
    }
    b->buffer_bytes = 0;
    /* the fault asks for more than any device has: a real allocation failure */
    size_t ask = b->fault == FAULT_ALLOC ? (size_t)1 << 60 : bytes;
    for (int i = 0; i < 2; i++) {
        cudaError_t err = cudaMalloc((void **)&b->buffer[i], ask);
        if (err != cudaSuccess) {
            cudaFree(b->buffer[0]);
            b->buffer[0] = NULL;
            (void)cudaGetLastError(); /* clear the sticky allocation error */
            return err;
        }
    }
    b->buffer_bytes = bytes;
    return cudaSuccess;
}

/* Page-locked staging makes the copies asynchronous and full speed; it is
 * kept for the next image, so only batches (options.pinned_staging) use it,
 * and only up to a size where locking that much host memory is reasonable. */
#define PINNED_STAGING_MAX ((size_t)512 << 20)

static unsigned char *staging_for(cuda_backend *b, size_t bytes)
{
    if (!b->options.pinned_staging || bytes > PINNED_STAGING_MAX)
        return NULL;
    if (bytes > b->pinned_bytes) {
        cudaFreeHost(b->pinned);
        b->pinned = NULL;
        b->pinned_bytes = 0;
        if (cudaMallocHost((void **)&b->pinned, bytes) != cudaSuccess) {
            (void)cudaGetLastError();  /* no page-locked memory: copy from pageable memory */
            b->pinned = NULL;
            return NULL;
        }
        b->pinned_bytes = bytes;
    }
    return b->pinned;
}

static cudaError_t upload_image(cuda_backend *b, const unsigned char *pixels, size_t bytes)
{
    unsigned char *staging = staging_for(b, bytes);
    if (staging) {
        memcpy(staging, pixels, bytes);
        pixels = staging;
    }
    return gf_cuda_to_device(b, b->buffer[0], pixels, bytes);
}

static int upload_strips(cuda_backend *b, const gf_image *img, size_t budget)
{
    const size_t line = gf_cuda_row_bytes(b), bytes = gf_image_bytes(img);
    size_t rows = budget / 2 / line;
    if (rows > (size_t)b->height)
        rows = (size_t)b->height;
    if (rows == 0) {
        gf_set_error("a %dx%dx%d image needs at least %zu bytes of GPU memory for strips of one "
                     "row; %zu bytes are available (--gpu-memory)", b->width, b->height, b->channels,
                     2 * line, budget);
        return -1;
    }
    cudaError_t err = ensure_buffers(b, rows * line);
    if (err != cudaSuccess) {
        gf_set_error("CUDA error while allocating strip buffers of %zu bytes: %s", rows * line,
                     cudaGetErrorString(err));
        return -1;
    }
    b->host[0] = malloc(bytes);
    if (!b->host[0]) {
        gf_set_error("out of memory (%zu bytes for the image in strip mode)", bytes);
        return -1;
    }
    memcpy(b->host[0], img->pixels, bytes);
    b->host_current = 0;
    b->strip_rows = rows;
    b->strips = 1;
    if (b->options.log)
        fprintf(b->options.log, "gpufilter: %dx%dx%d image (%zu bytes) over the GPU memory budget "
                "(%zu bytes): strips of up to %zu rows\n", b->width, b->height, b->channels, bytes,
                budget, rows);
    return 0;
}

int gf_cuda_upload_copy(gf_backend *self, const gf_image *img)
{
    cuda_backend *b = (cuda_backend *)self;
    size_t bytes = gf_image_bytes(img);
    /* a batch calls from several threads; each starts on device 0 */
    CUDA_CHECK(cudaSetDevice(b->options.device), "selecting the device");
    free_strip_host(b);
    b->width = img->width;
    b->height = img->height;
    b->channels = img->channels;
    b->depth = img->depth;
    b->current = 0;
    size_t budget = memory_budget(b);
    if (bytes <= budget / 2) {
        cudaError_t err = ensure_buffers(b, bytes);
        if (err == cudaSuccess) {
            CUDA_CHECK(upload_image(b, img->pixels, bytes),
                       "uploading the image");
            return 0;
        }
        if (err != cudaErrorMemoryAllocation) {
            gf_set_error("CUDA error while allocating image buffers: %s", cudaGetErrorString(err));
            return -1;
        }
        /* another process took the memory meanwhile: fall back to strips */
        budget = memory_budget(b);
    }
    return upload_strips(b, img, budget);
}

/* ---- images already in device memory (gpu_batch.c) ---------------------------- */

void *gf_cuda_stream(gf_backend *self)
{
    return ((cuda_backend *)self)->stream;
}

int gf_cuda_upload_device(gf_backend *self, const unsigned char *pixels, int width, int height,
                          int channels)
{
    cuda_backend *b = (cuda_backend *)self;
    const size_t bytes = (size_t)width * (size_t)height * (size_t)channels;
    CUDA_CHECK(cudaSetDevice(b->options.device), "selecting the device");
    if (bytes > b->buffer_bytes && bytes > memory_budget(b) / 2) {
        gf_set_error("a %dx%dx%d image over the GPU memory budget", width, height, channels);
        return -2;
    }
    free_strip_host(b);
    b->width = width;
    b->height = height;
    b->channels = channels;
    b->depth = 8;
    b->current = 0;
    CUDA_CHECK(ensure_buffers(b, bytes), "allocating image buffers");
    CUDA_CHECK(cudaMemcpyAsync(b->buffer[0], pixels, bytes, cudaMemcpyDeviceToDevice, b->stream),
               "taking the decoded image");
    return 0;
}

const unsigned char *gf_cuda_device_image(gf_backend *self)
{
    cuda_backend *b = (cuda_backend *)self;
    return b->strips ? NULL : b->buffer[b->current];
}

/* Copy image rows first..first+count-1 (numbered as in the whole image,
 * possibly outside it) from host memory into the device buffer dst, each
 * mapped through the border mode; rows outside in constant mode are zero. */
static int load_rows(cuda_backend *b, unsigned char *dst, int first, int count, gf_border border)
{
    const size_t line = gf_cuda_row_bytes(b);
    const unsigned char *src = b->host[b->host_current];
    for (int i = 0; i < count;) {
        int from = gf_border_index(first + i, b->height, border);
        if (from < 0) {
            CUDA_CHECK(cudaMemsetAsync(dst + (size_t)i * line, 0, line, b->stream), "clearing a border row");
            i++;
            continue;
        }
        int run = 1;  /* consecutive rows go in one copy */
        while (i + run < count && gf_border_index(first + i + run, b->height, border) == from + run)
            run++;
        CUDA_CHECK(gf_cuda_to_device(b, dst + (size_t)i * line, src + (size_t)from * line, (size_t)run * line), "uploading a strip");
        i += run;
    }
    return 0;
}

static int ensure_second_host_buffer(cuda_backend *b)
{
    unsigned char **other = &b->host[1 - b->host_current];
    if (!*other && !(*other = malloc((size_t)b->height * gf_cuda_row_bytes(b)))) {
        gf_set_error("out of memory (a second image buffer for strip mode)");
        return -1;
    }
    return 0;
}

static int upload_weights(cuda_backend *b, const gf_mask *mask, conv2d_launch *p)
{
    const int taps = mask->width * mask->height;
    float *host = b->host_weights;
    for (int k = 0; k < mask->count; k++) {
        for (int i = 0; i < taps; i++)
            host[k * taps + i] = (float)mask->weights[k][i];
        p->scale[k] = (float)mask->scale[k];
        p->offset[k] = (float)mask->offset[k];
    }
    CUDA_CHECK(gf_cuda_to_device(b, b->weights, host, (size_t)mask->count * taps * sizeof(float)),
               "uploading the mask");
    p->weights = b->weights;
    p->host_weights = host;
    conv2d_mask_facts_make(p, &b->mask_facts);  /* once for the tile rule's plans and the launch */
    p->facts = &b->mask_facts;
    if (mask->separable && mask->count == 1) {
        float *row = b->host_factors, *column = b->host_factors + mask->width;
        for (int x = 0; x < mask->width; x++)
            row[x] = (float)mask->row[x];
        for (int y = 0; y < mask->height; y++)
            column[y] = (float)mask->column[y];
        CUDA_CHECK(gf_cuda_to_device(b, b->factors, b->host_factors,
                                  (size_t)(mask->width + mask->height) * sizeof(float)),
                   "uploading the mask");
        p->row_weights = b->factors;
        p->column_weights = b->factors + mask->width;
        p->host_row_weights = row;
        p->host_column_weights = column;
    }
    return 0;
}

/* The kernel version for a launch: the one asked for, or by default the
 * fastest that runs it in bench/RESULTS.md's measurements: on 3 and 4
 * channels the separable one for masks that factor and are 5x5 or larger
 * (7x7 and larger where the direct one takes its DP4A or DP2A path; never
 * where it takes its separable integer path, for a column of integers
 * times a row of -128..127, or its tensor cores, for 11x11 to 31x31 masks
 * of a column times a row of 0..255), and the register-blocked one for the
 * gradient pairs (unless the direct one takes an integer path: DP4A, or
 * 16-bit lanes for the Sobel, Prewitt and Scharr pairs on RGBA); otherwise
 * the direct one where it runs (3x3, 5x5 and 7x7 masks of one matrix, 9x9
 * to 15x15 of that separable integer kind, 11x11 to 31x31 of the tensor
 * cores' and 15x15 of integer weights of -128..127 on gray and RGBA, box
 * masks to 31x31, 3x3 gradient pairs), else the separable one
 * for masks that factor, else the register-blocked one (the tiled one
 * where none of them runs). */
static int pick_version(const cuda_backend *b, const gf_mask *mask, const conv2d_launch *p)
{
    if (b->options.conv_version != GF_CONV_AUTO)
        return b->options.conv_version;
    /* with --tile, a version that runs that tile (the tiled one runs any) */
    conv2d_launch probe = *p;
    if (probe.tile_width == 0)
        probe.tile_width = probe.tile_height = 32;
    const int colour = p->channels >= 3, separable = mask->separable && mask->count == 1;
    const int integer = conv2d_direct_integer(&probe);  /* 0 where the direct one cannot run */
    if (colour && separable && integer != CONV2D_SEPARABLE_INTEGER &&
        mask->width >= (integer ? 7 : 5) && conv2d_supports(GF_CONV_SEPARABLE, &probe))
        return GF_CONV_SEPARABLE;
    if (colour && mask->count == 2 && !integer && conv2d_supports(GF_CONV_BLOCKED, &probe))
        return GF_CONV_BLOCKED;
    if (conv2d_supports(GF_CONV_DIRECT, &probe))
        return GF_CONV_DIRECT;
    if (separable && conv2d_supports(GF_CONV_SEPARABLE, &probe))
        return GF_CONV_SEPARABLE;
    if (conv2d_supports(GF_CONV_BLOCKED, &probe))
        return GF_CONV_BLOCKED;
    return GF_CONV_TILED;
}


/* -v: one line a launch, from the plan it ran (r). */
static void report_launch(const cuda_backend *b, int version, const conv2d_launch *p,
                          const conv2d_launch_report *r, const gf_mask *mask, float ms)
{
    occupancy_info info = {0, 0.0};
    if (gf_tile_occupancy(&b->prop, &r->info, &info) < 0)
        return;
    double pixels = (double)p->width * p->height;
    fprintf(b->options.log,
            "gpufilter: conv2d %s %s %dx%d on %dx%dx%d%s%s%s: tile %dx%d, block %d threads, "
            "grid %ux%u, %d tile%s per block, occupancy %.0f%% (%d blocks/SM), shared %zu B, "
            "%.3f ms (%.1f Gpx/s) on %s (device %d)\n",
            conv2d_version_name(version), mask->name, mask->width, mask->height, p->width,
            p->height, p->channels, r->path[0] ? " (" : "", r->path, r->path[0] ? ")" : "",
            p->tile_width, p->tile_height, r->info.threads, r->grid_x, r->grid_y, r->steps,
            r->steps == 1 ? "" : "s", 100.0 * info.occupancy, info.blocks_per_sm, r->info.shared,
            ms, ms > 0 ? pixels / (ms * 1e6) : 0.0, b->prop.name, b->options.device);
}

/* Whether the direct kernel runs this mask and channel layout, with some tile. */
static int direct_runs(const conv2d_launch *p)
{
    conv2d_launch probe = *p;
    probe.tile_width = probe.tile_height = 64;  /* a multiple of every variant's rows and columns */
    return conv2d_supports(GF_CONV_DIRECT, &probe);
}

/* Weights uploaded and the tile chosen (or checked) for a convolution of
 * an image of the backend's width and channels. */
int gf_cuda_prepare_convolve(cuda_backend *b, const gf_mask *mask, gf_border border,
                            int channels_filtered, conv2d_launch *p, int *version)
{
    if (gf_mask_is_large(mask)) {
        gf_set_error("mask %s is %dx%d%s: --tile applies to masks of up to %dx%d", mask->name,
                     mask->width, mask->height,
                     mask->combine == GF_COMBINE_UNSHARP ? " with an unsharp combine" : "",
                     GF_MASK_SMALL_SIZE, GF_MASK_SMALL_SIZE);
        return -2;
    }
    *p = (conv2d_launch){
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
    if (upload_weights(b, mask, p) < 0)
        return -1;
    *version = pick_version(b, mask, p);
    if (*version == GF_CONV_SEPARABLE && !(mask->separable && mask->count == 1)) {
        gf_set_error("mask %s does not factor as a column times a row; --kernel separable needs "
                     "one that does (gaussian, box)", mask->name);
        return -2;
    }
    if (*version == GF_CONV_DIRECT && !direct_runs(p)) {
        gf_set_error("mask %s (%dx%d, %d matrices) on %d channels is not one the direct kernel "
                     "runs (gpufilter --list-paths lists the masks, sizes and layouts it takes)",
                     mask->name, mask->width, mask->height, mask->count, p->channels);
        return -2;
    }
    if (p->tile_width == 0)
        return gf_tile_choose(&b->prop, *version, p);
    return gf_tile_fits(&b->prop, *version, p, NULL);
}

static int launch_convolve(cuda_backend *b, int version, const gf_mask *mask, conv2d_launch *p)
{
    conv2d_launch launch = *p;
    if (b->fault == FAULT_LAUNCH)
        launch.tile_width = 2 * b->prop.maxThreadsPerBlock;  /* over the limit: the launch fails */
    if (b->options.log)
        CUDA_CHECK(cudaEventRecord(b->start, b->stream), "recording an event");
    conv2d_launch_report report;
    CUDA_CHECK(conv2d_gpu(version, &launch, b->stream, b->options.log ? &report : NULL), "launching conv2d");
    if (b->options.log) {
        float ms = 0.0f;
        CUDA_CHECK(cudaEventRecord(b->stop, b->stream), "recording an event");
        CUDA_CHECK(cudaEventSynchronize(b->stop), "running conv2d");
        CUDA_CHECK(cudaEventElapsedTime(&ms, b->start, b->stop), "timing conv2d");
        report_launch(b, version, p, &report, mask, ms);
    }
    return 0;
}

/* A filter in strips: each band of output rows is computed (by band, on a
 * device copy of its input rows plus the halo of a mask_height-row mask,
 * mapped through the border) and downloaded. */
int gf_cuda_filter_strips(cuda_backend *b, const gf_mask *mask, gf_border border,
                          gf_cuda_band_filter band, void *job)
{
    const int halo = mask->height - 1, above = mask->height / 2;
    if (b->strip_rows < (size_t)mask->height) {
        gf_set_error("the %dx%d mask needs strips of at least %d rows (%zu bytes of GPU memory); "
                     "the memory budget allows %zu rows (--gpu-memory)", mask->width, mask->height,
                     mask->height, 2 * (size_t)mask->height * gf_cuda_row_bytes(b), b->strip_rows);
        return -1;
    }
    if (ensure_second_host_buffer(b) < 0)
        return -1;
    const size_t line = gf_cuda_row_bytes(b);
    const int rows_each = (int)b->strip_rows - halo;
    unsigned char *out = b->host[1 - b->host_current];
    for (int y0 = 0; y0 < b->height; y0 += rows_each) {
        const int rows = b->height - y0 < rows_each ? b->height - y0 : rows_each;
        if (load_rows(b, b->buffer[0], y0 - above, rows + halo, border) < 0)
            return -1;
        /* the band's own border rows are never read for the rows kept */
        if (band(b, job, b->buffer[0], b->buffer[1], rows + halo) < 0)
            return -1;
        CUDA_CHECK(gf_cuda_to_host(b, out + (size_t)y0 * line, b->buffer[1] + (size_t)above * line,
                              (size_t)rows * line), "downloading a strip");
    }
    b->host_current = 1 - b->host_current;
    return 0;
}

typedef struct {
    int version;
    const gf_mask *mask;
    conv2d_launch *launch;
} small_band_job;

static int convolve_band(cuda_backend *b, void *job, const unsigned char *src, unsigned char *dst,
                         int height)
{
    small_band_job *j = job;
    j->launch->src = src;
    j->launch->dst = dst;
    j->launch->height = height;
    return launch_convolve(b, j->version, j->mask, j->launch);
}

static int cuda_convolve(gf_backend *self, const gf_mask *mask, gf_border border,
                         int channels_filtered)
{
    cuda_backend *b = (cuda_backend *)self;
    if (b->depth == 16)
        return gf_cuda_convolve16(b, mask, border, channels_filtered);
    if (gf_mask_is_large(mask))
        return gf_cuda_convolve_large(b, mask, border, channels_filtered);
    conv2d_launch p;
    int version;
    int status = gf_cuda_prepare_convolve(b, mask, border, channels_filtered, &p, &version);
    if (status < 0)
        return status;
    if (b->strips) {
        small_band_job job = {version, mask, &p};
        return gf_cuda_filter_strips(b, mask, border, convolve_band, &job);
    }
    p.src = b->buffer[b->current];
    p.dst = b->buffer[1 - b->current];
    if (launch_convolve(b, version, mask, &p) < 0)
        return -1;
    b->current = 1 - b->current;
    return 0;
}

static size_t pixel_count(const cuda_backend *b)
{
    return (size_t)b->width * (size_t)b->height;
}

/* ---- tone operations, on the whole image or accumulated over strips ------- */

int gf_cuda_band_rows(const cuda_backend *b, int y0)
{
    return b->height - y0 < (int)b->strip_rows ? b->height - y0 : (int)b->strip_rows;
}

int gf_cuda_upload_band(cuda_backend *b, int y0, int rows)
{
    const size_t line = gf_cuda_row_bytes(b);
    CUDA_CHECK(gf_cuda_to_device(b, b->buffer[0], b->host[b->host_current] + (size_t)y0 * line,
                          (size_t)rows * line), "uploading a strip");
    return 0;
}

/* 256-bin histograms of the image into b->hist: one of the luma, or one per
 * channel. */
static int histograms(cuda_backend *b, int luma)
{
    if (!b->strips) {
        CUDA_CHECK(histogram_gpu(HISTOGRAM_VERSIONS - 1, b->buffer[b->current], pixel_count(b),
                                 b->channels, luma, b->hist, b->stream),
                   "launching histogram");
        return 0;
    }
    const size_t counters = (size_t)(luma ? 1 : b->channels) * GF_BINS;
    unsigned long long total[4 * GF_BINS] = {0}, band[4 * GF_BINS];
    for (int y0 = 0; y0 < b->height; y0 += (int)b->strip_rows) {
        const int rows = gf_cuda_band_rows(b, y0);
        if (gf_cuda_upload_band(b, y0, rows) < 0)
            return -1;
        CUDA_CHECK(histogram_gpu(HISTOGRAM_VERSIONS - 1, b->buffer[0], (size_t)rows * b->width,
                                 b->channels, luma, b->hist, b->stream),
                   "launching histogram");
        CUDA_CHECK(gf_cuda_to_host(b, band, b->hist, counters * sizeof band[0]),
                   "downloading histograms");
        for (size_t i = 0; i < counters; i++)
            total[i] += band[i];
    }
    CUDA_CHECK(gf_cuda_to_device(b, b->hist, total, counters * sizeof total[0]),
               "uploading histograms");
    return 0;
}

static void merge_range(reduce_result *into, const reduce_result *band, int channels)
{
    for (int c = 0; c < channels; c++) {
        if (band->min[c] < into->min[c])
            into->min[c] = band->min[c];
        if (band->max[c] > into->max[c])
            into->max[c] = band->max[c];
        into->sum[c] += band->sum[c];
        into->sum_squares[c] += band->sum_squares[c];
    }
}

/* Min, max, sum and sum of squares of every channel into b->range. */
static int reduction(cuda_backend *b)
{
    if (!b->strips) {
        CUDA_CHECK(reduce_gpu(REDUCE_VERSIONS - 1, b->buffer[b->current], pixel_count(b),
                              b->channels, b->range, b->stream),
                   "launching reduce");
        return 0;
    }
    reduce_result total = {0}, band;
    for (int c = 0; c < 4; c++)
        total.min[c] = 255;
    for (int y0 = 0; y0 < b->height; y0 += (int)b->strip_rows) {
        const int rows = gf_cuda_band_rows(b, y0);
        if (gf_cuda_upload_band(b, y0, rows) < 0)
            return -1;
        CUDA_CHECK(reduce_gpu(REDUCE_VERSIONS - 1, b->buffer[0], (size_t)rows * b->width,
                              b->channels, b->range, b->stream),
                   "launching reduce");
        CUDA_CHECK(gf_cuda_to_host(b, &band, b->range, sizeof band),
                   "downloading statistics");
        merge_range(&total, &band, b->channels);
    }
    CUDA_CHECK(gf_cuda_to_device(b, b->range, &total, sizeof total),
               "uploading statistics");
    return 0;
}

typedef enum { LUT_PER_CHANNEL, LUT_SHARED, LUT_LUMA } lut_mode;

static cudaError_t lut_launch(const cuda_backend *b, unsigned char *px, size_t n, int colour,
                              lut_mode mode)
{
    if (mode == LUT_LUMA)
        return lut_apply_luma_gpu(px, n, b->channels, b->lut, b->stream);
    return lut_apply_gpu(px, n, b->channels, colour, b->lut, mode == LUT_PER_CHANNEL, b->stream);
}

/* Map the image through the LUTs in b->lut. */
static int apply_lut(cuda_backend *b, int colour, lut_mode mode)
{
    if (!b->strips) {
        CUDA_CHECK(lut_launch(b, b->buffer[b->current], pixel_count(b), colour, mode),
                   "launching the LUT");
        return 0;
    }
    const size_t line = gf_cuda_row_bytes(b);
    for (int y0 = 0; y0 < b->height; y0 += (int)b->strip_rows) {
        const int rows = gf_cuda_band_rows(b, y0);
        if (gf_cuda_upload_band(b, y0, rows) < 0)
            return -1;
        CUDA_CHECK(lut_launch(b, b->buffer[0], (size_t)rows * b->width, colour, mode),
                   "launching the LUT");
        CUDA_CHECK(gf_cuda_to_host(b, b->host[b->host_current] + (size_t)y0 * line, b->buffer[0],
                              (size_t)rows * line), "downloading a strip");
    }
    return 0;
}

static int cuda_equalize(gf_backend *self, gf_equalize_mode mode, int colour)
{
    cuda_backend *b = (cuda_backend *)self;
    if (b->depth == 16)
        return gf_cuda_equalize16(b, mode, colour);
    const int luma = mode == GF_EQUALIZE_LUMINANCE && colour == 3;
    const int histogram_count = luma ? 1 : colour;
    if (histograms(b, luma) < 0)
        return -1;
    CUDA_CHECK(scan_gpu(1, b->hist, b->cdf, histogram_count, b->stream), "launching scan");
    CUDA_CHECK(lut_equalize_gpu(b->hist, b->cdf, histogram_count, b->lut, b->stream),
               "launching the LUT builder");
    return apply_lut(b, colour, luma ? LUT_LUMA : LUT_PER_CHANNEL);
}

static int cuda_stretch(gf_backend *self, const gf_stretch *how, int colour)
{
    cuda_backend *b = (cuda_backend *)self;
    if (b->depth == 16)
        return gf_cuda_stretch16(b, how, colour);
    if (how->kind == GF_STRETCH_NORMALIZE) {
        /* gray: channel 0's histogram is the first of the per-channel ones */
        if (histograms(b, colour == 3) < 0)
            return -1;
        CUDA_CHECK(scan_gpu(1, b->hist, b->cdf, 1, b->stream), "launching scan");
        CUDA_CHECK(lut_normalize_gpu(b->cdf, how->black, how->white, b->lut, b->stream),
                   "launching the LUT builder");
    } else {
        if (reduction(b) < 0)
            return -1;
        CUDA_CHECK(lut_auto_level_gpu(b->range, colour, b->lut, b->stream), "launching the LUT builder");
    }
    return apply_lut(b, colour, LUT_SHARED);
}

static int cuda_statistics(gf_backend *self, gf_channel_stats *per_channel)
{
    cuda_backend *b = (cuda_backend *)self;
    if (b->depth == 16)
        return gf_cuda_statistics16(b, per_channel);
    if (histograms(b, 0) < 0 || reduction(b) < 0)
        return -1;
    unsigned long long hist[4 * GF_BINS];
    reduce_result range;
    CUDA_CHECK(gf_cuda_to_host(b, hist, b->hist, (size_t)b->channels * GF_BINS * sizeof hist[0]), "downloading histograms");
    CUDA_CHECK(gf_cuda_to_host(b, &range, b->range, sizeof range),
               "downloading statistics");
    for (int c = 0; c < b->channels; c++) {
        gf_channel_stats *s = &per_channel[c];
        memcpy(s->histogram, hist + c * GF_BINS, GF_BINS * sizeof s->histogram[0]);
        s->depth = 8;
        s->min = (int)range.min[c];
        s->max = (int)range.max[c];
        s->sum = range.sum[c];
        s->sum_squares = range.sum_squares[c];
    }
    return 0;
}

static int cuda_finish(gf_backend *self)
{
    cuda_backend *b = (cuda_backend *)self;
    CUDA_CHECK(cudaStreamSynchronize(b->stream), "running the kernels");
    return 0;
}

static int cuda_download(gf_backend *self, gf_image *img)
{
    cuda_backend *b = (cuda_backend *)self;
    if (b->strips) {
        memcpy(img->pixels, b->host[b->host_current], gf_image_bytes(img));
        return 0;
    }
    unsigned char *staging = staging_for(b, gf_image_bytes(img));
    if (staging) {
        CUDA_CHECK(gf_cuda_to_host(b, staging, b->buffer[b->current], gf_image_bytes(img)),
                   "downloading the image");
        memcpy(img->pixels, staging, gf_image_bytes(img));
        return 0;
    }
    CUDA_CHECK(gf_cuda_to_host(b, img->pixels, b->buffer[b->current], gf_image_bytes(img)), "downloading the image");
    return 0;
}

/* The image to the host, op, and back; in strip mode the image is in host
 * memory already. */
static int cuda_on_host(gf_backend *self, gf_host_op op, const void *arg)
{
    cuda_backend *b = (cuda_backend *)self;
    if (b->strips) {
        gf_image view = {b->width, b->height, b->channels, b->host[b->host_current], 0, b->depth};
        return op(&view, arg);
    }
    gf_image *img = gf_image_new_depth(b->width, b->height, b->channels, b->depth);
    int status = img ? cuda_download(self, img) : -1;
    if (status == 0)
        status = op(img, arg);
    if (status == 0)
        status = gf_cuda_upload_copy(self, img);
    gf_image_free(img);
    return status;
}

static void cuda_destroy(gf_backend *self)
{
    cuda_backend *b = (cuda_backend *)self;
    free_strip_host(b);
    cudaFree(b->buffer[0]);
    cudaFree(b->buffer[1]);
    cudaFree(b->weights);
    cudaFree(b->factors);
    cudaFree(b->hist);
    cudaFree(b->cdf);
    cudaFree(b->lut);
    cudaFree(b->range);
    gf_cuda_free16(b);
    cudaFreeHost(b->pinned);
    if (b->stream)
        cudaStreamDestroy(b->stream);
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
    const char *fault = getenv("GPUFILTER_TEST_FAULT");
    if (fault && strcmp(fault, "alloc") == 0)
        b->fault = FAULT_ALLOC;
    else if (fault && strcmp(fault, "launch") == 0)
        b->fault = FAULT_LAUNCH;
    conv2d_fail_queries(fault && strcmp(fault, "query") == 0);
    CUDA_CHECK(cudaSetDevice(b->options.device), "selecting the device");
    CUDA_CHECK(cudaGetDeviceProperties(&b->prop, b->options.device), "reading device properties");
    CUDA_CHECK(cudaMalloc((void **)&b->weights,
                          GF_MASK_MAX_MATRICES * GF_MASK_SMALL_SIZE * GF_MASK_SMALL_SIZE * sizeof(float)),
               "allocating the mask buffer");
    CUDA_CHECK(cudaMalloc((void **)&b->factors, 2 * GF_MASK_SMALL_SIZE * sizeof(float)),
               "allocating the mask buffer");
    CUDA_CHECK(cudaMalloc((void **)&b->hist, 4 * GF_BINS * sizeof *b->hist), "allocating histograms");
    CUDA_CHECK(cudaMalloc((void **)&b->cdf, 4 * GF_BINS * sizeof *b->cdf), "allocating histograms");
    CUDA_CHECK(cudaMalloc((void **)&b->lut, 4 * GF_BINS), "allocating look-up tables");
    CUDA_CHECK(cudaMalloc((void **)&b->range, sizeof *b->range), "allocating statistics");
    CUDA_CHECK(cudaMemset(b->range, 0, sizeof *b->range), "allocating statistics");
    /* non-blocking: the backends of a batch's workers run side by side */
    CUDA_CHECK(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking), "creating a stream");
    CUDA_CHECK(cudaEventCreate(&b->start), "creating an event");
    CUDA_CHECK(cudaEventCreate(&b->stop), "creating an event");
    return 0;
}

/* The device takes a copy; img keeps its pixels. */
static int cuda_upload(gf_backend *self, gf_image *img)
{
    return gf_cuda_upload_copy(self, img);
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
        .on_host = cuda_on_host,
        .clahe = gf_cuda_clahe,
        .diffuse = gf_cuda_diffuse,
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

int gf_cuda_device_count(void)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        gf_set_error("no usable GPU (%s)", no_device_reason(err));
        return -1;
    }
    return count;
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
