/* lut.cu - build 256-entry look-up tables on the device and apply them.
 *
 * Version ladder
 *   builders  one thread per table, running the same tone.h arithmetic as
 *             the CPU backend (equalize from histogram + CDF, normalize from
 *             percentiles of the CDF, auto-level from the reduction), so
 *             that the tables match bit for bit and never visit the host.
 *   apply 1   grid-stride, one pixel per thread, the tables in shared
 *             memory (768 bytes at most), channels past 'colour' untouched.
 *             Luma mode converts RGB -> YCrCb, maps Y, and converts back
 *             in the same pass.
 *
 * Roofline budget (apply): C bytes read and C written per pixel, one
 * shared-memory lookup per channel: memory-bound, 8 B/px for RGBA, so an
 * 8192x8192 RGBA image needs ~180 us at ~3.0 TB/s (H100). The builders are
 * a few microseconds of one thread. */
#include "kernels.h"

extern "C" {
#include "../src/tone.h"
}

#define LUT_THREADS 256

__global__ void lut_equalize_kernel(const unsigned long long *hist, const unsigned long long *cdf,
                                    unsigned char *lut)
{
    if (threadIdx.x == 0)
        gf_equalize_lut(hist + blockIdx.x * GF_BINS, cdf + blockIdx.x * GF_BINS,
                        lut + blockIdx.x * GF_BINS);
}

__global__ void lut_normalize_kernel(const unsigned long long *cdf, double black, double white,
                                     unsigned char *lut)
{
    if (threadIdx.x != 0)
        return;
    int lo, hi;
    gf_normalize_limits(cdf, black, white, &lo, &hi);
    gf_stretch_lut(lo, hi, lut);
}

__global__ void lut_auto_level_kernel(const reduce_result *range, int colour, unsigned char *lut)
{
    if (threadIdx.x != 0)
        return;
    int lo = 255, hi = 0;
    for (int c = 0; c < colour; c++) {
        lo = min(lo, (int)range->min[c]);
        hi = max(hi, (int)range->max[c]);
    }
    gf_stretch_lut(lo, hi, lut);
}

template <int C>
__global__ void lut_apply_kernel1(unsigned char *pixels, size_t count, int colour,
                                  const unsigned char *lut, int per_channel)
{
    __shared__ unsigned char table[3 * GF_BINS];
    const int tables = per_channel ? colour : 1;
    for (int i = threadIdx.x; i < tables * GF_BINS; i += blockDim.x)
        table[i] = lut[i];
    __syncthreads();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        unsigned char *p = pixels + i * C;
#pragma unroll
        for (int c = 0; c < C; c++)
            if (c < colour)
                p[c] = table[(per_channel ? c : 0) * GF_BINS + p[c]];
    }
}

template <int C>
__global__ void lut_apply_luma_kernel1(unsigned char *pixels, size_t count, const unsigned char *lut)
{
    __shared__ unsigned char table[GF_BINS];
    int unchanged = 1;
    for (int i = threadIdx.x; i < GF_BINS; i += blockDim.x) {
        table[i] = lut[i];
        unchanged &= lut[i] == i;
    }
    /* an identity table (a constant image) leaves the pixels as they are,
     * rather than round-tripping them through 8-bit YCrCb */
    if (__syncthreads_and(unchanged))
        return;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
        gf_map_luma(pixels + i * C, table);
}

extern "C" cudaError_t lut_equalize_gpu(const unsigned long long *hist,
                                        const unsigned long long *cdf, int histograms,
                                        unsigned char *lut, cudaStream_t stream)
{
    lut_equalize_kernel<<<histograms, 32, 0, stream>>>(hist, cdf, lut);
    return cudaGetLastError();
}

extern "C" cudaError_t lut_normalize_gpu(const unsigned long long *cdf, double black, double white,
                                         unsigned char *lut, cudaStream_t stream)
{
    lut_normalize_kernel<<<1, 32, 0, stream>>>(cdf, black, white, lut);
    return cudaGetLastError();
}

extern "C" cudaError_t lut_auto_level_gpu(const reduce_result *range, int colour,
                                          unsigned char *lut, cudaStream_t stream)
{
    lut_auto_level_kernel<<<1, 32, 0, stream>>>(range, colour, lut);
    return cudaGetLastError();
}

extern "C" cudaError_t lut_apply_gpu(unsigned char *pixels, size_t count, int channels, int colour,
                                     const unsigned char *lut, int per_channel, cudaStream_t stream)
{
    typedef void (*entry)(unsigned char *, size_t, int, const unsigned char *, int);
    static const entry table[4] = {lut_apply_kernel1<1>, lut_apply_kernel1<2>,
                                   lut_apply_kernel1<3>, lut_apply_kernel1<4>};
    if (channels < 1 || channels > 4 || colour < 1 || colour > 3)
        return cudaErrorInvalidValue;
    table[channels - 1]<<<gf_grid_for(count, LUT_THREADS), LUT_THREADS, 0, stream>>>(
        pixels, count, colour, lut, per_channel);
    return cudaGetLastError();
}

extern "C" cudaError_t lut_apply_luma_gpu(unsigned char *pixels, size_t count, int channels,
                                          const unsigned char *lut, cudaStream_t stream)
{
    if (channels == 3)
        lut_apply_luma_kernel1<3><<<gf_grid_for(count, LUT_THREADS), LUT_THREADS, 0, stream>>>(
            pixels, count, lut);
    else if (channels == 4)
        lut_apply_luma_kernel1<4><<<gf_grid_for(count, LUT_THREADS), LUT_THREADS, 0, stream>>>(
            pixels, count, lut);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}
