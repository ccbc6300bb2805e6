/* histogram.cu - 256-bin histograms of 8-bit channels (or of BT.601 luma).
 *
 * Version ladder
 *   0 global   every pixel does an atomicAdd on the global histogram: the
 *              correctness baseline; on real photos many threads hit the same
 *              bins and serialise on a few addresses.
 *   1 shared   privatized: each block counts into its own shared-memory
 *              histograms (32-bit atomics, fast and spread over the SM),
 *              then adds its 256 * C bins to the global 64-bit counters
 *              once. Grid-stride so that the bins are merged once per block,
 *              not once per tile of pixels. Still one byte load per
 *              channel and pixel: load-issue-bound far below the memory
 *              system (~25% of the copy bandwidth on gray).
 *   2 vector   16-byte loads (two in flight per thread), the bytes counted
 *              from registers; one private histogram per warp (8 copies
 *              per block: contention between warps gone, only same-bin
 *              lanes of one warp serialise), merged at the end; fewer
 *              blocks (4 per SM), so the global merge is 4 x SMs atomics
 *              per bin. Channel of byte j of vector i: (16 i + j) mod C.
 *              Luma of 3-channel pixels (which straddle vectors) stays on
 *              version 1.
 *
 * Roofline budget: C bytes read per pixel, nothing written but the bins;
 * memory-bound at the copy bandwidth in principle (H100 ~3.0 TB/s: 64 Mi
 * bytes in ~22 us), in practice bound by shared-memory atomic throughput
 * (one atomic per byte: ~3 instructions a byte, ~8 us of issue for 64 Mi
 * bytes on 132 SMs) and by same-bin collisions when a channel is
 * concentrated in few bins. */
#include <stdint.h>

#include "kernels.h"

extern "C" {
#include "../src/tone.h"
}

#define HISTOGRAM_THREADS 256

extern "C" int gf_grid_for(size_t items, int threads)
{
    int device = 0, sms = 1;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    size_t needed = (items + (size_t)threads - 1) / (size_t)threads;
    size_t filling = (size_t)sms * 8;
    size_t blocks = needed < filling ? needed : filling;
    return blocks > 0 ? (int)blocks : 1;
}

template <int C, bool LUMA>
__device__ __forceinline__ void histogram_pixel(const unsigned char *p, unsigned int *bins_or_null,
                                                unsigned long long *global_or_null)
{
    if constexpr (LUMA) {
        int v = gf_luma(p[0], p[1], p[2]);
        if (bins_or_null)
            atomicAdd(&bins_or_null[v], 1u);
        else
            atomicAdd(&global_or_null[v], 1ull);
    } else {
#pragma unroll
        for (int c = 0; c < C; c++) {
            if (bins_or_null)
                atomicAdd(&bins_or_null[c * GF_BINS + p[c]], 1u);
            else
                atomicAdd(&global_or_null[c * GF_BINS + p[c]], 1ull);
        }
    }
}

template <int C, bool LUMA>
__global__ void histogram_kernel0(const unsigned char *src, size_t pixels, unsigned long long *hist)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < pixels; i += stride)
        histogram_pixel<C, LUMA>(src + i * C, NULL, hist);
}

template <int C, bool LUMA>
__global__ void histogram_kernel1(const unsigned char *src, size_t pixels, unsigned long long *hist)
{
    constexpr int HISTS = LUMA ? 1 : C;
    __shared__ unsigned int bins[HISTS * GF_BINS];
    for (int i = threadIdx.x; i < HISTS * GF_BINS; i += blockDim.x)
        bins[i] = 0;
    __syncthreads();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < pixels; i += stride)
        histogram_pixel<C, LUMA>(src + i * C, bins, NULL);
    __syncthreads();
    for (int i = threadIdx.x; i < HISTS * GF_BINS; i += blockDim.x)
        if (bins[i])
            atomicAdd(&hist[i], (unsigned long long)bins[i]);
}

/* ---- version 2 ---------------------------------------------------------------- */

#define HISTOGRAM_WARPS (HISTOGRAM_THREADS / 32)

/* Count the bytes of one 32-bit word: byte k is channel (c0 + k) mod C, or,
 * with LUMA (C == 4), the word is one pixel. */
template <int C, bool LUMA>
__device__ __forceinline__ void histogram_word(unsigned int *bins, unsigned int w, int c0)
{
    if constexpr (LUMA) {
        atomicAdd(&bins[gf_luma(w & 0xFF, (w >> 8) & 0xFF, (w >> 16) & 0xFF)], 1u);
    } else {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int c = C == 1 ? 0 : C == 3 ? c0 + k : k % C;
            if (C == 3 && c >= 3)
                c -= c >= 6 ? 6 : 3;
            atomicAdd(&bins[c * GF_BINS + ((w >> (8 * k)) & 0xFF)], 1u);
        }
    }
}

