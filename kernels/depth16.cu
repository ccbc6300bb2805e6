/* depth16.cu - the GPU operations on 16-bit images (src/cuda_depth16.c
 * drives them): convolution, histograms, look-up tables.
 *
 * Convolution keeps the reference's arithmetic (backend_cpu.c): integer
 * weights whose sums cannot pass 2^31 (65535 x sum |w|; the host checks)
 * are summed exactly in int, every other mask in double with each product
 * and sum rounded on its own (never fused), as the reference rounds them;
 * float sums would be off by one on a few percent of values at 16 bits.
 * One integer matrix with an integer scale and offset is finished exactly
 * in integers (in float through a magic constant for sums under 2^21, else
 * a multiply-shift division); every other finish (scale, offset, combine,
 * unsharp, round half to even, clamp to 0..65535) is the reference's in
 * double.
 *   stream     3x3 integer masks whose sums and finish are exact in float
 *              (most 3x3 built-ins), rows of whole words: a warp walks
 *              down rows like a copy, each sample converted once.
 *   direct     any mask: 3x3 and 5x5 with four adjacent outputs a thread
 *              (each input loaded once for the four, the weights in
 *              registers), other sizes one output a thread; each tap one
 *              vector load through L1; the border's mapping is compiled
 *              only into the blocks that reach it. Bound by the integer
 *              ALU pipe at 3x3 (bench/RESULTS.md).
 *   separable  one matrix, column x row: a row pass into planar double
 *              scratch, then a column pass; width + height taps a value.
 *
 * Histograms count 65536 bins in global memory with warp-aggregated atomics
 * (lanes holding the same value add once), since 65536 counters do not fit
 * a block's shared memory; the host builds the tables from them (tone.h)
 * and apply maps each sample through one. */
#include <math.h>
#include <stdint.h>

#include "depth16.h"

extern "C" {
#include "../src/border.h"
#include "../src/mask.h"
#include "../src/tone.h"
}

