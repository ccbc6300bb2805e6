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
 *   box        one matrix of equal weights: one pass, a block walking
 *              down a strip of columns with each column's sum over the
 *              mask's rows in registers (a row in, a row out), scanned
 *              across the strip a row at a time into prefix sums in shared
 *              memory, each output the difference of two (box_fused).
 *              Exact in 32-bit unsigned integers, finished by a
 *              multiply-shift division (the usual whole scale) or in
 *              double, so the bytes are the reference's. Bound by issued
 *              instructions; the cost per value does not grow with the
 *              mask but for the strip's halo columns and the rows a chunk
 *              sums before its first output (for tall masks, from band
 *              sums of the rows made by a pass of their own: one more
 *              read of the image).
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

/* A block owns a strip of out_w output columns and a chunk of rows, and
 * walks down them. Each thread keeps, for kBoxColumns adjacent columns of
 * the strip's extended span (its out_w + mask_width - 1 columns, mapped
 * through the border once), the column sums over the mask's rows in
 * registers: a row down, it adds the entering row and subtracts the
 * leaving one. The block then scans those sums across the span (each
 * thread its columns, shuffles across a warp, the warps' totals through
 * shared memory) into prefix sums in shared memory, a column's channels
 * side by side; the threads then take the row's outputs in turn, each the
 * difference of two prefixes a mask width apart. Sums are exact in 32-bit
 * unsigned integers (4095 x 4095 x 255 < 2^32; the prefixes may wrap,
 * their differences do not), finished as the reference finishes
 * (box_round, else box_finish in double). */
constexpr int kBoxColumns = 4;  /* extended columns a thread (the code assumes 4) */
constexpr int kBoxSpanMax = 4096;  /* extended columns a block at most: 1024 threads */
constexpr int kBoxPad = 4;  /* prefix[kBoxPad + i]: through column i; prefix[kBoxPad - 1] = 0 */

/* A column's F channel values as one shared-memory word: F 3 takes four. */
template <int F> struct box_vec { using type = uint4; };
template <> struct box_vec<2> { using type = uint2; };
template <> struct box_vec<1> { using type = unsigned; };

template <int F>
__device__ __forceinline__ unsigned vec_get(const typename box_vec<F>::type &v, int c)
{
    if constexpr (F == 1)
        return v;
    else
        return reinterpret_cast<const unsigned *>(&v)[c];
}

/* The inclusive sum of v over the warp's lanes: shuffles whose predicate
 * says the lane d below exists, so the add needs no select. */
__device__ __forceinline__ unsigned warp_inclusive_sum(unsigned v)
{
#pragma unroll
    for (int d = 1; d < 32; d *= 2)
        asm("{\n\t.reg .u32 r;\n\t.reg .pred p;\n\t"
            "shfl.sync.up.b32 r|p, %0, %1, 0, 0xffffffff;\n\t"
            "@p add.u32 %0, %0, r;\n\t}"
            : "+r"(v) : "r"(d));
    return v;
}

/* A pixel's C bytes as one word (byte c = channel c), 0 outside the image
 * in constant mode. */
template <int C>
__device__ __forceinline__ unsigned box_load(const conv2d_large_launch &p, int sy, int sx)
{
    if (sy < 0 || sx < 0)
        return 0u;
    const unsigned char *q = p.src + ((size_t)sy * p.width + sx) * C;
    if constexpr (C == 4)
        return __ldg(reinterpret_cast<const unsigned *>(q));
    unsigned w = 0u;
#pragma unroll
    for (int c = 0; c < C; c++)
        w |= (unsigned)__ldg(q + c) << (8 * c);
    return w;
}

/* sum / S rounded half to even, in integers (S = p.box_divisor, S / 2
 * added, then a multiply-shift division exact for every sum the mask can
 * give; conv2d_large_launch_of() chooses it); a tie, possible for an even
 * S, goes back to the even quotient. The same byte as the reference's
 * double division and rint: a quotient that is not a half lies at least
 * 1 / (2S) from one, far past a double's error. */
