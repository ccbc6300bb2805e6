/* conv2d_common.cuh - what the 2-D correlation's kernel families share:
 * the kernel header (fast_header) and parameters (fast_args), the scaling
 * modes, the finishing arithmetic, the float tiles of versions 2 and 3
 * (staging, shared loads and stores), the output stores, cp.async, the
 * 16-bit lane split and the numbers of version 4's paths.
 *
 * Arithmetic: sums are float sums of pixel x weight. Integer weights give
 * exact integer sums (below 2^24), so the division by the scale and the
 * rounding (half to even) match the double-precision CPU reference exactly;
 * fractional weights may differ by one level where a value sits on a
 * rounding boundary. The finish (conv2d_value) uses version 1's operations:
 * a scale that is a power of two is folded into the weights (every partial
 * sum scales by the same power of two: exact), an offset of 0 is not added
 * (r + 0 is r), the magnitude's square root is sqrt.rn's fast path on a
 * clamped argument (conv2d_magnitude). A result is returned as the float
 * 2^23 + byte (kMagic): clamping to 0..255 and then adding 2^23 rounds half
 * to even and leaves the byte in the low 8 bits, so no F2I is needed, and
 * one PRMT packs four outputs. The integer paths of version 4 finish their
 * exact sums the same way (MODE_DIV_ODD: one FFMA by 1 / d for an odd
 * divisor d, exact for sums below 2^22). */
#ifndef GF_KERNELS_CONV2D_COMMON_CUH
#define GF_KERNELS_CONV2D_COMMON_CUH

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "kernels.h"

extern "C" {
#include "../src/border.h"
#include "../src/mask.h"
}

#define CONV2D_MAX_MATRICES GF_MASK_MAX_MATRICES

/* Every element of a register array (of any rank) to 0, fully unrolled. */
template <int N>
__device__ __forceinline__ void conv2d_zero(float (&a)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        a[i] = 0.0f;
}

template <int N>
__device__ __forceinline__ void conv2d_zero(int (&a)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        a[i] = 0;
}

template <class T, int N>
__device__ __forceinline__ void conv2d_zero(T (&a)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        conv2d_zero(a[i]);
}

/* What every kernel of versions 2 to 4 reads first (conv2d_make_plan fills
 * it), followed by its weights (fast_args). */
struct fast_header {
    const unsigned char *src;
    unsigned char *dst;
    const float *wdev;            /* device weights, for the shared-weight variants */
    const float *rowdev, *coldev; /* version 3, shared-weight variant */
    int width, height, border;
    int mw, mh;                   /* mask size */
    int cf;                       /* channels_filtered, clamped to 0..channels */
    int tw, th;                   /* tile in output pixels */
    int steps;                    /* tiles per block, walking down */
    int lq;                       /* input tile: slots of one column class (Q-split) */
    int rs;                       /* input tile: row stride in pixel slots */
    int hrs;                      /* version 3: row stride of the row-pass ring */
    int flat;                     /* src is 4-byte aligned: staging loads words */
    int vec;                      /* src and dst are 16-byte aligned: wide stores */
    int safe_rows;                /* rows below this one end 64+ bytes before the image */
    int aligned;                  /* version 4: src and every row start 16-byte aligned */
    /* version 4 in strips (steps > 1): the first edge_rows rows of blocks
     * take the columns of threads off the fast path, edge_left on the left
     * and those from edge_right0 on (edge_cols in all), one tile of rows at
     * a time; the other blocks skip them */
    int edge_rows, edge_cols, edge_left, edge_right0;
    int mode, comb;
    float scale[4], offset[4];
    float rcp[4];                 /* 1 / scale, rounded, where conv2d_div applies; else 0 */
};