namespace {

constexpr int kBlockX = 32, kBlockY = 8;
constexpr int kRun = 4;  /* direct, 3x3 and 5x5: adjacent outputs a thread */
constexpr int kBins = 65536;

template <int C>
__device__ inline void load_pixel(const uint16_t *src, size_t pixel, unsigned (&v)[C])
{
    if constexpr (C == 4) {
        const ushort4 q = __ldg(reinterpret_cast<const ushort4 *>(src) + pixel);
        v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
    } else if constexpr (C == 2) {
        const ushort2 q = __ldg(reinterpret_cast<const ushort2 *>(src) + pixel);
        v[0] = q.x; v[1] = q.y;
    } else {
#pragma unroll
        for (int c = 0; c < C; c++)
            v[c] = __ldg(src + pixel * C + c);
    }
}

template <int C>
__device__ inline void store_pixel(uint16_t *dst, size_t pixel, const unsigned (&v)[C])
{
    if constexpr (C == 4)
        reinterpret_cast<ushort4 *>(dst)[pixel] =
            make_ushort4((unsigned short)v[0], (unsigned short)v[1], (unsigned short)v[2],
                         (unsigned short)v[3]);
    else if constexpr (C == 2)
        reinterpret_cast<ushort2 *>(dst)[pixel] = make_ushort2((unsigned short)v[0], (unsigned short)v[1]);
    else
#pragma unroll
        for (int c = 0; c < C; c++)
            dst[pixel * C + c] = (unsigned short)v[c];
}

/* Products and sums in double are rounded one by one (never fused), as
 * the reference computes them, so the direct kernel's double sums are the
 * reference's bit for bit. */
__device__ __forceinline__ double mul_add(double acc, double a, double b)
{
    return __dadd_rn(acc, __dmul_rn(a, b));
}

__device__ __forceinline__ int mul_add(int acc, int a, int b)
{
    return acc + a * b;
}

/* The reference's finish of one value from its K matrices' sums. */
template <int K>
__device__ __forceinline__ unsigned finish_value(const depth16_conv &p, const double (&sums)[K],
                                                 double source)
{
    double v = 0.0;
#pragma unroll
    for (int k = 0; k < K; k++) {
        const double r = __dadd_rn(__ddiv_rn(sums[k], p.scale[k]), p.offset[k]);
        switch (p.combine) {
        case GF_COMBINE_MAGNITUDE: v = mul_add(v, r, r); break;
        case GF_COMBINE_MAX: v = k == 0 ? r : fmax(v, r); break;
        case GF_COMBINE_MIN: v = k == 0 ? r : fmin(v, r); break;
        default: v = __dadd_rn(v, r); break;
        }
    }
    if (p.combine == GF_COMBINE_UNSHARP) {
        const double d = __dsub_rn(source, v);
        v = fabs(d) >= p.threshold ? mul_add(source, p.amount, d) : source;
    } else if (p.combine == GF_COMBINE_MAGNITUDE) {
        v = sqrt(v);
    }
    v = rint(v);
    return (unsigned)(v > 0.0 ? (v < 65535.0 ? v : 65535.0) : 0.0);  /* NaN: 0 */
}

/* rint(sum / scale + offset) in integers (a tie goes to the even result),
 * clamped: what the reference's double finish gives for one matrix of
 * integer weights with an integer scale and offset (|sum| < 2^31, so the
 * double quotient never rounds onto a tie it is not). |sum| / scale is a multiply by the host's
 * int_magic and a shift (exact for dividends under 2^31), no division. */
__device__ __forceinline__ unsigned finish_integer(const depth16_conv &p, int sum)
{
    const unsigned d = (unsigned)p.int_scale, a = (unsigned)(sum < 0 ? -(long long)sum : sum);
    unsigned q = (unsigned)(((unsigned long long)a * p.int_magic) >> p.int_shift);
    unsigned r = a - q * d;
    long long n;  /* floor(sum / d), with r = sum - n d in 0..d-1 */
    if (sum >= 0) {
        n = q;
    } else {
        n = -(long long)q - (r != 0);
        r = r ? d - r : 0;
    }
    if (2 * r > d || (2 * r == d && ((n + p.int_offset) & 1)))  /* rint(sum / d + offset) */
        n++;
    const long long v = n + p.int_offset;
    return (unsigned)(v < 0 ? 0 : v > 65535 ? 65535 : v);
}

/* finish_integer for sums under 2^21 (p.small_sums: 65535 x sum |w| <
 * 2^21): the quotient in float (the int and the rounding through the
 * 1.5 x 2^23 magic, no conversion instruction) is within 1/(4 scale) of
 * the exact one, nearer than any quotient that is not a tie, so only a tie
 * (2 r = +-scale, from the exact remainder) needs the even choice. */
__device__ __forceinline__ unsigned finish_small(const depth16_conv &p, int sum)
{
    const float magic = 12582912.0f;  /* 1.5 x 2^23 */
    const float f = __int_as_float(0x4B400000 + sum) - magic;  /* exact: |sum| < 2^22 */
    const int n0 = __float_as_int(__fmaf_rn(f, p.float_reciprocal, magic)) - 0x4B400000;
    const int r2 = 2 * (sum - n0 * p.int_scale), odd = (n0 + p.int_offset) & 1;
    const int n = n0 + (r2 == p.int_scale ? odd : 0) - (r2 == -p.int_scale ? odd : 0);
    return (unsigned)min(max(n + p.int_offset, 0), 65535);
}

/* Whether a block whose threads take R adjacent outputs each reads no
 * coordinate outside the image. */
template <int R>
__device__ inline bool block_interior(const depth16_conv &p, int mask_width, int mask_height)
{
    const int x0 = blockIdx.x * blockDim.x * R, y0 = blockIdx.y * blockDim.y;
    const int ax = mask_width / 2, ay = mask_height / 2;
    return x0 - ax >= 0 && y0 - ay >= 0 &&
           x0 + (int)blockDim.x * R - 1 - ax + mask_width - 1 < p.width &&
           y0 + (int)blockDim.y - 1 - ay + mask_height - 1 < p.height;
}

/* The sums of R adjacent outputs from (x, y): INTERIOR where no tap
 * leaves the image (no border mapping compiled in), else every coordinate
 * through the border. held: the weights where the size is fixed. */
template <bool INTERIOR, int C, typename Acc, int K, int MW, int MH, int R, int HELD>
__device__ __forceinline__ void accumulate(const depth16_conv &p, const Acc *weights,
                                           const Acc (&held)[HELD], int x, int y,
                                           Acc (&sums)[R][K][C])
{
    const int mw = MW ? MW : p.mask_width, mh = MH ? MH : p.mask_height;
    const int ax = mw / 2, ay = mh / 2, taps = mw * mh;
    const gf_border border = (gf_border)p.border;
#pragma unroll
    for (int my = 0; my < mh; my++) {
        const int sy = INTERIOR ? y + my - ay : gf_border_index(y + my - ay, p.height, border);
        if (!INTERIOR && sy < 0)
            continue;
        const size_t row = (size_t)sy * p.width;
#pragma unroll
        for (int j = 0; j < mw + R - 1; j++) {  /* input column x - ax + j */
            const int sx = INTERIOR ? x - ax + j : gf_border_index(x - ax + j, p.width, border);
            unsigned v[C];
            if (!INTERIOR && sx < 0) {
#pragma unroll
                for (int c = 0; c < C; c++)
                    v[c] = 0;
            } else {
                load_pixel<C>(p.src, row + sx, v);
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int mx = j - r;
                if (mx < 0 || mx >= mw)
                    continue;
#pragma unroll
                for (int k = 0; k < K; k++) {
                    Acc w;
                    if constexpr (MW && MH)
                        w = held[k * MW * MH + my * MW + mx];
                    else
                        w = __ldg(weights + k * taps + my * mw + mx);
#pragma unroll
                    for (int c = 0; c < C; c++)
                        sums[r][k][c] = mul_add(sums[r][k][c], w, (Acc)v[c]);
                }
            }
        }
    }
}

/* K matrices of MW x MH taps (0: the launch's size); a thread takes R
 * adjacent outputs of a row, each input value loaded once for the R. */
template <int C, typename Acc, int K, int MW, int MH, int R>
__global__ void conv_direct(depth16_conv p)
{
    const int mw = MW ? MW : p.mask_width, mh = MH ? MH : p.mask_height;
    const int x = (blockIdx.x * blockDim.x + threadIdx.x) * R, y = blockIdx.y * blockDim.y + threadIdx.y;
    const bool interior = block_interior<R>(p, mw, mh);
    if (x >= p.width || y >= p.height)
        return;
    const Acc *weights;
    if constexpr (sizeof(Acc) == sizeof(int))
        weights = p.int_weights;
    else
        weights = p.weights;
    /* fixed sizes: every weight in registers, loaded once */
    constexpr int kHeld = MW && MH ? K * MW * MH : 1;
    Acc held[kHeld];
#pragma unroll
    for (int i = 0; i < kHeld; i++)
        held[i] = MW && MH ? __ldg(weights + i) : 0;
    Acc sums[R][K][C];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int k = 0; k < K; k++)
#pragma unroll
            for (int c = 0; c < C; c++)
                sums[r][k][c] = 0;
    if (interior)
        accumulate<true, C, Acc, K, MW, MH, R, kHeld>(p, weights, held, x, y, sums);
    else
        accumulate<false, C, Acc, K, MW, MH, R, kHeld>(p, weights, held, x, y, sums);
    /* the source is read only for what passes through and for unsharp */
    const bool need_source = p.channels_filtered < C || p.combine == GF_COMBINE_UNSHARP;
    unsigned out[R][C];
#pragma unroll
    for (int r = 0; r < R; r++) {
        unsigned source[C] = {};
        if (need_source && x + r < p.width)
            load_pixel<C>(p.src, (size_t)y * p.width + x + r, source);
#pragma unroll
        for (int c = 0; c < C; c++) {
            if (c >= p.channels_filtered) {
                out[r][c] = source[c];
            } else if (sizeof(Acc) == sizeof(int) && K == 1 && p.small_sums) {
                out[r][c] = finish_small(p, (int)sums[r][0][c]);
            } else if (sizeof(Acc) == sizeof(int) && K == 1 && p.int_scale) {
                out[r][c] = finish_integer(p, (int)sums[r][0][c]);
            } else {
                double s[K];
#pragma unroll
                for (int k = 0; k < K; k++)
                    s[k] = (double)sums[r][k][c];
                out[r][c] = finish_value<K>(p, s, (double)source[c]);
            }
        }
    }
    const size_t at = (size_t)y * p.width + x;
    if constexpr (C == 4 && R % 2 == 0) {
        if (x + R <= p.width && (at & 1) == 0) {  /* two pixels a 16-byte store, aligned */
#pragma unroll
            for (int r = 0; r < R; r += 2)
                reinterpret_cast<uint4 *>(p.dst + (at + r) * 4)[0] =
                    make_uint4(out[r][0] | out[r][1] << 16, out[r][2] | out[r][3] << 16,
                               out[r + 1][0] | out[r + 1][1] << 16, out[r + 1][2] | out[r + 1][3] << 16);
            return;
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
        if (x + r < p.width)
            store_pixel<C>(p.dst, at + r, out[r]);
}

/* 3x3 of integer weights whose sums stay under 2^21 (small_sums) and
 * whose scale is odd or a power of two (float_finish): the sums in float,
 * exact (every partial sum an integer under 2^21 < 2^24), and the finish
 * one FMA: fmaf(sum, 1 / scale, 1.5 x 2^23 + offset) rounds sum / scale +
 * offset to the nearest integer, half to even, as the reference's rint
 * does (a power of two divides exactly; an odd scale has no ties, and the
 * reciprocal's error, under 1 / (8 scale), is below the 1 / (2 scale) that
 * separates any quotient from a half). The biased float's low 16 bits are
 * then the output, packed with one PRMT.
 *
 * Each thread owns 16 bytes of a row (8 samples; RGB 24 bytes, 4 pixels)
 * and walks kStream16Rows rows down its column, like a copy: one 16-byte
 * load and store a row (RGB three of 8 bytes), loaded kStream16Ahead rows
 * before use, the pixels left and right of its own from the lanes beside
 * it (the warp's edge lanes, and lanes at the image's right edge, load
 * theirs through the border). Each input row adds its three row sums to
 * the three outputs it touches, so each sample is converted once. Needs
 * rows of whole words and aligned buffers (streams() checks, on the
 * host). Rows a warp, rows ahead and three blocks an SM: the fastest of a
 * sweep (bench/RESULTS.md); RGB's 36 sums take two blocks an SM, not
 * spilling. */
constexpr int kStream16Rows = 8;
constexpr int kStream16Ahead = 2;
constexpr int kStream16Warps = 8;  /* a block: this many strips of one warp's columns */

/* the 16-bit half of w (0: low, 1: high) as a float, exact: 2^23 + v - 2^23 */
__device__ __forceinline__ float half_to_float(unsigned w, int high)
{
    return __uint_as_float(__byte_perm(w, 0x4B00u, high ? 0x5432u : 0x5410u)) - 8388608.0f;
}

/* One input row around a thread's samples as loaded: its own words, and
 * the pixels left and right of them where this lane loads them itself
 * (channel c in half c & 1 of word c >> 1). */
template <int C>
struct row16 {
    static constexpr int kSamples = C == 3 ? 12 : 8, kWords = kSamples / 2, kPixels = kSamples / C;
    static constexpr int kPixelWords = (C + 1) / 2;
    unsigned own[kWords];
    unsigned left[kPixelWords], right[kPixelWords];
};

template <int C>
__device__ __forceinline__ void load_neighbour(const uint16_t *row, int x, unsigned (&w)[(C + 1) / 2])
{
    const bool inside = row && x >= 0;
    if constexpr (C == 4) {
        const uint2 q = inside ? __ldg(reinterpret_cast<const uint2 *>(row) + x) : make_uint2(0u, 0u);
        w[0] = q.x, w[1] = q.y;
    } else if constexpr (C == 3) {
        w[0] = inside ? (unsigned)__ldg(row + x * 3) | (unsigned)__ldg(row + x * 3 + 1) << 16 : 0u;
        w[1] = inside ? (unsigned)__ldg(row + x * 3 + 2) : 0u;
    } else if constexpr (C == 2) {
        w[0] = inside ? __ldg(reinterpret_cast<const unsigned *>(row) + x) : 0u;
    } else {
        w[0] = inside ? (unsigned)__ldg(row + x) : 0u;
    }
}

template <int C>
__device__ __forceinline__ row16<C> load_row16(const uint16_t *row, int x, bool active, int left_x,
                                               int right_x, bool load_left, bool load_right)
{
    row16<C> r;
    const bool inside = row && active;
    if constexpr (C == 3) {
        const uint2 *q = reinterpret_cast<const uint2 *>(row + (size_t)x * 3);
#pragma unroll
        for (int i = 0; i < 3; i++) {
            const uint2 v = inside ? __ldg(q + i) : make_uint2(0u, 0u);
            r.own[2 * i] = v.x, r.own[2 * i + 1] = v.y;
        }
    } else {
        const uint4 v = inside ? __ldg(reinterpret_cast<const uint4 *>(row + (size_t)x * C))
                               : make_uint4(0u, 0u, 0u, 0u);
        r.own[0] = v.x, r.own[1] = v.y, r.own[2] = v.z, r.own[3] = v.w;
    }
#pragma unroll
    for (int i = 0; i < row16<C>::kPixelWords; i++)
        r.left[i] = r.right[i] = 0u;
    if (load_left)
        load_neighbour<C>(row, left_x, r.left);
    if (load_right)
        load_neighbour<C>(row, right_x, r.right);
    return r;
}

/* The row's pixels (left, own, right) as floats, v[px][c]; the neighbours
 * from the lanes beside where this lane did not load them. */
template <int C>
__device__ __forceinline__ void row16_values(const row16<C> &r, bool load_left, bool load_right,
                                             float (&v)[row16<C>::kPixels + 2][C])
{
    constexpr int P = row16<C>::kPixels, W = row16<C>::kWords;
    unsigned left[row16<C>::kPixelWords], right[row16<C>::kPixelWords];
    if constexpr (C == 4) {
        left[0] = __shfl_up_sync(0xFFFFFFFFu, r.own[2], 1);
        left[1] = __shfl_up_sync(0xFFFFFFFFu, r.own[3], 1);
        right[0] = __shfl_down_sync(0xFFFFFFFFu, r.own[0], 1);
        right[1] = __shfl_down_sync(0xFFFFFFFFu, r.own[1], 1);
    } else if constexpr (C == 3) {  /* samples 9, 10, 11 of the lane before */
        const unsigned a = __shfl_up_sync(0xFFFFFFFFu, r.own[W - 2], 1);
        const unsigned b = __shfl_up_sync(0xFFFFFFFFu, r.own[W - 1], 1);
        left[0] = __byte_perm(a, b, 0x5432);
        left[1] = b >> 16;
        right[0] = __shfl_down_sync(0xFFFFFFFFu, r.own[0], 1);
        right[1] = __shfl_down_sync(0xFFFFFFFFu, r.own[1], 1);
    } else if constexpr (C == 2) {
        left[0] = __shfl_up_sync(0xFFFFFFFFu, r.own[W - 1], 1);
        right[0] = __shfl_down_sync(0xFFFFFFFFu, r.own[0], 1);
    } else {
        left[0] = __shfl_up_sync(0xFFFFFFFFu, r.own[W - 1], 1) >> 16;
        right[0] = __shfl_down_sync(0xFFFFFFFFu, r.own[0], 1);
    }
#pragma unroll
    for (int i = 0; i < row16<C>::kPixelWords; i++) {
        if (load_left)
            left[i] = r.left[i];
        if (load_right)
            right[i] = r.right[i];
    }
#pragma unroll
    for (int c = 0; c < C; c++) {
        v[0][c] = half_to_float(left[c >> 1], c & 1);
        v[P + 1][c] = half_to_float(right[c >> 1], c & 1);
#pragma unroll
        for (int px = 0; px < P; px++)
            v[px + 1][c] = half_to_float(r.own[(px * C + c) >> 1], (px * C + c) & 1);
    }
}

/* the finished sample's bits: its low 16 bits are the output (see above) */
__device__ __forceinline__ unsigned finish_float(float sum, float reciprocal, float biased_offset)
{
    const float lo = 12582912.0f, hi = 12582912.0f + 65535.0f;
    return __float_as_uint(fminf(fmaxf(__fmaf_rn(sum, reciprocal, biased_offset), lo), hi));
}

template <int C>
__global__ void __launch_bounds__(32 * kStream16Warps, C == 3 ? 2 : 3)
conv_stream16(depth16_conv p)
{
    constexpr int P = row16<C>::kPixels, S = row16<C>::kSamples, W = row16<C>::kWords;
    const int lane = threadIdx.x, x = (blockIdx.x * 32 + lane) * P;
    const int y0 = (blockIdx.y * kStream16Warps + threadIdx.y) * kStream16Rows;
    if (y0 >= p.height)
        return;  /* the whole warp */
    const gf_border border = (gf_border)p.border;
    const bool active = x < p.width;
    const bool load_left = lane == 0, load_right = lane == 31 || x + P >= p.width;
    const int left_x = gf_border_index(x - 1, p.width, border);
    const int right_x = gf_border_index(x + P, p.width, border);
    /* rows read: y0 - 1 .. y0 + kStream16Rows; only -1 and height (the rows
     * beside the outputs) go through the border, rows past height are unused */
    const int above = gf_border_index(-1, p.height, border), below = gf_border_index(p.height, p.height, border);
    auto row_at = [&](int i) -> const uint16_t * {
        const int y = y0 - 1 + i, sy = y < 0 ? above : (y < p.height ? y : below);
        return sy < 0 || y > p.height ? nullptr : p.src + (size_t)sy * p.width * C;
    };
    float w[9];
#pragma unroll
    for (int i = 0; i < 9; i++)
        w[i] = (float)__ldg(p.int_weights + i);
    const float reciprocal = p.float_reciprocal, biased_offset = 12582912.0f + (float)p.int_offset;
    float acc[3][P][C] = {};  /* outputs of rows y - 1, y, y + 1 while row y is read */
    unsigned previous[W] = {};  /* row y - 1 as loaded: what passes through */
    row16<C> ahead[kStream16Ahead + 1];
#pragma unroll
    for (int i = 0; i < kStream16Ahead; i++)
        ahead[i] = load_row16<C>(row_at(i), x, active, left_x, right_x, load_left, load_right);
#pragma unroll
    for (int i = 0; i < kStream16Rows + 2; i++) {
        const int y = y0 - 1 + i;
        if (i + kStream16Ahead < kStream16Rows + 2)
            ahead[(i + kStream16Ahead) % (kStream16Ahead + 1)] =
                load_row16<C>(row_at(i + kStream16Ahead), x, active, left_x, right_x, load_left, load_right);
        const row16<C> &r = ahead[i % (kStream16Ahead + 1)];
        float v[P + 2][C];
        row16_values<C>(r, load_left, load_right, v);
        /* rows y+1, y, y-1 take mask rows 0, 1, 2 */
#pragma unroll
        for (int my = 0; my < 3; my++)
#pragma unroll
            for (int o = 0; o < P; o++)
#pragma unroll
                for (int c = 0; c < C; c++) {
                    float &a = acc[2 - my][o][c];
                    a = __fmaf_rn(w[my * 3 + 2], v[o + 2][c],
                        __fmaf_rn(w[my * 3 + 1], v[o + 1][c],
                        __fmaf_rn(w[my * 3], v[o][c], my == 0 ? 0.0f : a)));
                }
        /* row y - 1 is complete */
        if (i >= 2 && y - 1 < p.height && active) {
            unsigned f[S], out[W];
#pragma unroll
            for (int k = 0; k < S; k++)
                f[k] = k % C < p.channels_filtered
                           ? finish_float(acc[0][k / C][k % C], reciprocal, biased_offset)
                           : previous[k >> 1] >> (16 * (k & 1));
#pragma unroll
            for (int k = 0; k < W; k++)
                out[k] = __byte_perm(f[2 * k], f[2 * k + 1], 0x5410);
            uint16_t *at = p.dst + ((size_t)(y - 1) * p.width + x) * C;
            if constexpr (C == 3) {
#pragma unroll
                for (int k = 0; k < 3; k++)
                    reinterpret_cast<uint2 *>(at)[k] = make_uint2(out[2 * k], out[2 * k + 1]);
            } else {
                reinterpret_cast<uint4 *>(at)[0] = make_uint4(out[0], out[1], out[2], out[3]);
            }
        }
#pragma unroll
        for (int o = 0; o < P; o++)
#pragma unroll
            for (int c = 0; c < C; c++) {
                acc[0][o][c] = acc[1][o][c];
                acc[1][o][c] = acc[2][o][c];
            }
#pragma unroll
        for (int k = 0; k < W; k++)
            previous[k] = r.own[k];
    }
}

__device__ inline size_t plane_at(const depth16_conv &p, int c, int x, int y)
{
    return ((size_t)c * p.height + y) * p.width + x;
}

template <int C>
__global__ void conv_rows(depth16_conv p)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= p.width || y >= p.height)
        return;
    const gf_border border = (gf_border)p.border;
    double sums[C] = {};
    const int x0 = x - p.mask_width / 2;
    const bool inside = x0 >= 0 && x0 + p.mask_width <= p.width;
    for (int mx = 0; mx < p.mask_width; mx++) {
        const int sx = inside ? x0 + mx : gf_border_index(x0 + mx, p.width, border);
        if (sx < 0)
            continue;
        unsigned v[C];
        load_pixel<C>(p.src, (size_t)y * p.width + sx, v);
        const double w = __ldg(p.row + mx);
#pragma unroll
        for (int c = 0; c < C; c++)
            sums[c] = mul_add(sums[c], w, (double)v[c]);
    }
#pragma unroll
    for (int c = 0; c < C; c++)
        if (c < p.channels_filtered)
            p.scratch[plane_at(p, c, x, y)] = sums[c];
}