__device__ __forceinline__ unsigned box_round(const conv2d_large_launch &p, unsigned sum)
{
    const unsigned n = sum + p.box_divisor / 2u;
    unsigned q = __umulhi(n, p.box_magic) >> p.box_shift;
    if (!(p.box_divisor & 1u) && n == q * p.box_divisor && (q & 1u))
        q--;
    return min(q, 255u);
}

/* box_round for an odd S, which has no ties. */
__device__ __forceinline__ unsigned box_round_odd(const conv2d_large_launch &p, unsigned sum)
{
    return min(__umulhi(sum + p.box_divisor / 2u, p.box_magic) >> p.box_shift, 255u);
}

/* The finished byte of a box sum at 'at' (the reference's finish). */
__device__ __forceinline__ unsigned char box_finish(const conv2d_large_launch &p, unsigned sum, size_t at)
{
    if (p.box_divisor)
        return (unsigned char)box_round(p, sum);
    const double v = (double)sum * p.box_weight / p.scale_exact + p.offset_exact;
    double out = v;
    if (p.combine == GF_COMBINE_UNSHARP) {
        const double source = p.src[at], d = source - v;
        out = fabs(d) >= p.threshold ? source + p.amount * d : source;
    } else if (p.combine == GF_COMBINE_MAGNITUDE) {
        out = fabs(v);
    }
    out = rint(out);
    return (unsigned char)(out > 0.0 ? (out < 255.0 ? out : 255.0) : 0.0);
}

/* The kBoxColumns (4) pixels from column 'first' on in one row, from
 * aligned words where 'whole' (all inside the image; C 1, 3 or 4). */
template <int C>
__device__ __forceinline__ void box_load_row(const conv2d_large_launch &p, int sy, int first, bool whole,
                                             unsigned (&w)[kBoxColumns])
{
    if (C != 2 && whole && sy >= 0) {
        const unsigned *q = reinterpret_cast<const unsigned *>(p.src + ((size_t)sy * p.width + first) * C);
        if constexpr (C == 4) {
            const uint4 v = __ldg(reinterpret_cast<const uint4 *>(q));
            w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
        } else if constexpr (C == 3) {
            const unsigned a = __ldg(q), b = __ldg(q + 1), c = __ldg(q + 2);
            w[0] = a & 0xffffffu;
            w[1] = __byte_perm(a, b, 0x0543) & 0xffffffu;
            w[2] = __byte_perm(b, c, 0x0432) & 0xffffffu;
            w[3] = c >> 8;
        } else {
            const unsigned v = __ldg(q);
#pragma unroll
            for (int j = 0; j < kBoxColumns; j++)
                w[j] = v >> (8 * j) & 255u;
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < kBoxColumns; j++)
        w[j] = box_load<C>(p, sy, gf_border_index(first + j, p.width, (gf_border)p.border));
}

/* The block's outputs of row y, spread over its threads: output ox's
 * window is the prefix through extended column lead + ox + mask_width - 1
 * less the one through lead + ox - 1. Odd: the finish is box_round_odd. */
template <int C, int F, bool Odd>
__device__ __forceinline__ void box_row_out(const conv2d_large_launch &p, const typename box_vec<F>::type *prefix,
                                            int lead, int x0, int outputs, int y)
{
    const size_t row_at = (size_t)y * p.width + x0;
    const typename box_vec<F>::type *last = prefix + kBoxPad + lead + p.mask_width - 1;
    const typename box_vec<F>::type *before = prefix + kBoxPad - 1 + lead;
    for (int ox = threadIdx.x; ox < outputs; ox += blockDim.x) {
        const typename box_vec<F>::type through = last[ox], below = before[ox];
        const size_t at = (row_at + ox) * C;
        unsigned word = 0u;
        if constexpr (F < C)
            word = box_load<C>(p, y, x0 + ox);
#pragma unroll
        for (int c = 0; c < F; c++) {
            const unsigned sum = vec_get<F>(through, c) - vec_get<F>(below, c);
            const unsigned v = Odd ? box_round_odd(p, sum) : box_finish(p, sum, at + c);
            word = (word & ~(255u << (8 * c))) | v << (8 * c);
        }
        if constexpr (C == 4) {
            *reinterpret_cast<unsigned *>(p.dst + at) = word;
        } else {
#pragma unroll
            for (int c = 0; c < C; c++)
                p.dst[at + c] = (unsigned char)(word >> (8 * c));
        }
    }
}

/* The mask's rows in bands: bands[b * width + x] = the sum of image column
 * x's F channels over the band_rows extended rows from b * band_rows on
 * (extended row j: image row j - mask_height / 2 through the border). */
template <int C, int F>
__global__ void box_band_sums(conv2d_large_launch p, int band_rows, typename box_vec<F>::type *bands)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y;
    if (x >= p.width)
        return;
    const gf_border border = (gf_border)p.border;
    unsigned sums[F] = {};
    const int first = b * band_rows - p.mask_height / 2;
#pragma unroll 4
    for (int j = 0; j < band_rows; j++) {
        const unsigned w = box_load<C>(p, gf_border_index(first + j, p.height, border), x);
#pragma unroll
        for (int c = 0; c < F; c++)
            sums[c] += w >> (8 * c) & 255u;
    }
    typename box_vec<F>::type v;
    if constexpr (F == 1)
        v = sums[0];
    else if constexpr (F == 2)
        v = make_uint2(sums[0], sums[1]);
    else
        v = make_uint4(sums[0], sums[1], sums[2], F > 3 ? sums[F - 1] : 0u);
    bands[(size_t)b * p.width + x] = v;
}