namespace {

constexpr int kMaxMask = GF_MASK_SMALL_SIZE;  /* 31 */
constexpr int kMaxThreads = 256;            /* per block (each family caps its registers) */
constexpr float kMagic = 8388608.0f;        /* 2^23 */
/* Weights that travel as kernel parameters: the header plus 980 floats make
 * 4096 bytes, the parameter limit before CUDA 12.1 (a 31x31 matrix fits). */
constexpr int kParamWeights = 980;

/* How a matrix response is scaled: weights already divided by a scale that
 * is a power of two (exact), with or without offsets to add, or acc / scale
 * as version 1 does. MODE_DIV_ODD: version 4's 3x3 integer path, one
 * matrix, no offset, a scale that is an odd integer d, 3 <= |d| < 2^22
 * (box3): the exact integer sum t (|t| < 2^22) times fl(1/d) in one FFMA
 * that also rounds, the same byte as rint(t / d): t / d lies at least
 * 1 / (2|d|) from any half-integer (2t - d(2k + 1) is odd), and the
 * product is within |t / d| 2^-24 < 1 / (4|d|) of it: the same nearest
 * integer, never a tie. Only the kernels with a loop for it are given it
 * (conv2d_make_plan). */
enum { MODE_PRESCALED_NO_OFFSET = 0, MODE_PRESCALED = 1, MODE_DIV = 2, MODE_DIV_ODD = 3 };
/* Added to MODE_PRESCALED_NO_OFFSET or MODE_DIV_ODD in a version 4 kernel
 * of its own for masks whose outputs cannot leave 0..255 (weights >= 0,
 * their sum at most the scale: gaussian, box): its outputs skip the clamp.
 * t >= 0, so the FFMA's result is at least 2^23; t <= 255 * scale, so it
 * rounds to at most 2^23 + 255 (for MODE_DIV_ODD: to rint(t / d) <= 255). */
constexpr int kInRange = 8;
/* How the matrix responses combine (gf_combine, NONE folded into SUM, and
 * MAX and MIN of one matrix too). */
enum { COMB_SUM = 0, COMB_MAG = 1, COMB_MAX = 2, COMB_MIN = 3 };

template <int NW> struct fast_args {
    fast_header h;
    float w[NW];
};
static_assert(sizeof(fast_args<kParamWeights>) <= 4096, "kernel parameters over 4 KB");

template <int C> struct slot_floats { static constexpr int value = C == 3 ? 4 : C; };

__host__ __device__ constexpr int log2_of(int n) { return n <= 1 ? 0 : 1 + log2_of(n / 2); }

/* Pixel slot i of a float tile: C floats (RGB padded to 4), one 4-, 8- or
 * 16-byte shared access. */
template <int C>
__device__ __forceinline__ void conv2d_lds(const float *tile, int i, float (&v)[slot_floats<C>::value])
{
    if constexpr (C == 1) {
        v[0] = tile[i];
    } else if constexpr (C == 2) {
        const float2 t = reinterpret_cast<const float2 *>(tile)[i];
        v[0] = t.x;
        v[1] = t.y;
    } else {
        const float4 t = reinterpret_cast<const float4 *>(tile)[i];
        v[0] = t.x;
        v[1] = t.y;
        v[2] = t.z;
        v[3] = t.w;
    }
}

template <int C>
__device__ __forceinline__ void conv2d_sts(float *tile, int i, const float (&v)[slot_floats<C>::value])
{
    if constexpr (C == 1) {
        tile[i] = v[0];
    } else if constexpr (C == 2) {
        float2 t;
        t.x = v[0];
        t.y = v[1];
        reinterpret_cast<float2 *>(tile)[i] = t;
    } else {
        float4 t;
        t.x = v[0];
        t.y = v[1];
        t.z = v[2];
        t.w = v[3];
        reinterpret_cast<float4 *>(tile)[i] = t;
    }
}

/* MODE_DIV_ODD's finish of an exact integer sum held as the float 2^23 +
 * sum (0 <= sum < 2^23): rint(sum / d), with mul = 1 / d, plus 2^23, by a
 * FADD and one FFMA (no clamp: the box masks' outputs are in range). */
__device__ __forceinline__ float conv2d_div_odd(float biased, float mul)
{
    return __fmaf_rn(__fadd_rn(biased, -kMagic), mul, kMagic);
}

/* Byte i of a word as a float: 0x4B0000bb is 2^23 + b exactly, so one PRMT
 * and one FADD, both full-rate, replace the quarter-rate I2F. */
__device__ __forceinline__ float conv2d_byte(unsigned word, int i)
{
    return __fadd_rn(__uint_as_float(__byte_perm(word, 0x4B000000u, 0x7440u | (unsigned)i)), -kMagic);
}

/* The low bytes of four values from conv2d_value, packed into a word. */
__device__ __forceinline__ unsigned conv2d_pack(float a, float b, float c, float d)
{
    return __byte_perm(__byte_perm(__float_as_uint(a), __float_as_uint(b), 0x0040u),
                       __byte_perm(__float_as_uint(c), __float_as_uint(d), 0x0040u), 0x5410u);
}

/* MUFU's square roots: rsqrt.approx (MUFU.RSQ, the first step of nvcc's
 * sqrt.rn) with RECIPROCAL, else sqrt.approx (MUFU.SQRT). */
template <bool RECIPROCAL>
__device__ __forceinline__ float conv2d_mufu_sqrt(float v)
{
#ifdef __CUDA_ARCH__
    float y;
    if constexpr (RECIPROCAL)
        asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(v));
    else
        asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(v));
    return y;