template <int C>
__global__ void conv_columns(depth16_conv p)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= p.width || y >= p.height)
        return;
    const gf_border border = (gf_border)p.border;
    const int y0 = y - p.mask_height / 2;
    const bool inside = y0 >= 0 && y0 + p.mask_height <= p.height;
    double sums[C] = {};
    for (int my = 0; my < p.mask_height; my++) {
        const int sy = inside ? y0 + my : gf_border_index(y0 + my, p.height, border);
        if (sy < 0)
            continue;
        const double w = __ldg(p.column + my);
#pragma unroll
        for (int c = 0; c < C; c++)
            if (c < p.channels_filtered)
                sums[c] = mul_add(sums[c], w, p.scratch[plane_at(p, c, x, sy)]);
    }
    const size_t at = (size_t)y * p.width + x;
    unsigned source[C], out[C];
    load_pixel<C>(p.src, at, source);
#pragma unroll
    for (int c = 0; c < C; c++)
    {
        const double s[1] = {sums[c]};
        out[c] = c < p.channels_filtered ? finish_value<1>(p, s, (double)source[c]) : source[c];
    }
    store_pixel<C>(p.dst, at, out);
}

dim3 grid_for(const depth16_conv &p, int run = 1)
{
    return dim3((unsigned)((p.width + kBlockX * run - 1) / (kBlockX * run)),
                (unsigned)((p.height + kBlockY - 1) / kBlockY));
}