/* Where a block's column sums start from (box_fused): with 'bands', the
 * bands' sums (box_band_sums) over the mask's first 'whole' bands of rows,
 * then the rest but the last row one by one; without, every row but the
 * last one by one. */
template <int F>
struct box_start {
    const typename box_vec<F>::type *bands;
    int whole;
};

/* C channels, the first F filtered; span is blockDim.x x kBoxColumns. The
 * span starts 'lead' columns before the strip's halo, at a multiple of
 * 'align' (4 where whole loads are possible, else 1). The entering and
 * leaving rows of the next output row load while the block scans the
 * current one. With bands, a chunk is one band of rows (chunk_h). */
template <int C, int F>
__global__ void __launch_bounds__(kBoxSpanMax / kBoxColumns)
    box_fused(conv2d_large_launch p, int span, int out_w, int chunk_h, int align, box_start<F> start)
{
    using vec = typename box_vec<F>::type;
    extern __shared__ uint4 prefix_words[];
    vec *prefix = reinterpret_cast<vec *>(prefix_words);  /* kBoxPad + span columns */
    __shared__ uint4 warp_totals[32];  /* channel c in component c */
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int ax = p.mask_width / 2, ay = p.mask_height / 2;
    const int x0 = blockIdx.x * out_w, y0 = blockIdx.y * chunk_h, y1 = min(p.height, y0 + chunk_h);
    const int lead = ((x0 - ax) % align + align) % align, first = x0 - ax - lead + t * kBoxColumns;
    const int outputs = min(out_w, p.width - x0);
    const bool whole = align == kBoxColumns && first >= 0 && first + kBoxColumns <= p.width;
    const bool odd = p.box_divisor & 1u;
    const gf_border border = (gf_border)p.border;
    if (t == 0)
        prefix[kBoxPad - 1] = vec{};
    unsigned sums[kBoxColumns][F] = {};
    unsigned in[kBoxColumns], out[kBoxColumns];  /* the next row's entering and leaving pixels */
    auto load_row = [&](int row, unsigned (&w)[kBoxColumns]) {
        box_load_row<C>(p, gf_border_index(row, p.height, border), first, whole, w);
    };
    int row = y0 - ay;  /* the next row to sum */
    if (start.bands) {
        const int band = y0 / chunk_h;
#pragma unroll
        for (int j = 0; j < kBoxColumns; j++) {
            const int sx = gf_border_index(first + j, p.width, border);
            for (int b = band; b < band + start.whole && sx >= 0; b++) {
                const vec v = start.bands[(size_t)b * p.width + sx];
#pragma unroll
                for (int c = 0; c < F; c++)
                    sums[j][c] += vec_get<F>(v, c);
            }
        }
        row += start.whole * chunk_h;
    }
    for (; row < y0 - ay + p.mask_height - 1; row++) {
        load_row(row, in);
#pragma unroll
        for (int j = 0; j < kBoxColumns; j++)
#pragma unroll
            for (int c = 0; c < F; c++)
                sums[j][c] += in[j] >> (8 * c) & 255u;
    }
    load_row(y0 - ay + p.mask_height - 1, in);
#pragma unroll
    for (int j = 0; j < kBoxColumns; j++)
        out[j] = 0u;
    for (int y = y0; y < y1; y++) {
#pragma unroll
        for (int j = 0; j < kBoxColumns; j++)
#pragma unroll
            for (int c = 0; c < F; c++)
                sums[j][c] += (in[j] >> (8 * c) & 255u) - (out[j] >> (8 * c) & 255u);
        if (y + 1 < y1) {
            load_row(y + 1 - ay + p.mask_height - 1, in);
            load_row(y - ay, out);
        }
        /* the scan: the thread's columns, then across the warp, then the
         * totals of the warps before (a block is at most 32 warps) */
        unsigned below[F];
#pragma unroll
        for (int c = 0; c < F; c++) {
            unsigned acc = 0u;
#pragma unroll
            for (int j = 0; j < kBoxColumns; j++)
                acc += sums[j][c];
            const unsigned inclusive = warp_inclusive_sum(acc);
            below[c] = inclusive - acc;
            if (lane == 31)
                reinterpret_cast<unsigned *>(&warp_totals[warp])[c] = inclusive;
        }
        __syncthreads();
        for (int w = 0; w < warp; w++) {
            const uint4 total = warp_totals[w];
            below[0] += total.x;
            if constexpr (F > 1) below[1] += total.y;
            if constexpr (F > 2) below[2] += total.z;
            if constexpr (F > 3) below[3] += total.w;
        }
        unsigned run[kBoxColumns][F];
#pragma unroll
        for (int c = 0; c < F; c++) {
            unsigned acc = below[c];
#pragma unroll
            for (int j = 0; j < kBoxColumns; j++)
                run[j][c] = acc += sums[j][c];
        }
        if constexpr (F == 1) {  /* the thread's columns as one conflict-free word */
            reinterpret_cast<uint4 *>(prefix + kBoxPad)[t] = make_uint4(run[0][0], run[1][0], run[2][0], run[3][0]);
        } else {
#pragma unroll
            for (int j = 0; j < kBoxColumns; j++) {
                vec v;
                if constexpr (F == 2)
                    v = make_uint2(run[j][0], run[j][1]);
                else
                    v = make_uint4(run[j][0], run[j][1], run[j][2], F > 3 ? run[j][F - 1] : 0u);
                prefix[kBoxPad + t * kBoxColumns + j] = v;
            }
        }
        __syncthreads();
        if (odd)
            box_row_out<C, F, true>(p, prefix, lead, x0, outputs, y);
        else
            box_row_out<C, F, false>(p, prefix, lead, x0, outputs, y);
    }
}