#else
    return RECIPROCAL ? 1.0f / sqrtf(v) : sqrtf(v);
#endif
}

/* a / s correctly rounded, given r = 1 / s rounded (the host's division;
 * conv2d_div_range says for which masks, r = 0 for the others): the quotient
 * through r, then one correction by the exact residual (Markstein), the
 * same steps as __fdiv_rn's fast path but without its range test, which
 * sends a dividend of 0 (a black region's sums) to a slow subroutine: with
 * it, a photo's black regions would set the time (in strips, the strips
 * crossing black rows would set the kernel's). */
__device__ __forceinline__ float conv2d_div(float a, float s, float r)
{
    const float q = __fmul_rn(a, r);
    return __fmaf_rn(__fmaf_rn(-q, s, a), r, q);
}

/* conv2d_finish for one channel of one output, in version 1's operations
 * (rn division, conv2d_div's, or the exact prescaled sum, rn offset add,
 * fma for the magnitude, IEEE sqrt), returned as 2^23 + the output byte:
 * clamping to 0..255 first and adding 2^23 rounds half to even like rintf
 * and leaves the byte in the low 8 bits, so no F2I is needed. NaN clamps
 * to 0, as fmaxf(rintf(NaN), 0) does.
 *
 * The magnitude (conv2d_magnitude, given the sum of squares) clamps the sum
 * to [2^-60, 255^2] before the square root instead of clamping after it:
 * the same byte (sqrt is monotonic, sqrt(255^2) = 255, anything below
 * 2^-30 rounds to 0), and in that range sqrt.rn is exactly its fast path,
 * written out here: MUFU.RSQ and one Newton step (nvcc's own sequence for
 * normal inputs), without the range test and branch to the slow path. */
__device__ __forceinline__ float conv2d_magnitude(float v)
{
    v = fminf(fmaxf(v, 0x1p-60f), 65025.0f);
    const float y = conv2d_mufu_sqrt<true>(v);
    const float s = __fmul_rn(v, y), half = __fmul_rn(y, 0.5f);
    return __fadd_rn(__fmaf_rn(__fmaf_rn(-s, s, v), half, s), kMagic);
}

template <int MODE, int COMB, int K>
__device__ __forceinline__ float conv2d_value(const float (&acc)[K], const fast_header &h)
{
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < K; k++) {
        float r = acc[k];
        if (MODE == MODE_DIV)
            r = h.rcp[k] != 0.0f ? conv2d_div(r, h.scale[k], h.rcp[k]) : __fdiv_rn(r, h.scale[k]);
        if (MODE != MODE_PRESCALED_NO_OFFSET)  /* r + 0 is r: skipped when all offsets are 0 */
            r = __fadd_rn(r, h.offset[k]);
        if (COMB == COMB_MAG)
            v = k == 0 ? __fmul_rn(r, r) : __fmaf_rn(r, r, v);
        else if (COMB == COMB_MAX)
            v = k == 0 ? r : fmaxf(v, r);
        else if (COMB == COMB_MIN)
            v = k == 0 ? r : fminf(v, r);
        else
            v = k == 0 ? r : __fadd_rn(v, r);
    }
    if (COMB == COMB_MAG)
        return conv2d_magnitude(v);
    return __fadd_rn(fminf(fmaxf(v, 0.0f), 255.0f), kMagic);
}

