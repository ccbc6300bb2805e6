/* scan.cu - inclusive prefix sums of 256-bin histograms (their CDFs).
 *
 * Version ladder
 *   0 serial     one thread walks the 256 bins: the correctness baseline.
 *   1 blelloch   the work-efficient scan: 128 threads per histogram, an
 *                up-sweep that builds partial sums in a balanced tree, then
 *                a down-sweep that turns them into an exclusive scan
 *                (2 * 255 additions in 2 * 8 steps instead of 255 serial
 *                ones); adding each bin back makes it inclusive.
 *
 * Roofline budget: 2 KiB read and 2 KiB written per histogram, a handful of
 * microseconds at most: launch latency dominates. It exists so that the
 * CDF never leaves the device between the histogram and the LUT. */
#include "kernels.h"

extern "C" {
#include "../src/tone.h"
}

__global__ void scan_kernel0(const unsigned long long *in, unsigned long long *out)
{
    if (threadIdx.x != 0)
        return;
    const unsigned long long *h = in + (size_t)blockIdx.x * GF_BINS;
    unsigned long long *cdf = out + (size_t)blockIdx.x * GF_BINS;
    unsigned long long total = 0;
    for (int v = 0; v < GF_BINS; v++)
        cdf[v] = total += h[v];
}

/* one block of GF_BINS / 2 threads per histogram */
__global__ void scan_kernel1(const unsigned long long *in, unsigned long long *out)
{
    __shared__ unsigned long long t[GF_BINS];
    const unsigned long long *h = in + (size_t)blockIdx.x * GF_BINS;
    unsigned long long *cdf = out + (size_t)blockIdx.x * GF_BINS;
    const int i = threadIdx.x;
    t[2 * i] = h[2 * i];
    t[2 * i + 1] = h[2 * i + 1];
    int offset = 1;
    for (int d = GF_BINS / 2; d > 0; d >>= 1, offset <<= 1) {  /* up-sweep */
        __syncthreads();
        if (i < d)
            t[offset * (2 * i + 2) - 1] += t[offset * (2 * i + 1) - 1];
    }
    if (i == 0)
        t[GF_BINS - 1] = 0;
    for (int d = 1; d < GF_BINS; d <<= 1) {  /* down-sweep */
        offset >>= 1;
        __syncthreads();
        if (i < d) {
            const int a = offset * (2 * i + 1) - 1, b = offset * (2 * i + 2) - 1;
            unsigned long long left = t[a];
            t[a] = t[b];
            t[b] += left;
        }
    }
    __syncthreads();
    cdf[2 * i] = t[2 * i] + h[2 * i];
    cdf[2 * i + 1] = t[2 * i + 1] + h[2 * i + 1];
}

extern "C" cudaError_t scan_gpu(int version, const unsigned long long *in, unsigned long long *out,
                                int histograms, cudaStream_t stream)
{
    if (histograms < 1)
        return cudaErrorInvalidValue;
    if (version == 0)
        scan_kernel0<<<histograms, 32, 0, stream>>>(in, out);
    else if (version == 1)
        scan_kernel1<<<histograms, GF_BINS / 2, 0, stream>>>(in, out);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}
