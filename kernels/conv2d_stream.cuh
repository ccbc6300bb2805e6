/* conv2d_stream.cuh - version 4's row streams (kStream4): 3x3 masks that
 * factor as a column times a row of small integers with outputs in range
 * (gaussian3, box3), gray and RGBA rows of whole 16-byte words, in 16-bit
 * lanes.
 *
 * Why: the direct kernel's 3x3 loops are bound by how fast each thread's
 * ring of rows can be fed, not by their bytes. Here each thread owns 16
 * bytes of a row, a group of tile_width * C / 16 adjacent threads a band of
 * a tile's width, and each thread walks kStreamRows4 rows down (or up) its
 * column: one 16-byte load and one 16-byte store a row, like a copy, the
 * left and right neighbours of its bytes from the lanes beside it
 * (shuffles), the group's edge lanes loading one pixel more. Bands walk
 * down and up in turn, so that the halo rows two bands share are read by
 * both at about the same time (L2 hits). Each batch of kStreamAhead4 rows
 * loaded also prefetches the next batch's rows into L2: the registers hold
 * two rows ahead (64 a thread, 1024 threads an SM; a third row spilled),
 * the prefetches put more in flight without one. Bands are 8 rows, which
 * ran faster than 16 on RGBA and gray alike (bench/RESULTS.md).
 *
 * Arithmetic: bytes unpacked into 16-bit lanes of 32-bit registers (PRMT:
 * gray pixels 4k, 4k+2 and 4k+1, 4k+3; RGBA channels R, B and G, A), the
 * column pass one IMAD a register and row (c0 a + c1 b + c2 c, exact: the
 * plan checks 255 * sum(column) * sum(row) < 2^16, so no lane carries into
 * the next), the row pass the same across pixels (neighbour pairs by one
 * PRMT on gray, whole registers on RGBA), then rint(sum / scale) per lane,
 * exact: a power-of-two scale 2^k (k <= 8) as (t + 2^(k-1) - 1 + bit k of
 * t) >> k, half to even as nearbyint; an odd scale d (< 2^15) as
 * umulhi(t + (d - 1) / 2, ceil(2^32 / d)), floor((t + (d - 1) / 2) / d)
 * for t < 2^16 (the error of the multiplier stays below 2^-15 < 1 / d, and
 * an odd d has no ties). Outputs in range (kInRange: no negative weight,
 * their sum at most the scale), so no clamp. */
#ifndef GF_KERNELS_CONV2D_STREAM_CUH
#define GF_KERNELS_CONV2D_STREAM_CUH

#include "conv2d_common.cuh"