/* Stage 'count' input rows into a float tile: image rows yimg..yimg+count-1
 * and columns xin..xin+L-1 (any integers, mapped through the border), row u
 * into slot row (slot0 + u) mod R. Columns are stored Q-split: pixel l at
 * (l % Q) * lq + l / Q, so that a thread reading pixels Q*t + i (its window)
 * and its neighbours read consecutive slots: conflict-free wide loads.
 * Channels >= CF are left 0: they are copied from the source at the store.
 *
 * The common case (interior block, rows inside the image and not within 64
 * bytes of its end: all steps but the first and last of the top and bottom
 * blocks) goes by groups: group g of a row is pixels Q*g .. Q*g + Q - 1,
 * which land in slots g, g + lq, g + 2 lq, ...; its Q*C bytes are read as
 * aligned words (a PRMT realigns them when C != 4), B groups per thread in
 * flight before any is converted (B is about the groups a thread has per
 * step, so that a step costs one memory round trip). Everything else maps
 * each pixel through gf_border_index. */
template <int C, int CF, int Q, int B>
__device__ __forceinline__ void conv2d_stage(const fast_header &h, float *tile, int xin, int L,
                                             int yimg, int count, int slot0, int R, bool interior,
                                             int tid, int nt)
{
    constexpr int CP = slot_floats<C>::value;
    constexpr int LQ = log2_of(Q);
    const int lq = h.lq, rs = h.rs;
    if (interior && yimg >= 0 && yimg + count <= h.safe_rows) {
        constexpr int NB = Q * C, NWD = NB / 4;  /* bytes and words of a group */
        static_assert(NB % 4 == 0, "whole words per group");
        const size_t row_bytes = (size_t)h.width * C;
        const int items = count * lq;
        /* item (u, g): group g of row u. The item index advances by nt, so
         * (u, g) advance by (du, dg) with a carry into u; the source pointer,
         * the ring row and the slot follow incrementally. */
        const int du = nt / lq, dg = nt - du * lq;
        const int u0 = tid / lq, g0 = tid - u0 * lq;
        int g = g0, r = slot0 + u0 % R;
        if (r >= R)
            r -= R;
        int at = r * rs + g;
        const unsigned char *from =
            h.src + (size_t)(yimg + u0) * row_bytes + (size_t)xin * C + (size_t)g0 * NB;
        const size_t step = (size_t)du * row_bytes + (size_t)dg * NB;
        const size_t carry = row_bytes - (size_t)lq * NB;
        for (int it0 = tid; it0 < items; it0 += B * nt) {
            unsigned w[B][NWD];
            int slot[B];  /* slot of the group's first pixel */
            int left[B];  /* its pixels inside the segment; 0: no item */
#pragma unroll
            for (int b = 0; b < B; b++) {
                slot[b] = at;
                left[b] = 0;
#pragma unroll
                for (int m = 0; m < NWD; m++)
                    w[b][m] = 0;
                if (it0 + b * nt < items) {
                    left[b] = L - Q * g;
                    if constexpr (C == 4) {
#pragma unroll
                        for (int m = 0; m < NWD; m++)
                            w[b][m] = reinterpret_cast<const unsigned *>(from)[m];
                    } else {
                        const unsigned shift = (unsigned)(uintptr_t)from & 3;
                        const unsigned *words = reinterpret_cast<const unsigned *>(from - shift);
                        unsigned raw[NWD + 1];
#pragma unroll
                        for (int m = 0; m <= NWD; m++)
                            raw[m] = words[m];
                        const unsigned sel = 0x3210u + shift * 0x1111u;
#pragma unroll
                        for (int m = 0; m < NWD; m++)
                            w[b][m] = __byte_perm(raw[m], raw[m + 1], sel);
                    }
                }
                g += dg;
                r += du;
                at += du * rs + dg;
                from += step;
                if (g >= lq) {
                    g -= lq;
                    r++;
                    at += rs - lq;
                    from += carry;
                }
                while (r >= R) {  /* du < R: at most twice */
                    r -= R;
                    at -= R * rs;
                }
            }
#pragma unroll
            for (int b = 0; b < B; b++) {
                float f[Q][CP];
#pragma unroll
                for (int k = 0; k < Q; k++)
#pragma unroll
                    for (int c = 0; c < CP; c++)
                        f[k][c] = c < CF ? conv2d_byte(w[b][(k * C + c) / 4], (k * C + c) % 4) : 0.0f;
                if (left[b] >= Q) {  /* whole groups: no per-pixel branch */
#pragma unroll
                    for (int k = 0; k < Q; k++)
                        conv2d_sts<C>(tile, slot[b] + k * lq, f[k]);
                } else {             /* the last group of a row */
#pragma unroll
                    for (int k = 0; k < Q; k++)
                        if (k < left[b])
                            conv2d_sts<C>(tile, slot[b] + k * lq, f[k]);
                }
            }
        }
        return;
    }
    /* one pixel per item, both coordinates mapped */
    const int items = count * L;
    const int du = nt / L, dl = nt - du * L;
    int u = tid / L, l = tid - u * L;
    for (int it = tid; it < items; it += nt) {
        const int gy = gf_border_index(yimg + u, h.height, (gf_border)h.border);
        const int gx = gf_border_index(xin + l, h.width, (gf_border)h.border);
        float v[CP];
#pragma unroll
        for (int c = 0; c < CP; c++)
            v[c] = 0.0f;
        if (gx >= 0 && gy >= 0) {
            const unsigned char *from = h.src + ((size_t)gy * h.width + gx) * C;
#pragma unroll
            for (int c = 0; c < CF; c++)
                v[c] = (float)from[c];
        }
        int r = slot0 + u;
        if (r >= R)
            r -= R;
        conv2d_sts<C>(tile, r * rs + (l & (Q - 1)) * lq + (l >> LQ), v);
        l += dl;
        u += du;
        if (l >= L) {
            l -= L;
            u++;
        }
    }
}