/* Vector i of 16 bytes starts at channel (16 i) mod C = i mod 3 for C = 3. */
template <int C, bool LUMA>
__device__ __forceinline__ void histogram_vector(unsigned int *bins, uint4 v, size_t i)
{
    const int c0 = C == 3 ? (int)(i % 3) : 0;
    histogram_word<C, LUMA>(bins, v.x, c0);
    histogram_word<C, LUMA>(bins, v.y, C == 3 ? c0 + 1 : 0);
    histogram_word<C, LUMA>(bins, v.z, C == 3 ? c0 + 2 : 0);
    histogram_word<C, LUMA>(bins, v.w, C == 3 ? c0 : 0);  /* 12 bytes on: + 12 = 0 mod 3 */
}

template <int C, bool LUMA>
__global__ void __launch_bounds__(HISTOGRAM_THREADS) histogram_kernel2(const unsigned char *src, size_t pixels,
                                                                      unsigned long long *hist)
{
    static_assert(!LUMA || C == 4, "luma of 3-channel pixels runs on version 1");
    constexpr int HISTS = LUMA ? 1 : C;
    __shared__ unsigned int bins[HISTOGRAM_WARPS][HISTS * GF_BINS];
    for (int i = threadIdx.x; i < HISTOGRAM_WARPS * HISTS * GF_BINS; i += blockDim.x)
        (&bins[0][0])[i] = 0;
    __syncthreads();
    unsigned int *mine = bins[threadIdx.x / 32];
    const size_t bytes = pixels * C, vectors = bytes / 16;
    const uint4 *v = reinterpret_cast<const uint4 *>(src);
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + stride < vectors; i += 2 * stride) {
        const uint4 a = __ldg(v + i), b = __ldg(v + i + stride);
        histogram_vector<C, LUMA>(mine, a, i);
        histogram_vector<C, LUMA>(mine, b, i + stride);
    }
    if (i < vectors)
        histogram_vector<C, LUMA>(mine, __ldg(v + i), i);
    /* the last bytes * mod 16, by block 0: whole pixels with LUMA (16 is a
     * multiple of 4), else channel = byte index mod C */
    if (blockIdx.x == 0)
        for (size_t t = vectors * 16 + threadIdx.x * (LUMA ? 4 : 1); t < bytes;
             t += blockDim.x * (LUMA ? 4 : 1)) {
            if constexpr (LUMA)
                atomicAdd(&mine[gf_luma(src[t], src[t + 1], src[t + 2])], 1u);
            else
                atomicAdd(&mine[(int)(t % C) * GF_BINS + src[t]], 1u);
        }
    __syncthreads();
    for (int b = threadIdx.x; b < HISTS * GF_BINS; b += blockDim.x) {
        unsigned int total = 0;
#pragma unroll
        for (int w = 0; w < HISTOGRAM_WARPS; w++)
            total += bins[w][b];
        if (total)
            atomicAdd(&hist[b], (unsigned long long)total);
    }
}

typedef void (*histogram_entry)(const unsigned char *, size_t, unsigned long long *);

static histogram_entry histogram_entry_for(int version, int channels, int luma)
{
    static const histogram_entry table[HISTOGRAM_VERSIONS][2][4] = {
        {{histogram_kernel0<1, false>, histogram_kernel0<2, false>, histogram_kernel0<3, false>,
          histogram_kernel0<4, false>},
         {NULL, NULL, histogram_kernel0<3, true>, histogram_kernel0<4, true>}},
        {{histogram_kernel1<1, false>, histogram_kernel1<2, false>, histogram_kernel1<3, false>,
          histogram_kernel1<4, false>},
         {NULL, NULL, histogram_kernel1<3, true>, histogram_kernel1<4, true>}},
        {{histogram_kernel2<1, false>, histogram_kernel2<2, false>, histogram_kernel2<3, false>,
          histogram_kernel2<4, false>},
         {NULL, NULL, histogram_kernel1<3, true>, histogram_kernel2<4, true>}},
    };
    if (version < 0 || version >= HISTOGRAM_VERSIONS || channels < 1 || channels > 4)
        return NULL;
    return table[version][luma ? 1 : 0][channels - 1];
}

extern "C" cudaError_t histogram_gpu(int version, const unsigned char *src, size_t pixels,
                                     int channels, int luma, unsigned long long *hist,
                                     cudaStream_t stream)
{
    histogram_entry entry = histogram_entry_for(version, channels, luma);
    if (!entry)
        return cudaErrorInvalidValue;
    size_t bytes = (size_t)(luma ? 1 : channels) * GF_BINS * sizeof *hist;
    cudaError_t err = cudaMemsetAsync(hist, 0, bytes, stream);
    if (err != cudaSuccess)
        return err;
    int blocks = gf_grid_for(pixels, HISTOGRAM_THREADS);
    if (version >= 2) {  /* 4 blocks per SM, 32 vectors per thread at least */
        blocks = gf_grid_for(((size_t)(luma ? 4 : channels) * pixels + 511) / 512, HISTOGRAM_THREADS);
        blocks = blocks / 2 > 0 ? blocks / 2 : 1;
    }
    if (version >= 2 && ((uintptr_t)src & 15))  /* vectors need 16-byte alignment */
        entry = histogram_entry_for(1, channels, luma);
    entry<<<blocks, HISTOGRAM_THREADS, 0, stream>>>(src, pixels, hist);
    return cudaGetLastError();
}
