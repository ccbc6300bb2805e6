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
 *              not once per tile of pixels.
 *
 * Roofline budget: C bytes read per pixel, nothing written but the bins;
 * memory-bound at the copy bandwidth in principle (H100 ~3.0 TB/s: 64 Mi
 * bytes in ~22 us), in practice bound by shared-memory atomic throughput
 * when a channel is concentrated in few bins. */
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
    entry<<<gf_grid_for(pixels, HISTOGRAM_THREADS), HISTOGRAM_THREADS, 0, stream>>>(src, pixels, hist);
    return cudaGetLastError();
}