template <int C, typename Acc, int K>
void launch_sized(const depth16_conv &p, cudaStream_t stream)
{
    const dim3 block(kBlockX, kBlockY);
    if (p.mask_width == 3 && p.mask_height == 3)
        conv_direct<C, Acc, K, 3, 3, kRun><<<grid_for(p, kRun), block, 0, stream>>>(p);
    else if (p.mask_width == 5 && p.mask_height == 5)
        conv_direct<C, Acc, K, 5, 5, kRun><<<grid_for(p, kRun), block, 0, stream>>>(p);
    else
        conv_direct<C, Acc, K, 0, 0, 1><<<grid_for(p, 1), block, 0, stream>>>(p);
}

template <int C, typename Acc>
void launch_matrices(const depth16_conv &p, cudaStream_t stream)
{
    switch (p.mask_count) {
    case 1: launch_sized<C, Acc, 1>(p, stream); break;
    case 2: launch_sized<C, Acc, 2>(p, stream); break;
    case 3: launch_sized<C, Acc, 3>(p, stream); break;
    default: launch_sized<C, Acc, 4>(p, stream); break;
    }
}

/* Whether the streaming 3x3 kernel takes the launch: its mask, and rows
 * of whole 16-byte words (RGB: 8-byte words, 4 pixels) on aligned buffers. */
