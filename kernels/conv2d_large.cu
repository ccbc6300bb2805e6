/* conv2d_large.cu - masks of any size (past conv2d.cu's 31x31), and the
 * unsharp combine: sums in float (box: in integers), finished as the
 * reference finishes.
 *
 * Methods, the ladder for large masks (conv2d_large_method_for() gives a
 * mask's own one; src/cuda_large.c takes fft instead where it estimates it
 * faster). H200, 8192x8192 RGBA (bench/RESULTS.md):
 *   direct     any mask, any matrices: a block of 40x16 outputs walks the
 *              mask in 15x15 chunks, each chunk's input tile and weights
 *              staged in shared memory; a thread slides along 5 adjacent
 *              outputs. taps x K FMAs per value: compute-bound (63x63:
 *              74 ms, ~14e12 FMA/s).
 *   separable  one matrix, column x row: a row pass (a block stages its
 *              row segment plus the halo in shared memory, planar per
 *              channel; a thread slides along 7 adjacent outputs) into
 *              float scratch, then a column pass (a thread slides down 8
 *              outputs of one column). Each step of a slide loads one
 *              weight and one value for 7 or 8 FMAs. width + height FMAs
 *              per value; the scratch is read and written once (8 B a
 *              value). Gaussian sigma 10: 4.3 ms; sigma 250: 113 ms.
 *   box        one matrix of equal weights: sums exact in 32-bit unsigned
 *              integers (4095 x 4095 x 255 < 2^32), along rows as
 *              differences of a row segment's prefix sums (in shared
 *              memory), into planar scratch, then down columns as running
 *              sums (a thread walks a run of one column); finished in
 *              double, so the bytes are the reference's. The cost per value
 *              does not grow with the radius (but for the halo staged):
 *              box:63 2.4 ms, box:255 3.8 ms; ~40 B moved a pixel against
 *              the copy's 8, so memory-bound far under the copy.
 *   fft        any mask (src/cuda_fft.c, cuFFT): per channel, the image
 *              padded through the border, its spectrum times the conjugate
 *              of each matrix's, back (the circular correlation, exact
 *              where it does not wrap), finished. O(log n) a value whatever
 *              the mask: 10.6 ms from 33x33 to 1501x1501 (9 transforms of
 *              ~8400^2 points).
 *
 * The border is applied where a pass reads (gf_border_index), so the
 * column pass reads row-pass values at mapped rows: the border commutes
 * with a pass along the other axis. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "conv2d_large.h"
#include "kernels.h"

extern "C" {
#include "../src/border.h"
}

namespace {

constexpr int kDirectRun = 5;        /* direct: adjacent outputs per thread */
constexpr int kChunk = 3 * kDirectRun;  /* direct: mask chunk side (a multiple of the run) */
constexpr int kRowThreads = 128;     /* separable row pass: threads a block */
constexpr int kRowRun = 7;           /* adjacent outputs per thread (odd: see large_rows) */
constexpr int kColumnRun = 8;        /* separable column pass: outputs per thread */
constexpr int kBoxThreads = 256;     /* box row pass: threads a block */
constexpr int kBoxSegment = 2048;    /* box row pass: outputs a block */

/* The finished byte of one value from its K matrix responses r[k]. */
template <int K>
__device__ unsigned char finish_value(const conv2d_large_launch &p, const float *r, float source)
{
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < K; k++) {
        switch (p.combine) {
        case GF_COMBINE_MAGNITUDE: v += r[k] * r[k]; break;
        case GF_COMBINE_MAX: v = k == 0 ? r[k] : fmaxf(v, r[k]); break;
        case GF_COMBINE_MIN: v = k == 0 ? r[k] : fminf(v, r[k]); break;
        default: v += r[k]; break;
        }
    }
    if (p.combine == GF_COMBINE_MAGNITUDE)
        v = sqrtf(v);
    if (p.combine == GF_COMBINE_UNSHARP) {
        const float d = source - v;
        v = fabsf(d) >= p.threshold ? source + p.amount * d : source;
    }
    v = rintf(v);  /* half to even */
    return (unsigned char)(v > 0.0f ? (v < 255.0f ? v : 255.0f) : 0.0f);  /* NaN: 0 */
}