namespace {

constexpr int kStreamRows4 = 8;  /* rows a thread walks: its tile's height is a multiple */
constexpr int kStreamAhead4 = 2;  /* rows loaded before the outputs that need them */
/* Threads a block may have: the register cap of one block of 1024 an SM is
 * that of four of 256 (64 a thread), and ptxas gives the same SASS for
 * both, so any tile up to the CUDA limit runs (RGBA 256x64, 512 threads,
 * at bands of 8 rows) at no cost to the automatic tiles' kernels. */
constexpr int kStreamMaxThreads = 1024;
constexpr int kStreamShuffle = -2;  /* a neighbour taken from the lane beside */

/* One row of a thread's column: its 16 bytes, and the pixels left and
 * right of them (gray: the byte; RGBA: the word). */
struct stream_row4 {
    uint4 v;
    unsigned left, right;
};

/* The row at 'row' (NULL: the constant border's zeros); left_at and
 * right_at are byte offsets of the neighbour pixels in the row, -1 for a
 * zero, or kStreamShuffle; seg the lanes of the thread's group (a power of
 * two, at most 32). Every lane of the warp calls it. */
template <int C>
__device__ __forceinline__ stream_row4 conv2d_stream_load4(const unsigned char *row, int xb,
                                                           int left_at, int right_at, int seg)
{
    stream_row4 r;
    r.v = row ? __ldg(reinterpret_cast<const uint4 *>(row + xb)) : make_uint4(0u, 0u, 0u, 0u);
    r.left = __shfl_up_sync(0xFFFFFFFFu, C == 1 ? r.v.w >> 24 : r.v.w, 1, seg);
    r.right = __shfl_down_sync(0xFFFFFFFFu, C == 1 ? r.v.x & 0xFFu : r.v.x, 1, seg);
    auto pixel = [&](int at) -> unsigned {
        if (!row || at < 0)
            return 0u;
        return C == 1 ? (unsigned)__ldg(row + at) : __ldg(reinterpret_cast<const unsigned *>(row + at));
    };
    if (left_at != kStreamShuffle)
        r.left = pixel(left_at);
    if (right_at != kStreamShuffle)
        r.right = pixel(right_at);
    return r;
}

/* A row in 16-bit lanes: gray e[k] = pixels (4k, 4k+2), o[k] = (4k+1,
 * 4k+3), lo/hi[0] and [5] the neighbours; RGBA lo[p] = (R, B), hi[p] = (G,
 * A) of pixels p - 1 = -1..4. */
struct stream_lanes4 {
    unsigned lo[6], hi[6];
};

template <int C>
__device__ __forceinline__ stream_lanes4 conv2d_stream_unpack4(const stream_row4 &r)
{
    stream_lanes4 u;
    const unsigned w[4] = {r.v.x, r.v.y, r.v.z, r.v.w};
    if constexpr (C == 1) {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            u.lo[k + 1] = __byte_perm(w[k], 0u, 0x4240);
            u.hi[k + 1] = __byte_perm(w[k], 0u, 0x4341);
        }
        u.lo[0] = r.left;  /* pixel -1 in the low lane */
        u.hi[0] = 0u;
        u.lo[5] = r.right;  /* pixel 16 */
        u.hi[5] = 0u;
    } else {
        const unsigned p[6] = {r.left, w[0], w[1], w[2], w[3], r.right};
#pragma unroll
        for (int k = 0; k < 6; k++) {
            u.lo[k] = __byte_perm(p[k], 0u, 0x4240);
            u.hi[k] = __byte_perm(p[k], 0u, 0x4341);
        }
    }
    return u;
}

/* The weights' shapes with kernels of their own: a column and a row of
 * (1, 2, 1) (gaussian3: two IADD a register and pass, the doubling one of
 * them) or of ones (box3: one IADD3), else any (three IMAD). */
enum { kStreamBinomial = 0, kStreamOnes = 1, kStreamAny = 2, kStreamShapes = 3 };

template <int SHAPE>
__device__ __forceinline__ unsigned conv2d_stream_sum4(unsigned x, unsigned y, unsigned z, unsigned w0,
                                                       unsigned w1, unsigned w2)
{
    if constexpr (SHAPE == kStreamBinomial)
        return x + z + y + y;
    else if constexpr (SHAPE == kStreamOnes)
        return x + y + z;
    else
        return x * w0 + y * w1 + z * w2;
}

/* rint(t / scale) in both lanes of t, into bytes 0 and 2 (see the top of this file). */
template <int MODE4>
__device__ __forceinline__ unsigned conv2d_stream_round4(unsigned t, unsigned f0, unsigned f1, unsigned f2)
{
    if constexpr (MODE4 == MODE_PRESCALED_NO_OFFSET + kInRange) {  /* f0 = k, f1 = bias, f2 = lane bits */
        return (t + f1 + ((t >> f0) & f2)) >> f0;
    } else {  /* MODE_DIV_ODD: f0 = the multiplier, f1 = (d - 1) / 2 */
        const unsigned lo = __umulhi((t & 0xFFFFu) + f1, f0), hi = __umulhi((t >> 16) + f1, f0);
        return __byte_perm(lo, hi, 0x5410);
    }
}

/* The 16 output bytes of the middle row b from rows a, b, c (in walking
 * order) and the column weights ca, cb, cc in that order. */