/* The span (whole warps' columns up to kBoxSpanMax: 4 mask widths, at
 * least 512, at most the image's width and halo) and the outputs it
 * leaves after the halo and the alignment's lead. */
struct box_shape {
    int span, out_w, threads, chunk_h, align;
};

box_shape box_shape_for(const conv2d_large_launch *p, bool aligned_loads)
{
    const int halo = p->mask_width - 1;
    int span = 4 * halo;
    span = span < 512 ? 512 : (span > kBoxSpanMax ? kBoxSpanMax : span);
    const int whole = p->width + halo + kBoxColumns - 1;
    if (span > whole)
        span = whole;
    span = (span + 32 * kBoxColumns - 1) / (32 * kBoxColumns) * (32 * kBoxColumns);
    if (span > kBoxSpanMax)
        span = kBoxSpanMax;
    const int align = aligned_loads && span - halo > kBoxColumns ? kBoxColumns : 1;
    return {span, span - halo - (align - 1), span / kBoxColumns, 0, align};
}

/* The chunk height: one wave of blocks (blocks_per_sm from the occupancy
 * API), at least 16 rows. */
int box_chunk_for(const conv2d_large_launch *p, const box_shape &b, int sms, int blocks_per_sm)
{
    const long long strips = (p->width + b.out_w - 1) / b.out_w;
    const long long wave = (long long)sms * (blocks_per_sm > 0 ? blocks_per_sm : 1);
    const long long rows = (strips * p->height + wave - 1) / wave;
    return rows > 16 ? (int)rows : 16;
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

/* A box launch's kernels for C channels, the first F filtered. */
struct box_kernels {
    const void *fused, *bands;
};

template <int C, int F>
box_kernels box_kernels_of()
{
    return {(const void *)box_fused<C, F>, (const void *)box_band_sums<C, F>};
}

box_kernels box_kernels_for(int channels, int filtered)
{
    switch (channels * 8 + filtered) {
    case 1 * 8 + 1: return box_kernels_of<1, 1>();
    case 2 * 8 + 1: return box_kernels_of<2, 1>();
    case 2 * 8 + 2: return box_kernels_of<2, 2>();
    case 3 * 8 + 3: return box_kernels_of<3, 3>();
    case 4 * 8 + 3: return box_kernels_of<4, 3>();
    case 4 * 8 + 4: return box_kernels_of<4, 4>();
    default: return {nullptr, nullptr};
    }
}

/* Masks this tall or taller may start each chunk from band sums
 * (box_band_sums) rather than summing mask_height - 1 rows: a chunk is
 * then one band, and small chunks cost no more rows than tall ones. They
 * do where the rows summed would pass the chunk's own (launch_box): the
 * bands' pass reads the image once more, and shorter chunks cost more
 * blocks (H200, 8192x8192, box:255: RGBA 1.17 -> 0.91 ms, gray 0.86 ->
 * 0.59; box:63 2-11% slower with bands). */
constexpr int kBoxBandsFrom = 161;

/* The band's rows: 32 to 128, leaving the fewest rows of mask_height - 1
 * past whole bands for a share of the band (none where one divides it:
 * then a chunk's leaving rows are the entering rows of the chunk whole
 * bands above at the same step, which the blocks running beside each other
 * read at about the same time, so from L2). 0: no bands. */
int box_band_rows(const conv2d_large_launch *p)
{
    if (p->mask_height < kBoxBandsFrom)
        return 0;
    const int rows = p->mask_height - 1;
    int best = 32;
    for (int b = 33; b <= 128 && b <= rows; b++)
        if ((double)(rows % b) / b <= (double)(rows % best) / best)
            best = b;
    return best;
}

/* Bands box_band_sums writes: the last chunk's start plus the mask's whole bands. */
int box_band_count(const conv2d_large_launch *p, int band_rows)
{
    return (p->height + band_rows - 1) / band_rows - 1 + (p->mask_height - 1) / band_rows;
}

size_t box_vec_bytes(int channels_filtered)
{
    return channels_filtered == 1 ? 4 : (channels_filtered == 2 ? 8 : 16);
}

cudaError_t launch_box(const conv2d_large_launch *p, cudaStream_t stream)
{
    /* whole loads: a thread's four pixels are 4, 12 or 16 aligned bytes */
    const bool aligned_loads = p->channels != 2 && p->width % kBoxColumns == 0 &&
                               (uintptr_t)p->src % (p->channels == 4 ? 16 : 4) == 0;
    box_shape b = box_shape_for(p, aligned_loads);
    const box_kernels kernels = box_kernels_for(p->channels, p->channels_filtered);
    const void *kernel = kernels.fused;
    if (!kernel)
        return cudaErrorInvalidValue;
    int device = 0, sms = 0, blocks = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    const size_t shared = box_vec_bytes(p->channels_filtered) * (b.span + kBoxPad);
    if (err != cudaSuccess || (err = conv2d_allow_shared(kernel, shared)) != cudaSuccess ||
        (err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, b.threads, shared)) != cudaSuccess)
        return err;
    conv2d_large_launch params = *p;
    /* every box_start<F> has the same layout: a pointer, an int */
    box_start<4> start = {nullptr, 0};
    const int chunk_h = box_chunk_for(p, b, sms, blocks);
    const int band_rows = p->scratch && p->mask_height - 1 > chunk_h ? box_band_rows(p) : 0;
    if (band_rows) {
        start = {(const uint4 *)p->scratch, (p->mask_height - 1) / band_rows};
        void *band_args[] = {&params, (void *)&band_rows, &start.bands};
        const dim3 grid(blocks_for(p->width, 256), box_band_count(p, band_rows));
        if ((err = cudaLaunchKernel(kernels.bands, grid, dim3(256), band_args, 0, stream)) != cudaSuccess)
            return err;
        b.chunk_h = band_rows;
    } else {
        b.chunk_h = chunk_h;
    }
    void *args[] = {&params, &b.span, &b.out_w, &b.chunk_h, &b.align, &start};
    return cudaLaunchKernel(kernel, dim3(blocks_for(p->width, b.out_w), blocks_for(p->height, b.chunk_h)),
                            dim3(b.threads), args, shared, stream);
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

/* box_round()'s division for a whole scale S: M = ceil(2^k / S) under 2^32
 * with k >= 32, exact for every n <= the largest sum + S / 2 where the
 * excess M S - 2^k times n stays under 2^k (Granlund and Montgomery). Left
 * 0 (the double finish) where the scale is not whole or no k fits. */
static void box_division(double scale, unsigned long long largest_sum, conv2d_large_launch *p)
{
    if (!(scale >= 1.0 && scale <= 4294967295.0) || scale != floor(scale))
        return;
    const unsigned long long divisor = (unsigned long long)scale, largest = largest_sum + divisor / 2;
    if (largest > 0xffffffffull)
        return;
    for (int k = 32; k < 64; k++) {
        const unsigned __int128 power = (unsigned __int128)1 << k;
        const unsigned __int128 magic = (power + divisor - 1) / divisor;
        if (magic > 0xffffffffu)
            break;
        if ((magic * divisor - power) * largest < power) {
            p->box_divisor = (unsigned)divisor;
            p->box_magic = (unsigned)magic;
            p->box_shift = k - 32;
            return;
        }
    }
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
    if (mask->weights[0][0] == 1.0 && mask->offset[0] == 0.0 && mask->combine != GF_COMBINE_UNSHARP)
        box_division(mask->scale[0], (unsigned long long)mask->width * mask->height * 255u, p);
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
    if (method == CONV2D_LARGE_BOX) {
        const int band_rows = box_band_rows(p);
        return band_rows ? (size_t)box_band_count(p, band_rows) * p->width * box_vec_bytes(p->channels_filtered)
                         : 0;
    }
    if (method != CONV2D_LARGE_SEPARABLE)
        return 0;
    return (size_t)p->width * p->height * p->channels * sizeof(float);
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