__device__ size_t pixel_at(const conv2d_large_launch &p, int x, int y)
{
    return ((size_t)y * p.width + x) * p.channels;
}

/* Scratch of one value per filtered channel and pixel, planar: plane c
 * holds row-major width x height values. */
__device__ size_t plane_at(const conv2d_large_launch &p, int c, int x, int y)
{
    return ((size_t)c * p.height + y) * p.width + x;
}

/* ---- direct ----------------------------------------------------------------- */

/* A block: kDirectRun * 8 by 16 outputs, the mask walked in chunks of
 * kChunk x kChunk taps, each chunk's input tile (planar per channel) and
 * weights staged in shared memory. A thread: kDirectRun adjacent outputs of
 * one row, sliding along each tap row (one weight and one value loaded per
 * tap for kDirectRun FMAs per matrix and channel). */
template <int CF, int K>
__global__ void large_direct(conv2d_large_launch p)
{
    constexpr int R = kDirectRun, cols = 8 * R + kChunk, rows = 16 + kChunk - 1, pitch = cols + 1;
    __shared__ float tile[CF][rows][pitch];
    __shared__ float weights[K][kChunk][kChunk];
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * 8 + tx, threads = 8 * 16;
    const int x0 = blockIdx.x * 8 * R, y0 = blockIdx.y * 16;
    const int ax = p.mask_width / 2, ay = p.mask_height / 2;
    const gf_border border = (gf_border)p.border;
    float acc[K][CF][R] = {};
    for (int cy = 0; cy < p.mask_height; cy += kChunk)
        for (int cx = 0; cx < p.mask_width; cx += kChunk) {
            for (int i = t; i < rows * cols; i += threads) {
                const int sy = gf_border_index(y0 - ay + cy + i / cols, p.height, border);
                const int sx = gf_border_index(x0 - ax + cx + i % cols, p.width, border);
#pragma unroll
                for (int c = 0; c < CF; c++)
                    tile[c][i / cols][i % cols] = sx < 0 || sy < 0 ? 0.0f : p.src[pixel_at(p, sx, sy) + c];
            }
            for (int i = t; i < K * kChunk * kChunk; i += threads) {
                const int k = i / (kChunk * kChunk), my = i / kChunk % kChunk, mx = i % kChunk;
                const int wy = cy + my, wx = cx + mx;
                weights[k][my][mx] = wy < p.mask_height && wx < p.mask_width
                    ? p.weights[((size_t)k * p.mask_height + wy) * p.mask_width + wx] : 0.0f;
            }
            __syncthreads();
            const int chunk_rows = min(kChunk, p.mask_height - cy);
            for (int my = 0; my < chunk_rows; my++) {
                float ring[CF][R];
#pragma unroll
                for (int c = 0; c < CF; c++)
#pragma unroll
                    for (int r = 0; r < R; r++)
                        ring[c][r] = tile[c][ty + my][tx * R + r];
#pragma unroll
                for (int m0 = 0; m0 < kChunk; m0 += R)
#pragma unroll
                    for (int q = 0; q < R; q++) {
#pragma unroll
                        for (int k = 0; k < K; k++) {
                            const float w = weights[k][my][m0 + q];
#pragma unroll
                            for (int c = 0; c < CF; c++)
#pragma unroll
                                for (int r = 0; r < R; r++)
                                    acc[k][c][r] = fmaf(w, ring[c][(q + r) % R], acc[k][c][r]);
                        }
#pragma unroll
                        for (int c = 0; c < CF; c++)
                            ring[c][q] = tile[c][ty + my][tx * R + m0 + q + R];
                    }
            }
            __syncthreads();
        }
    const int y = y0 + ty;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int x = x0 + tx * R + r;
        if (x >= p.width || y >= p.height)
            continue;
        const size_t at = pixel_at(p, x, y);
#pragma unroll
        for (int c = 0; c < CF; c++) {
            float v[K];
#pragma unroll
            for (int k = 0; k < K; k++)
                v[k] = acc[k][c][r] / p.scale[k] + p.offset[k];
            p.dst[at + c] = finish_value<K>(p, v, p.src[at + c]);
        }
        for (int c = CF; c < p.channels; c++)
            p.dst[at + c] = p.src[at + c];
    }
}