/* The Q * C bytes of a thread's Q pixels as whole words, packed with PRMT:
 * the filtered channels from conv2d_value (fv[q][c], c < CF), 0 in the
 * others (merged from the source by the caller). */
template <int C, int CF, int Q>
__device__ __forceinline__ void conv2d_pack_words(const float (&fv)[Q][CF], unsigned (&w)[Q * C / 4])
{
    auto byte_of = [&](int b) { /* compile-time b */
        const int q = b / C, c = b % C;
        return c < CF ? fv[q][c < CF ? c : 0] : 0.0f;
    };
#pragma unroll
    for (int k = 0; k < Q * C / 4; k++)
        w[k] = conv2d_pack(byte_of(4 * k), byte_of(4 * k + 1), byte_of(4 * k + 2), byte_of(4 * k + 3));
}

/* Word k of a run of pixels from 'result' (the filtered channels, packed)
 * and 'source' (the same word of the input: the channels copied, alpha):
 * one PRMT with a compile-time selector. */
template <int C, int CF>
__device__ __forceinline__ unsigned conv2d_merge(unsigned result, unsigned source, int k)
{
    unsigned sel = 0;
    for (int j = 0; j < 4; j++)
        sel |= (unsigned)((4 * k + j) % C < CF ? j : 4 + j) << (4 * j);
    return __byte_perm(result, source, sel);
}

/* Write the Q pixels x..x+Q-1 of row y: their filtered channels from
 * conv2d_value (fv[q][c], c < CF), the others copied from src. Whole runs
 * inside the image go out as 16-, 8- or 4-byte stores (whichever the address
 * allows), packed with PRMT, the copied channels merged from the source
 * words with one more PRMT; the right edge and unusual channels_filtered
 * values go byte by byte. */