bool streams(const depth16_conv &p)
{
    const bool rows_fit = p.channels == 3 ? p.width % 4 == 0 : p.width * p.channels % 8 == 0;
    const uintptr_t align = p.channels == 3 ? 8 : 16;
    return p.int_weights && p.float_finish && p.mask_count == 1 && p.mask_width == 3 &&
           p.mask_height == 3 && rows_fit && ((uintptr_t)p.src | (uintptr_t)p.dst) % align == 0;
}

template <int C>
void launch_direct(const depth16_conv &p, cudaStream_t stream)
{
    if (streams(p)) {
        constexpr int kColumns = 32 * row16<C>::kPixels, kRows = kStream16Rows * kStream16Warps;
        const dim3 grid((unsigned)((p.width + kColumns - 1) / kColumns), (unsigned)((p.height + kRows - 1) / kRows));
        conv_stream16<C><<<grid, dim3(32, kStream16Warps), 0, stream>>>(p);
    } else if (p.int_weights)
        launch_matrices<C, int>(p, stream);
    else
        launch_matrices<C, double>(p, stream);
}

template <int C>
void launch_separable(const depth16_conv &p, cudaStream_t stream)
{
    const dim3 block(kBlockX, kBlockY);
    conv_rows<C><<<grid_for(p), block, 0, stream>>>(p);
    conv_columns<C><<<grid_for(p), block, 0, stream>>>(p);
}