template <int K>
const void *direct_for(int channels_filtered)
{
    switch (channels_filtered) {
    case 1: return (const void *)large_direct<1, K>;
    case 2: return (const void *)large_direct<2, K>;
    case 3: return (const void *)large_direct<3, K>;
    default: return (const void *)large_direct<4, K>;
    }
}

/* The direct kernel for the launch's filtered channels and matrices. */
const void *direct_kernel(const conv2d_large_launch *p)
{
    switch (p->mask_count) {
    case 1: return direct_for<1>(p->channels_filtered);
    case 2: return direct_for<2>(p->channels_filtered);
    case 3: return direct_for<3>(p->channels_filtered);
    default: return direct_for<4>(p->channels_filtered);
    }
}

/* ---- separable ------------------------------------------------------------- */

/* acc[r] += w[m] * v[m + r] for m < taps (rounded up to a multiple of R,
 * w zero past taps), r < R: each step loads one weight and one value and
 * does R FMAs, the last R values kept in a ring whose indices the unrolled
 * loop fixes at compile time. v(i) reads value i. */
template <int R, class Read>
__device__ void sliding_sums(const float *w, int taps, Read v, float *acc)
{
    float ring[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        ring[r] = v(r);
        acc[r] = 0.0f;
    }
    for (int m0 = 0; m0 < taps; m0 += R) {
#pragma unroll
        for (int q = 0; q < R; q++) {
            const float weight = w[m0 + q];
#pragma unroll
            for (int r = 0; r < R; r++)
                acc[r] = fmaf(weight, ring[(q + r) % R], acc[r]);
            ring[q] = v(m0 + q + R);
        }
    }
}

/* Taps rounded up to a multiple of R, for sliding_sums's zero weights. */
__host__ __device__ constexpr int padded_taps(int taps, int r)
{
    return (taps + r - 1) / r * r;
}

/* Plane c of scratch at (x, y) = sum over mx of row[mx] * source (x + mx -
 * ax, y). A block: one row segment of kRowThreads * kRowRun outputs, staged
 * with its halo in shared memory, planar per channel; a thread: kRowRun
 * adjacent outputs (odd, so that a warp's loads, kRowRun words apart, fall
 * in 32 different banks), written back through shared memory so that the
 * stores to scratch are whole lines. */
__global__ void large_rows(conv2d_large_launch p)
{
    extern __shared__ float shared[];
    const int taps = padded_taps(p.mask_width, kRowRun);
    const int segment = kRowThreads * kRowRun, span = segment + taps + kRowRun;
    float *row = shared, *out = shared + taps, *values = out + segment;  /* values[c * span + i] */
    const int x0 = blockIdx.x * segment, y = blockIdx.y, ax = p.mask_width / 2;
    for (int i = threadIdx.x; i < taps; i += kRowThreads)
        row[i] = i < p.mask_width ? p.row[i] : 0.0f;
    for (int i = threadIdx.x; i < span; i += kRowThreads) {
        const int sx = gf_border_index(x0 - ax + i, p.width, (gf_border)p.border);
        for (int c = 0; c < p.channels_filtered; c++)
            values[c * span + i] = sx < 0 ? 0.0f : p.src[pixel_at(p, sx, y) + c];
    }
    __syncthreads();
    const int first = threadIdx.x * kRowRun;
    for (int c = 0; c < p.channels_filtered; c++) {
        const float *v = values + c * span + first;
        float acc[kRowRun];
        sliding_sums<kRowRun>(row, taps, [&](int i) { return v[i]; }, acc);
#pragma unroll
        for (int r = 0; r < kRowRun; r++)
            out[first + r] = acc[r];
        __syncthreads();
        float *plane = (float *)p.scratch + plane_at(p, c, 0, y);
        for (int i = threadIdx.x; i < segment && x0 + i < p.width; i += kRowThreads)
            plane[x0 + i] = out[i];
        __syncthreads();
    }
}