template <int C, int CF, int MODE4, int SHAPE>
__device__ __forceinline__ uint4 conv2d_stream_outputs4(const stream_lanes4 &a, const stream_lanes4 &b,
                                                        const stream_lanes4 &c, const uint4 &middle,
                                                        unsigned ca, unsigned cb, unsigned cc,
                                                        const unsigned *w)
{
    const unsigned r0 = w[3], r1 = w[4], r2 = w[5], f0 = w[6], f1 = w[7], f2 = w[8];
    auto sum = [&](unsigned x, unsigned y, unsigned z, unsigned w0, unsigned w1, unsigned w2) {
        return conv2d_stream_sum4<SHAPE>(x, y, z, w0, w1, w2);
    };
    unsigned vl[6], vh[6];
#pragma unroll
    for (int k = 0; k < 6; k++) {
        vl[k] = sum(a.lo[k], b.lo[k], c.lo[k], ca, cb, cc);
        /* gray: the neighbours' high lanes are unused */
        vh[k] = C == 1 && (k == 0 || k == 5) ? 0u : sum(a.hi[k], b.hi[k], c.hi[k], ca, cb, cc);
    }
    unsigned out[4];
    if constexpr (C == 1) {
        /* vl[k + 1]: pixels 4k, 4k+2; vh[k + 1]: 4k+1, 4k+3 */
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const unsigned left_e = k == 0 ? __byte_perm(vl[0], vh[1], 0x5410)
                                           : __byte_perm(vh[k], vh[k + 1], 0x5432);
            const unsigned right_o = k == 3 ? __byte_perm(vl[4], vl[5], 0x5432)
                                            : __byte_perm(vl[k + 1], vl[k + 2], 0x5432);
            const unsigned even = sum(left_e, vl[k + 1], vh[k + 1], r0, r1, r2);
            const unsigned odd = sum(vl[k + 1], vh[k + 1], right_o, r0, r1, r2);
            out[k] = __byte_perm(conv2d_stream_round4<MODE4>(even, f0, f1, f2),
                                 conv2d_stream_round4<MODE4>(odd, f0, f1, f2), 0x6240);
        }
    } else {
        const unsigned src[4] = {middle.x, middle.y, middle.z, middle.w};
#pragma unroll
        for (int p = 1; p <= 4; p++) {
            const unsigned l = sum(vl[p - 1], vl[p], vl[p + 1], r0, r1, r2);
            const unsigned h = sum(vh[p - 1], vh[p], vh[p + 1], r0, r1, r2);
            out[p - 1] = __byte_perm(conv2d_stream_round4<MODE4>(l, f0, f1, f2),
                                     conv2d_stream_round4<MODE4>(h, f0, f1, f2), 0x6240);
            if constexpr (CF == 3)  /* alpha copied */
                out[p - 1] = __byte_perm(out[p - 1], src[p - 1], 0x7210);
        }
    }
    return make_uint4(out[0], out[1], out[2], out[3]);
}

/* Block (tile_width * C / 16) x (tile_height / kStreamRows4) threads, a
 * tile each block; a.w: the column's and the row's weights (words 0..5),
 * the rounding's constants (6..8; conv2d_stream_round4). */