/* One count for every lane of the warp holding the same bin, added once. */
__device__ inline void count_bin(unsigned *counts, unsigned bin)
{
    const unsigned same = __match_any_sync(__activemask(), bin);
    if ((threadIdx.x & 31) == (unsigned)(__ffs(same) - 1))
        atomicAdd(counts + bin, (unsigned)__popc(same));
}

__global__ void histogram16(const uint16_t *px, size_t pixels, int channels, int luma,
                            unsigned *counts)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < pixels; i += stride) {
        const uint16_t *p = px + i * channels;
        if (luma) {
            count_bin(counts, (unsigned)gf_luma(p[0], p[1], p[2]));
            continue;
        }
        for (int c = 0; c < channels; c++)
            count_bin(counts + (size_t)c * kBins, p[c]);
    }
}

__global__ void apply_lut16(uint16_t *px, size_t pixels, int channels, int colour,
                            const uint16_t *luts, int mode)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < pixels; i += stride) {
        uint16_t *p = px + i * channels;
        if (mode == DEPTH16_LUT_LUMA) {
            unsigned short rgb[3] = {p[0], p[1], p[2]};
            gf_map_luma16(rgb, luts);
            p[0] = rgb[0];
            p[1] = rgb[1];
            p[2] = rgb[2];
            continue;
        }
        for (int c = 0; c < colour; c++)
            p[c] = __ldg(luts + (mode == DEPTH16_LUT_PER_CHANNEL ? (size_t)c * kBins : 0) + p[c]);
    }
}