/* Each thread: kColumnRun outputs of one column, every input read once. */
__global__ void large_columns(conv2d_large_launch p)
{
    extern __shared__ float column[];
    const int taps = padded_taps(p.mask_height, kColumnRun);
    const int t = threadIdx.y * blockDim.x + threadIdx.x, threads = blockDim.x * blockDim.y;
    for (int i = t; i < taps; i += threads)
        column[i] = i < p.mask_height ? p.column[i] : 0.0f;
    __syncthreads();
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * kColumnRun;
    if (x >= p.width || y0 >= p.height)
        return;
    const int ay = p.mask_height / 2;
    /* rows y0 - ay .. y0 - ay + taps + kColumnRun - 1 are read: inside the
     * image (most threads) they need no border, one row a step */
    const bool inside = y0 - ay >= 0 && y0 - ay + taps + kColumnRun <= p.height;
    for (int c = 0; c < p.channels_filtered; c++) {
        float acc[kColumnRun];
        const float *plane = (const float *)p.scratch + plane_at(p, c, x, 0);
        if (inside) {
            const float *first = plane + (size_t)(y0 - ay) * p.width;
            sliding_sums<kColumnRun>(column, taps, [&](int i) { return first[(size_t)i * p.width]; }, acc);
        } else {
            sliding_sums<kColumnRun>(column, taps, [&](int i) {
                const int sy = gf_border_index(y0 - ay + i, p.height, (gf_border)p.border);
                return sy < 0 ? 0.0f : plane[(size_t)sy * p.width];
            }, acc);
        }
        for (int r = 0; r < kColumnRun && y0 + r < p.height; r++) {
            const size_t at = pixel_at(p, x, y0 + r) + c;
            const float response = acc[r] / p.scale[0] + p.offset[0];
            p.dst[at] = finish_value<1>(p, &response, p.src[at]);
        }
    }
    for (int r = 0; r < kColumnRun && y0 + r < p.height; r++)
        for (int c = p.channels_filtered; c < p.channels; c++)
            p.dst[pixel_at(p, x, y0 + r) + c] = p.src[pixel_at(p, x, y0 + r) + c];
}

/* ---- box ----------------------------------------------------------------------- */

/* Inclusive prefix sums of q[0..n-1] in shared memory, by the block's
 * kBoxThreads threads: each sums a run of consecutive values, the runs'
 * totals are scanned across the block, and each run adds what comes before
 * it. Ends with the block synchronised. */
__device__ void block_prefix_sums(unsigned *q, int n, unsigned *warp_totals)
{
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const int chunk = (n + kBoxThreads - 1) / kBoxThreads, start = t * chunk;
    const int end = min(n, start + chunk);
    unsigned run = 0;
    for (int i = start; i < end; i++)
        q[i] = run += q[i];
    unsigned inclusive = run;
    for (int d = 1; d < 32; d *= 2) {
        const unsigned other = __shfl_up_sync(0xffffffffu, inclusive, d);
        if (lane >= d)
            inclusive += other;
    }
    if (lane == 31)
        warp_totals[warp] = inclusive;
    __syncthreads();
    if (t == 0)
        for (int w = 1; w < kBoxThreads / 32; w++)
            warp_totals[w] += warp_totals[w - 1];
    __syncthreads();
    const unsigned before = inclusive - run + (warp > 0 ? warp_totals[warp - 1] : 0u);
    for (int i = start; i < end; i++)
        q[i] += before;
    __syncthreads();
}

/* Plane c of scratch (as unsigned) at (x, y) = the sum of the mask_width
 * source values from x - ax on: a block stages a row segment of kBoxSegment
 * outputs plus the halo, takes its prefix sums P, and each output is
 * P[x + width] - P[x], exact in 32 bits. */