template <int C, int CF, int MODE4, int SHAPE>
__global__ void __launch_bounds__(kStreamMaxThreads, 1) conv2d_stream_kernel4(const __grid_constant__ fast_args<16> a)
{
    const fast_header &h = a.h;
    unsigned w[9];
#pragma unroll
    for (int i = 0; i < 9; i++)
        w[i] = __float_as_uint(a.w[i]);
    const int seg = blockDim.x < 32 ? (int)blockDim.x : 32;
    const int lane = (int)threadIdx.x & (seg - 1);
    const int row_bytes = h.width * C;
    const int xb = (int)(blockIdx.x * blockDim.x + threadIdx.x) * 16;
    const bool inside = xb < row_bytes;
    const int band = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    const int y0 = band * kStreamRows4;
    const int rows = min(kStreamRows4, h.height - y0);  /* <= 0: a band past the image */
    /* the warp's rows to walk: its first lane's band is its topmost, the
     * one with the most rows (a group of fewer than 32 lanes is a band) */
    const int steps = __shfl_sync(0xFFFFFFFFu, rows, 0);
    if (steps <= 0 || !__any_sync(0xFFFFFFFFu, inside))
        return;  /* the whole warp past the image */
    const int n = inside ? rows : 0;  /* the rows this lane stores */
    const gf_border border = (gf_border)h.border;
    const int xl = inside ? xb : row_bytes - 16;
    int left_at = kStreamShuffle, right_at = kStreamShuffle;
    if (inside && xb == 0) {
        const int i = gf_border_index(-1, h.width, border);
        left_at = i < 0 ? -1 : i * C;
    } else if (inside && lane == 0) {
        left_at = xb - C;
    }
    if (inside && xb + 16 == row_bytes) {
        const int i = gf_border_index(h.width, h.width, border);
        right_at = i < 0 ? -1 : i * C;
    } else if (inside && lane == seg - 1) {
        right_at = xb + 16;
    }
    /* odd bands walk up: the halo rows two bands share are read by both
     * near the same time */
    const bool up = band & 1;
    const int dir = up ? -1 : 1;
    const int ys = n <= 0 ? 0 : up ? y0 + n - 1 : y0;
    const unsigned ca = up ? w[2] : w[0], cb = w[1], cc = up ? w[0] : w[2];
    const size_t pitch = (size_t)row_bytes;
    /* the rows past the image a band reads: one above, one below (rows
     * further out are loaded ahead at a band's end and never used). Mapped
     * once: gf_border_index in the loop cost 8% (bench/RESULTS.md). */
    const int above = gf_border_index(-1, h.height, border);
    const int below = gf_border_index(h.height, h.height, border);
    auto row_at = [&](int i) -> const unsigned char * {
        const int y = ys + i * dir;
        const int r = y < 0 ? above : y >= h.height ? below : y;
        return r < 0 ? nullptr : h.src + (size_t)r * pitch;
    };
    stream_row4 raw = conv2d_stream_load4<C>(row_at(-1), xl, left_at, right_at, seg);
    stream_lanes4 ra = conv2d_stream_unpack4<C>(raw);
    raw = conv2d_stream_load4<C>(row_at(0), xl, left_at, right_at, seg);
    stream_lanes4 rb = conv2d_stream_unpack4<C>(raw);
    uint4 middle = raw.v;
    unsigned char *out = h.dst + (size_t)ys * pitch + xb;
    const ptrdiff_t step = up ? -(ptrdiff_t)pitch : (ptrdiff_t)pitch;
    for (int i = 0; i < steps; i += kStreamAhead4) {
        stream_row4 next[kStreamAhead4];
        /* the next batch's rows into L2 now: more in flight a thread,
         * without a register (bench/RESULTS.md) */
#pragma unroll
        for (int k = 0; k < kStreamAhead4; k++)
            if (i + 1 + kStreamAhead4 + k <= steps) {
                const unsigned char *p = row_at(i + 1 + kStreamAhead4 + k);
                if (p)
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + xl));
            }
#pragma unroll
        for (int j = 0; j < kStreamAhead4; j++)
            next[j] = conv2d_stream_load4<C>(row_at(i + 1 + j), xl, left_at, right_at, seg);
#pragma unroll
        for (int j = 0; j < kStreamAhead4; j++) {
            if (i + j < steps) {
                const stream_lanes4 rc = conv2d_stream_unpack4<C>(next[j]);
                const uint4 o = conv2d_stream_outputs4<C, CF, MODE4, SHAPE>(ra, rb, rc, middle, ca, cb, cc, w);
                if (i + j < n)
                    *reinterpret_cast<uint4 *>(out) = o;
                out += step;
                ra = rb;
                rb = rc;
                middle = next[j].v;
            }
        }
    }
}

}  /* namespace */

#endif /* GF_KERNELS_CONV2D_STREAM_CUH */