template <int C, int CF, int Q>
__device__ __forceinline__ void conv2d_store(const fast_header &h, int y, int x,
                                             const float (&fv)[Q][CF], const unsigned *given = nullptr)
{
    constexpr int NB = Q * C, NW = NB / 4;
    static_assert(NB % 4 == 0, "runs of whole words");
    const size_t o = ((size_t)y * h.width + x) * C;
    if (h.vec && x + Q <= h.width && h.cf == CF && (o & 3) == 0) {
        unsigned w[NW];
        conv2d_pack_words<C, CF, Q>(fv, w);
        constexpr bool copy = CF < C;
        if (NB % 16 == 0 && (o & 15) == 0) {
#pragma unroll
            for (int k = 0; k < NW; k += 4) {
                uint4 t;
                t.x = w[k];
                t.y = w[k + 1];
                t.z = w[k + 2];
                t.w = w[k + 3];
                if (copy) {
                    const uint4 v = given ? make_uint4(given[k], given[k + 1], given[k + 2], given[k + 3])
                                          : *reinterpret_cast<const uint4 *>(h.src + o + 4 * k);
                    t.x = conv2d_merge<C, CF>(t.x, v.x, k);
                    t.y = conv2d_merge<C, CF>(t.y, v.y, k + 1);
                    t.z = conv2d_merge<C, CF>(t.z, v.z, k + 2);
                    t.w = conv2d_merge<C, CF>(t.w, v.w, k + 3);
                }
                *reinterpret_cast<uint4 *>(h.dst + o + 4 * k) = t;
            }
        } else if (NB % 8 == 0 && (o & 7) == 0) {
#pragma unroll
            for (int k = 0; k < NW; k += 2) {
                uint2 t;
                t.x = w[k];
                t.y = w[k + 1];
                if (copy) {
                    const uint2 v = given ? make_uint2(given[k], given[k + 1])
                                          : *reinterpret_cast<const uint2 *>(h.src + o + 4 * k);
                    t.x = conv2d_merge<C, CF>(t.x, v.x, k);
                    t.y = conv2d_merge<C, CF>(t.y, v.y, k + 1);
                }
                *reinterpret_cast<uint2 *>(h.dst + o + 4 * k) = t;
            }
        } else {
#pragma unroll
            for (int k = 0; k < NW; k++) {
                unsigned t = w[k];
                if (copy) {
                    const unsigned v = given ? given[k] : *reinterpret_cast<const unsigned *>(h.src + o + 4 * k);
                    t = conv2d_merge<C, CF>(t, v, k);
                }
                *reinterpret_cast<unsigned *>(h.dst + o + 4 * k) = t;
            }
        }
        return;
    }
#pragma unroll
    for (int q = 0; q < Q; q++) {
        if (x + q >= h.width)
            break;
#pragma unroll
        for (int c = 0; c < C; c++) {
            const size_t at = o + (size_t)q * C + c;
            h.dst[at] = c < CF && c < h.cf ? (unsigned char)__float_as_uint(fv[q][c < CF ? c : 0])
                                           : h.src[at];
        }
    }
}

/* conv2d_store's aligned case for a thread's Q pixels of all C channels:
 * NB = Q * C bytes (4, 8 or 16) at 'o', which the caller knows to be
 * NB-byte aligned; the channels past CF from 'given', the input's words of
 * those pixels (the caller's registers). STREAM: 16 bytes stored
 * evict-first (st.global.cs), for outputs L2 need not keep. */
template <int C, int CF, int Q, bool STREAM = false>
__device__ __forceinline__ void conv2d_store_wide(unsigned char *o, const float (&fv)[Q][CF],
                                                  const unsigned *given = nullptr)
{
    constexpr int NB = Q * C, NW = NB / 4;
    static_assert(NB == 4 || NB == 8 || NB == 16, "whole words");
    unsigned w[NW];
    conv2d_pack_words<C, CF, Q>(fv, w);
    if constexpr (CF < C) {
#pragma unroll
        for (int k = 0; k < NW; k++)
            w[k] = conv2d_merge<C, CF>(w[k], given[k], k);
    }
    if constexpr (NB == 16 && STREAM)
        __stcs(reinterpret_cast<uint4 *>(o), make_uint4(w[0], w[1], w[2], w[3]));
    else if constexpr (NB == 16)
        *reinterpret_cast<uint4 *>(o) = make_uint4(w[0], w[1], w[2], w[3]);
    else if constexpr (NB == 8)
        *reinterpret_cast<uint2 *>(o) = make_uint2(w[0], w[1]);
    else
        *reinterpret_cast<unsigned *>(o) = w[0];
}