__global__ void box_rows(conv2d_large_launch p)
{
    extern __shared__ unsigned sums[];  /* [c][n + 1], sums[c][0] = 0 */
    __shared__ unsigned warp_totals[kBoxThreads / 32];
    const int n = kBoxSegment + p.mask_width - 1, x0 = blockIdx.x * kBoxSegment, y = blockIdx.y;
    const int ax = p.mask_width / 2;
    for (int i = threadIdx.x; i < n; i += kBoxThreads) {
        const int sx = gf_border_index(x0 - ax + i, p.width, (gf_border)p.border);
        for (int c = 0; c < p.channels_filtered; c++)
            sums[c * (n + 1) + i + 1] = sx < 0 ? 0u : p.src[pixel_at(p, sx, y) + c];
    }
    if (threadIdx.x == 0)
        for (int c = 0; c < p.channels_filtered; c++)
            sums[c * (n + 1)] = 0u;
    __syncthreads();
    for (int c = 0; c < p.channels_filtered; c++)
        block_prefix_sums(sums + c * (n + 1) + 1, n, warp_totals);
    for (int c = 0; c < p.channels_filtered; c++) {
        const unsigned *q = sums + c * (n + 1);
        unsigned *plane = (unsigned *)p.scratch + plane_at(p, c, 0, y);
        for (int i = threadIdx.x; i < kBoxSegment && x0 + i < p.width; i += kBoxThreads)
            plane[x0 + i] = q[i + p.mask_width] - q[i];
    }
}

/* Outputs a thread of box_columns walks down: enough that the window's
 * first sum is a small share of the run, few enough that the threads fill
 * the device. */
__host__ __device__ int box_run(int taps, int width, int height)
{
    const long long share = (long long)width * height / 300000;
    const int fill = share < 32 ? 32 : (share > 1024 ? 1024 : (int)share);
    return 2 * taps < fill ? 2 * taps : fill;
}

/* The column sums of the row sums, a thread a run of one column, finished
 * in double: sum * weight / scale + offset, as the reference's exact sum. */
__global__ void box_columns(conv2d_large_launch p)
{
    const int run = box_run(p.mask_height, p.width, p.height), x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y0 = blockIdx.y * run, ay = p.mask_height / 2;
    if (x >= p.width || y0 >= p.height)
        return;
    const int y1 = min(p.height, y0 + run);
    const unsigned *sums = (const unsigned *)p.scratch;
    const gf_border border = (gf_border)p.border;
    const bool inside = y0 - ay - 1 >= 0 && y1 - 1 - ay + p.mask_height - 1 < p.height;
    for (int c = 0; c < p.channels; c++) {
        if (c >= p.channels_filtered) {
            for (int y = y0; y < y1; y++)
                p.dst[pixel_at(p, x, y) + c] = p.src[pixel_at(p, x, y) + c];
            continue;
        }
        const unsigned *plane = sums + plane_at(p, c, x, 0);
        /* the row of virtual index i; inside the image (most runs) no border */
        auto row = [&](int i) {
            if (inside)
                return plane[(size_t)i * p.width];
            const int sy = gf_border_index(i, p.height, border);
            return sy < 0 ? 0u : plane[(size_t)sy * p.width];
        };
        unsigned sum = 0;
        for (int my = 0; my < p.mask_height; my++)
            sum += row(y0 - ay + my);
        for (int y = y0; y < y1; y++) {
            if (y > y0)
                sum += row(y - ay + p.mask_height - 1) - row(y - ay - 1);
            const size_t at = pixel_at(p, x, y) + c;
            const double v = (double)sum * p.box_weight / p.scale_exact + p.offset_exact;
            double out = v;
            if (p.combine == GF_COMBINE_UNSHARP) {
                const double source = p.src[at], d = source - v;
                out = fabs(d) >= p.threshold ? source + p.amount * d : source;
            } else if (p.combine == GF_COMBINE_MAGNITUDE) {
                out = fabs(v);
            }
            out = rint(out);
            p.dst[at] = (unsigned char)(out > 0.0 ? (out < 255.0 ? out : 255.0) : 0.0);
        }
    }
}

/* ---- fft: the kernels around cuFFT's transforms (src/cuda_fft.c) ------------- */

/* real[j * lw + i] = the source's channel at (i - ax, j - ay) through the
 * border for i < width + mask_width - 1, j < height + mask_height - 1;
 * zero past them, up to lw x lh. */