unsigned stride_blocks(size_t pixels)
{
    const size_t blocks = (pixels + 255) / 256;
    return (unsigned)(blocks < 8192 ? (blocks ? blocks : 1) : 8192);
}

}  // namespace

extern "C" cudaError_t depth16_conv_direct(const depth16_conv *p, cudaStream_t stream)
{
    switch (p->channels) {
    case 1: launch_direct<1>(*p, stream); break;
    case 2: launch_direct<2>(*p, stream); break;
    case 3: launch_direct<3>(*p, stream); break;
    default: launch_direct<4>(*p, stream); break;
    }
    return cudaGetLastError();
}

extern "C" cudaError_t depth16_conv_separable(const depth16_conv *p, cudaStream_t stream)
{
    switch (p->channels) {
    case 1: launch_separable<1>(*p, stream); break;
    case 2: launch_separable<2>(*p, stream); break;
    case 3: launch_separable<3>(*p, stream); break;
    default: launch_separable<4>(*p, stream); break;
    }
    return cudaGetLastError();
}

extern "C" void depth16_set_integer_scale(depth16_conv *p, int scale, int offset, double bound)
{
    /* Granlund-Montgomery for 31-bit dividends: l = ceil(log2 d),
     * m = floor(2^(31 + l) / d) + 1 (at most 2^32 + 1: 64-bit products) */
    int l = 0;
    while ((1ll << l) < scale)
        l++;
    p->int_scale = scale;
    p->int_offset = offset;
    p->int_shift = 31 + l;
    p->int_magic = (unsigned long long)(((unsigned __int128)1 << (31 + l)) / (unsigned)scale) + 1;
    p->small_sums = bound < 2097152.0;
    p->float_reciprocal = 1.0f / (float)scale;
    p->float_finish = p->small_sums && ((scale & 1) || (scale & (scale - 1)) == 0);
}

extern "C" size_t depth16_scratch_bytes(const depth16_conv *p)
{
    return (size_t)p->channels_filtered * (size_t)p->width * (size_t)p->height * sizeof(double);
}

extern "C" cudaError_t depth16_histogram(const uint16_t *px, size_t pixels, int channels, int luma,
                                         unsigned *counts, cudaStream_t stream)
{
    const size_t bins = (size_t)(luma ? 1 : channels) * kBins;
    cudaError_t err = cudaMemsetAsync(counts, 0, bins * sizeof *counts, stream);
    if (err != cudaSuccess)
        return err;
    histogram16<<<stride_blocks(pixels), 256, 0, stream>>>(px, pixels, channels, luma, counts);
    return cudaGetLastError();
}

extern "C" cudaError_t depth16_apply_lut(uint16_t *px, size_t pixels, int channels, int colour,
                                         const uint16_t *luts, int mode, cudaStream_t stream)
{
    apply_lut16<<<stride_blocks(pixels), 256, 0, stream>>>(px, pixels, channels, colour, luts, mode);
    return cudaGetLastError();
}
