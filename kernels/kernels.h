/* kernels.h - plain C entry points of the CUDA kernels (the .cu files in kernels/).
 *
 * Host code includes this header only; it sees no templates and no CUDA
 * syntax. Launchers enqueue on 'stream', check the launch with
 * cudaGetLastError() and return its result; they never synchronise. */
#ifndef GF_KERNELS_H
#define GF_KERNELS_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CONV2D_VERSIONS 2     /* 0 naive global memory, 1 shared-memory tiled with halo */

/* One convolution: every matrix of the mask over every channel. */
typedef struct {
    const unsigned char *src;  /* device, width * height * channels, interleaved */
    unsigned char *dst;        /* device, same shape; must not alias src */
    int width, height;
    int channels;              /* 1..4 */
    int channels_filtered;     /* channels >= this one are copied (alpha) */
    int border;                /* gf_border */
    int mask_width, mask_height;
    int mask_count;            /* 1..GF_MASK_MAX_MATRICES */
    int combine;               /* gf_combine */
    const float *weights;      /* device, mask_count * mask_width * mask_height, row-major */
    float scale[4];
    float offset[4];
    int tile_width, tile_height;  /* block shape: one thread per output pixel */
    /* separable versions: the one matrix is column[y] * row[x] */
    const float *row_weights;     /* device, mask_width floats */
    const float *column_weights;  /* device, mask_height floats */
    void *scratch;                /* device, conv2d_scratch_bytes(); NULL if that is 0 */
} conv2d_launch;

/* Short name of a version ("naive", "tiled", ...), NULL past the ladder. */
const char *conv2d_version_name(int version);
/* Whether a version can run this launch (a separable version needs a
 * separable mask, say): 1 or 0. */
int conv2d_supports(int version, const conv2d_launch *p);
/* Device scratch a launch of this version needs (intermediate of a
 * two-pass version), 0 for none. */
size_t conv2d_scratch_bytes(int version, const conv2d_launch *p);

/* Dynamic shared memory a launch of this version needs (0 for naive). */
size_t conv2d_shared_bytes(int version, const conv2d_launch *p);
/* The __global__ function a launch would use, for the occupancy API. */
const void *conv2d_kernel_entry(int version, int channels);
/* Launch version 0..CONV2D_VERSIONS-1. */
cudaError_t conv2d_gpu(int version, const conv2d_launch *p, cudaStream_t stream);

/* ---- histogram.cu ---------------------------------------------------------- */

#define HISTOGRAM_VERSIONS 2  /* 0 global atomics, 1 shared-memory privatized */

/* 256-bin histograms of every channel (hist[c * 256 + v]), or with luma set
 * one histogram of the BT.601 luma of channels 0..2. hist is device memory
 * of (luma ? 1 : channels) * 256 counters; the launcher zeroes it first. */
cudaError_t histogram_gpu(int version, const unsigned char *src, size_t pixels, int channels,
                          int luma, unsigned long long *hist, cudaStream_t stream);

/* ---- reduce.cu ------------------------------------------------------------- */

/* min, max, sum and sum of squares of every channel, in one pass. */
typedef struct {
    unsigned int min[4], max[4];
    unsigned long long sum[4], sum_squares[4];
} reduce_result;

cudaError_t reduce_gpu(const unsigned char *src, size_t pixels, int channels,
                       reduce_result *out, cudaStream_t stream);

/* ---- scan.cu --------------------------------------------------------------- */

#define SCAN_VERSIONS 2  /* 0 one thread per histogram, 1 work-efficient (Blelloch) */

/* Inclusive prefix sums of 'histograms' consecutive 256-bin histograms. */
cudaError_t scan_gpu(int version, const unsigned long long *in, unsigned long long *out,
                     int histograms, cudaStream_t stream);

/* ---- lut.cu ---------------------------------------------------------------- */

/* Build look-up tables on the device (256 bytes each), from histograms and
 * their prefix sums, from percentiles, or from a reduction. */
cudaError_t lut_equalize_gpu(const unsigned long long *hist, const unsigned long long *cdf,
                             int histograms, unsigned char *lut, cudaStream_t stream);
cudaError_t lut_normalize_gpu(const unsigned long long *cdf, double black, double white,
                              unsigned char *lut, cudaStream_t stream);
cudaError_t lut_auto_level_gpu(const reduce_result *range, int colour, unsigned char *lut,
                               cudaStream_t stream);

/* Apply LUTs to channels 0..colour-1 in place; the others are untouched.
 * per_channel: channel c uses lut + 256 * c, otherwise all use lut. */
cudaError_t lut_apply_gpu(unsigned char *pixels, size_t count, int channels, int colour,
                          const unsigned char *lut, int per_channel, cudaStream_t stream);
/* Map the luma of RGB pixels through one LUT, keeping their chroma. */
cudaError_t lut_apply_luma_gpu(unsigned char *pixels, size_t count, int channels,
                               const unsigned char *lut, cudaStream_t stream);

/* Blocks for a grid-stride loop over 'items': enough to fill the device. */
int gf_grid_for(size_t items, int threads);

#ifdef __cplusplus
}
#endif

#endif