__global__ void fft_pad_image(conv2d_large_launch p, int channel, float *real, int lw, int lh)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= lw || j >= lh)
        return;
    float v = 0.0f;
    if (i < p.width + p.mask_width - 1 && j < p.height + p.mask_height - 1) {
        const int sx = gf_border_index(i - p.mask_width / 2, p.width, (gf_border)p.border);
        const int sy = gf_border_index(j - p.mask_height / 2, p.height, (gf_border)p.border);
        v = sx < 0 || sy < 0 ? 0.0f : p.src[pixel_at(p, sx, sy) + channel];
    }
    real[(size_t)j * lw + i] = v;
}

/* real = matrix k's weights at the top left of an lw x lh array of zeros. */
__global__ void fft_pad_weights(conv2d_large_launch p, int k, float *real, int lw, int lh)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= lw || j >= lh)
        return;
    real[(size_t)j * lw + i] = i < p.mask_width && j < p.mask_height
        ? p.weights[((size_t)k * p.mask_height + j) * p.mask_width + i] : 0.0f;
}

/* out = image * conj(weights) * scale: the spectrum of the circular
 * correlation (cuFFT's inverse is unnormalized: scale = 1 / (lw lh)). */
__global__ void fft_correlate(const float2 *image, const float2 *weights, float2 *out, size_t n, float scale)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const float2 a = image[i], b = weights[i];
    out[i] = make_float2((a.x * b.x + a.y * b.y) * scale, (a.y * b.x - a.x * b.y) * scale);
}

/* The channel's bytes from the K correlations (results[k] at y * lw + x),
 * finished as every method's; a channel past the filtered ones is copied. */
template <int K>
__global__ void fft_finish(conv2d_large_launch p, int channel, conv2d_fft_results results, int lw)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= p.width || y >= p.height)
        return;
    const size_t at = pixel_at(p, x, y) + channel;
    if (channel >= p.channels_filtered) {
        p.dst[at] = p.src[at];
        return;
    }
    float v[K];
#pragma unroll
    for (int k = 0; k < K; k++)
        v[k] = results.plane[k][(size_t)y * lw + x] / p.scale[k] + p.offset[k];
    p.dst[at] = finish_value<K>(p, v, p.src[at]);
}

unsigned blocks_for(long long items, int threads)
{
    return (unsigned)((items + threads - 1) / threads);
}

cudaError_t launch_separable(const conv2d_large_launch *p, cudaStream_t stream)
{
    const int segment = kRowThreads * kRowRun, taps = padded_taps(p->mask_width, kRowRun);
    const size_t row_shared =
        sizeof(float) * (taps + segment + (size_t)p->channels_filtered * (segment + taps + kRowRun));
    cudaError_t err = conv2d_allow_shared((const void *)large_rows, row_shared);
    if (err != cudaSuccess)
        return err;
    large_rows<<<dim3(blocks_for(p->width, segment), p->height), kRowThreads, row_shared, stream>>>(*p);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;
    const dim3 block(32, 8);
    const size_t column_shared = sizeof(float) * padded_taps(p->mask_height, kColumnRun);
    large_columns<<<dim3(blocks_for(p->width, 32), blocks_for(p->height, 8 * kColumnRun)), block,
                    column_shared, stream>>>(*p);
    return cudaGetLastError();
}

cudaError_t launch_box(const conv2d_large_launch *p, cudaStream_t stream)
{
    const size_t shared = sizeof(unsigned) * (size_t)p->channels_filtered * (kBoxSegment + p->mask_width);
    cudaError_t err = conv2d_allow_shared((const void *)box_rows, shared);
    if (err != cudaSuccess)
        return err;
    box_rows<<<dim3(blocks_for(p->width, kBoxSegment), p->height), kBoxThreads, shared, stream>>>(*p);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;
    const int run = box_run(p->mask_height, p->width, p->height);
    box_columns<<<dim3(blocks_for(p->width, 64), blocks_for(p->height, run)), 64, 0, stream>>>(*p);
    return cudaGetLastError();
}

}  // namespace

static int all_equal(const double *v, int n)
{
    for (int i = 1; i < n; i++)
        if (v[i] != v[0])
            return 0;
    return 1;
}

extern "C" int conv2d_large_method_for(const gf_mask *mask)
{
    if (mask->count != 1 || !mask->separable)
        return CONV2D_LARGE_DIRECT;
    return all_equal(mask->weights[0], mask->width * mask->height) &&
                   all_equal(mask->row, mask->width) && all_equal(mask->column, mask->height)
               ? CONV2D_LARGE_BOX : CONV2D_LARGE_SEPARABLE;
}

