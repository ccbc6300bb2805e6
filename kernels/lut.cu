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
 *             in the same pass. One byte load and store per channel: ~37%
 *             of the copy bandwidth on gray (H100).
 *   apply 2   the image as 16-byte vectors (two in flight per thread),
 *             every byte looked up from registers and packed back: byte j
 *             of vector i is channel (16 i + j) mod C. Used whenever the
 *             buffer is 16-byte aligned (always, for cudaMalloc's).
 *
 * Roofline budget (apply): C bytes read and C written per pixel, one
 * shared-memory lookup per channel: memory-bound, 8 B/px for RGBA, so an
 * 8192x8192 RGBA image needs ~180 us at ~3.0 TB/s (H100). The builders are
 * a few microseconds of one thread. */
#include <stdint.h>

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

/* The block's copy of the tables: one, or one per colour channel. */
__device__ __forceinline__ void lut_stage_table(unsigned char *table, const unsigned char *lut,
                                                int colour, int per_channel)
{
    const int tables = per_channel ? colour : 1;
    for (int i = threadIdx.x; i < tables * GF_BINS; i += blockDim.x)
        table[i] = lut[i];
    __syncthreads();
}

template <int C>
__global__ void lut_apply_kernel1(unsigned char *pixels, size_t count, int colour,
                                  const unsigned char *lut, int per_channel)
{
    __shared__ unsigned char table[3 * GF_BINS];
    lut_stage_table(table, lut, colour, per_channel);
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

/* One 32-bit word of apply 2: byte k is channel (c0 + k) mod C. */
template <int C>
__device__ __forceinline__ unsigned lut_word(unsigned w, int c0, const unsigned char *table,
                                             int colour, int per_channel)
{
    unsigned out = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        int c = C == 1 ? 0 : C == 3 ? c0 + k : k % C;
        if (C == 3 && c >= 3)
            c -= c >= 6 ? 6 : 3;
        const unsigned b = (w >> (8 * k)) & 0xFF;
        const unsigned v = c < colour ? table[(per_channel ? c : 0) * GF_BINS + b] : b;
        out |= v << (8 * k);
    }
    return out;
}

template <int C>
__device__ __forceinline__ uint4 lut_vector(uint4 v, size_t i, const unsigned char *table, int colour,
                                            int per_channel)
{
    const int c0 = C == 3 ? (int)(i % 3) : 0;  /* 16 i mod 3 = i mod 3 */
    v.x = lut_word<C>(v.x, c0, table, colour, per_channel);
    v.y = lut_word<C>(v.y, C == 3 ? c0 + 1 : 0, table, colour, per_channel);
    v.z = lut_word<C>(v.z, C == 3 ? c0 + 2 : 0, table, colour, per_channel);
    v.w = lut_word<C>(v.w, C == 3 ? c0 : 0, table, colour, per_channel);
    return v;
}

template <int C>
__global__ void lut_apply_kernel2(unsigned char *pixels, size_t count, int colour,
                                  const unsigned char *lut, int per_channel)
{
    __shared__ unsigned char table[3 * GF_BINS];
    lut_stage_table(table, lut, colour, per_channel);
    const size_t bytes = count * C, vectors = bytes / 16;
    uint4 *v = reinterpret_cast<uint4 *>(pixels);
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + stride < vectors; i += 2 * stride) {
        const uint4 a = v[i], b = v[i + stride];
        v[i] = lut_vector<C>(a, i, table, colour, per_channel);
        v[i + stride] = lut_vector<C>(b, i + stride, table, colour, per_channel);
    }
    if (i < vectors)
        v[i] = lut_vector<C>(v[i], i, table, colour, per_channel);
    if (blockIdx.x == 0)  /* the last bytes mod 16 */
        for (size_t t = vectors * 16 + threadIdx.x; t < bytes; t += blockDim.x) {
            const int c = (int)(t % C);
            if (c < colour)
                pixels[t] = table[(per_channel ? c : 0) * GF_BINS + pixels[t]];
        }
}

extern "C" cudaError_t lut_apply_gpu(unsigned char *pixels, size_t count, int channels, int colour,
                                     const unsigned char *lut, int per_channel, cudaStream_t stream)
{
    typedef void (*entry)(unsigned char *, size_t, int, const unsigned char *, int);
    static const entry table[2][4] = {
        {lut_apply_kernel1<1>, lut_apply_kernel1<2>, lut_apply_kernel1<3>, lut_apply_kernel1<4>},
        {lut_apply_kernel2<1>, lut_apply_kernel2<2>, lut_apply_kernel2<3>, lut_apply_kernel2<4>},
    };
    if (channels < 1 || channels > 4 || colour < 1 || colour > 3)
        return cudaErrorInvalidValue;
    const bool vectors = ((uintptr_t)pixels & 15) == 0;
    const size_t items = vectors ? (count * channels + 31) / 32 : count;  /* 2 vectors a thread */
    table[vectors][channels - 1]<<<gf_grid_for(items, LUT_THREADS), LUT_THREADS, 0, stream>>>(
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