/* One output row of Q pixels: value(s) finishes the K matrix sums s of a
 * pixel and channel (versions 2 and 4 pass their own finishing). */
template <int C, int CF, int K, int Q, class Value>
__device__ __forceinline__ void conv2d_finish_row(const float (&acc)[Q][K][CF],
                                                  const fast_header &h, int y, int x, Value value)
{
    float fv[Q][CF];
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int c = 0; c < CF; c++) {
            float s[K];
#pragma unroll
            for (int k = 0; k < K; k++)
                s[k] = acc[q][k][c];
            fv[q][c] = value(s);
        }
    conv2d_store<C, CF, Q>(h, y, x, fv);
}

/* cp.async (compute capability 8.0 and up; before it, a load and a store
 * in the thread: the same bytes, only without the overlap); with 'zero',
 * N zero bytes instead (cp.async's source size 0: nothing is read). */
template <int N>
__device__ __forceinline__ void conv2d_copy_async(unsigned dst, const void *src, bool zero)
{
#if __CUDA_ARCH__ >= 800
    if (zero)  /* two forms, so that no register holds the sizes */
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, 0;\n" ::"r"(dst), "l"(src), "n"(N)
                     : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(src), "n"(N)
                     : "memory");
#else
    if (zero) {
        for (int i = 0; i < N; i += 4)
            asm volatile("st.shared.u32 [%0], %1;" ::"r"(dst + i), "r"(0u) : "memory");
    } else if constexpr (N == 16) {
        const uint4 v = __ldg(reinterpret_cast<const uint4 *>(src));
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "r"(v.x), "r"(v.y),
                     "r"(v.z), "r"(v.w) : "memory");
    } else if constexpr (N == 8) {
        const uint2 v = __ldg(reinterpret_cast<const uint2 *>(src));
        asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(dst), "r"(v.x), "r"(v.y) : "memory");
    } else {
        const unsigned v = __ldg(reinterpret_cast<const unsigned *>(src));
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(dst), "r"(v) : "memory");
    }
#endif
}

__device__ __forceinline__ void conv2d_copy_commit()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/* Until at most N of this thread's groups of copies are still in flight. */
template <int N>
__device__ __forceinline__ void conv2d_copy_wait()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/* Lane pair l of an RGBA word: R, B (l = 0) or G, A (l = 1), each byte in a
 * 16-bit lane (a LOP3 or a PRMT: (word >> 8) & 0x00FF00FF). */
__device__ __forceinline__ unsigned conv2d_lane_pair(unsigned word, int l)
{
    return l ? __byte_perm(word, 0u, 0x4341u) : word & 0x00FF00FFu;
}

/* Version 4's paths: conv2d_variant::ws and the kernels' DP argument. 0:
 * float weights; CONV2D_DP4A, CONV2D_DP2A: integer weights of 8 or 16 bits
 * (conv2d_direct.cuh); then the separable integer path and its two columns
 * without multiplies, the gradient pairs in 16-bit lanes (one number a
 * kind, kGradients4), the running sums of box masks (conv2d_direct.cuh),
 * the prefix sums of box masks (conv2d_scan.cuh), the tensor cores
 * (conv2d_mma.cuh) and the row streams (conv2d_stream.cuh, one number a
 * shape of the weights). */
constexpr int kSeparable4 = CONV2D_SEPARABLE_INTEGER;
constexpr int kBinomial4 = CONV2D_SEPARABLE_INTEGER + 1, kBox4 = CONV2D_SEPARABLE_INTEGER + 2;
constexpr int kGradient4 = kBox4 + 1, kGradientKinds4 = 3;
constexpr int kRunning4 = kGradient4 + kGradientKinds4;
constexpr int kBoxScan4 = kRunning4 + 1;
constexpr int kMma4 = kBoxScan4 + 1;
constexpr int kStream4 = kMma4 + 1;  /* + the weights' shape (kStreamBinomial...) */

/* The scaling mode of a version 4 kernel that tests h.mode at each output
 * (one loop for all); the others have one mode compiled in. */
constexpr int kModeAny = -1;

}  /* namespace */

#endif /* GF_KERNELS_CONV2D_COMMON_CUH */