extern "C" void conv2d_large_launch_of(const gf_mask *mask, int width, int height, int channels,
                                       int channels_filtered, int border, conv2d_large_launch *p)
{
    memset(p, 0, sizeof *p);
    p->width = width;
    p->height = height;
    p->channels = channels;
    p->channels_filtered = channels_filtered;
    p->border = border;
    p->mask_width = mask->width;
    p->mask_height = mask->height;
    p->mask_count = mask->count;
    p->combine = mask->combine;
    p->amount = (float)mask->amount;
    p->threshold = (float)mask->threshold;
    p->box_weight = mask->weights[0][0];
    p->scale_exact = mask->scale[0];
    p->offset_exact = mask->offset[0];
    for (int k = 0; k < mask->count; k++) {
        p->scale[k] = (float)mask->scale[k];
        p->offset[k] = (float)mask->offset[k];
    }
}

extern "C" const char *conv2d_large_method_name(int method)
{
    static const char *const names[] = {"large direct", "large separable", "large box", "large fft"};
    return method >= 0 && method < CONV2D_LARGE_METHODS ? names[method] : NULL;
}

extern "C" size_t conv2d_large_scratch_bytes(int method, const conv2d_large_launch *p)
{
    if (method == CONV2D_LARGE_DIRECT || method == CONV2D_LARGE_FFT)
        return 0;
    return (size_t)p->width * p->height * p->channels * sizeof(float);  /* float or unsigned */
}

extern "C" cudaError_t conv2d_large_gpu(int method, const conv2d_large_launch *p, cudaStream_t stream)
{
    switch (method) {
    case CONV2D_LARGE_SEPARABLE: return launch_separable(p, stream);
    case CONV2D_LARGE_BOX: return launch_box(p, stream);
    default: break;
    }
    void *args[] = {(void *)p};
    return cudaLaunchKernel(direct_kernel(p), dim3(blocks_for(p->width, 8 * kDirectRun), blocks_for(p->height, 16)),
                            dim3(8, 16), args, 0, stream);
}

extern "C" cudaError_t conv2d_fft_pad_image(const conv2d_large_launch *p, int channel, float *real,
                                            int lw, int lh, cudaStream_t stream)
{
    fft_pad_image<<<dim3(blocks_for(lw, 32), blocks_for(lh, 8)), dim3(32, 8), 0, stream>>>(*p, channel, real, lw, lh);
    return cudaGetLastError();
}

extern "C" cudaError_t conv2d_fft_pad_weights(const conv2d_large_launch *p, int k, float *real, int lw,
                                              int lh, cudaStream_t stream)
{
    fft_pad_weights<<<dim3(blocks_for(lw, 32), blocks_for(lh, 8)), dim3(32, 8), 0, stream>>>(*p, k, real, lw, lh);
    return cudaGetLastError();
}

extern "C" cudaError_t conv2d_fft_correlate(const void *image, const void *weights, void *out, size_t n,
                                            float scale, cudaStream_t stream)
{
    fft_correlate<<<blocks_for((long long)n, 256), 256, 0, stream>>>((const float2 *)image, (const float2 *)weights,
                                                                   (float2 *)out, n, scale);
    return cudaGetLastError();
}

extern "C" cudaError_t conv2d_fft_finish(const conv2d_large_launch *p, int channel, conv2d_fft_results results,
                                         int lw, cudaStream_t stream)
{
    const dim3 grid(blocks_for(p->width, 32), blocks_for(p->height, 8)), block(32, 8);
    switch (p->mask_count) {
    case 1: fft_finish<1><<<grid, block, 0, stream>>>(*p, channel, results, lw); break;
    case 2: fft_finish<2><<<grid, block, 0, stream>>>(*p, channel, results, lw); break;
    case 3: fft_finish<3><<<grid, block, 0, stream>>>(*p, channel, results, lw); break;
    default: fft_finish<4><<<grid, block, 0, stream>>>(*p, channel, results, lw); break;
    }
    return cudaGetLastError();
}
