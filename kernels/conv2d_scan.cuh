/* conv2d_scan.cuh - version 4's box masks as prefix sums across a warp
 * (kBoxScan4): masks of ones over an odd integer, gray from 9x9 and RGBA
 * from 15x15 (below those sizes conv2d_direct.cuh's running sums and
 * column of ones are faster). Neither the halo a thread reads nor its work
 * grows with the mask. */
#ifndef GF_KERNELS_CONV2D_SCAN_CUH
#define GF_KERNELS_CONV2D_SCAN_CUH

#include "conv2d_common.cuh"

namespace {

/* The running sums (conv2d_direct.cuh) copy each thread's halo, M - 1
 * pixels of every input row, twice (the entering and the leaving row) and
 * read it back: ~144 B of L1/TEX a pixel at 31x31, the busiest unit from
 * 15x15 on. Here the sums go the other way round. Each lane of a warp
 * reads only its own 16 bytes of the entering and the leaving row (Q =
 * 16 / C pixels) and keeps their column sums, the sum of the last M rows,
 * in 16-bit lanes (at most 31 x 255). The row pass then needs no halo of
 * its own: the column sums, widened to 32 bits, become prefix sums along
 * the warp's 32 Q pixels (within the lane, then across the lanes by 5
 * shuffles a channel), and each window's sum is the prefix at its right
 * end minus the one just before its left end, two shuffles of registers
 * whose lane and slot the mask's size fixes. The work a pixel is the same
 * for every M; the warp's first HL and last HR pixels only feed the windows
 * of the OUT between them, so neighbouring warps overlap by HL + HR pixels.
 * Exact integer sums, then MODE_DIV_ODD's FFMA: kBox4's bytes. */

/* A warp's pixels left of its outputs (a window's M / 2 and the one before
 * it) and right of them (M / 2), in whole lanes of Q = 16 / C pixels, and
 * its outputs between them. */
__host__ __device__ constexpr int conv2d_scan_left(int C, int M)
{
    return (M / 2 + 16 / C) / (16 / C) * (16 / C);
}
__host__ __device__ constexpr int conv2d_scan_right(int C, int M)
{
    return (M / 2 + 16 / C - 1) / (16 / C) * (16 / C);
}
__host__ __device__ constexpr int conv2d_scan_outputs(int C, int M)
{
    return 32 * (16 / C) - conv2d_scan_left(C, M) - conv2d_scan_right(C, M);
}

/* A lane's 16 bytes of image row y (-1: the constant border's zeros),
 * pixels xs .. xs + 16 / C - 1: one load (tier 2: 16-byte aligned), four
 * (tier 1: words), none (tier -1: a lane off the image whose column sums
 * conv2d_scan_fix takes from the lanes it mirrors), or byte by byte through
 * the border (tier 0: the edges otherwise, rows of other lengths), every
 * load issued before the first is used. */
template <int C>
__device__ __forceinline__ uint4 conv2d_scan_load(const fast_header &h, int y, int xs, int tier)
{
    if (y < 0 || tier < 0)
        return make_uint4(0u, 0u, 0u, 0u);
    const unsigned char *row = h.src + (size_t)y * h.width * C;
    if (tier == 2)
        return __ldg(reinterpret_cast<const uint4 *>(row + (size_t)xs * C));
    if (tier == 1) {
        const unsigned *at = reinterpret_cast<const unsigned *>(row + (size_t)xs * C);
        return make_uint4(__ldg(at), __ldg(at + 1), __ldg(at + 2), __ldg(at + 3));
    }
    int mx[16 / C];
    unsigned v[16], w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int q = 0; q < 16 / C; q++)
        mx[q] = gf_border_index(xs + q, h.width, (gf_border)h.border);
#pragma unroll
    for (int b = 0; b < 16; b++)  /* the constant border's pixels read pixel 0, then drop it */
        v[b] = __ldg(row + (size_t)max(mx[b / C], 0) * C + b % C);
#pragma unroll
    for (int b = 0; b < 16; b++)
        w[b / 4] |= (mx[b / C] < 0 ? 0u : v[b]) << (8 * (b % 4));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* The column sums of a lane's 16 values (value i: pixel i / C, channel
 * i % C) plus the entering row minus the leaving one, in 16-bit lanes
 * (conv2d_lane_pair): cs[2w] holds values 4w and 4w + 2, cs[2w + 1] values
 * 4w + 1 and 4w + 3. Each lane's result lies in 0..M x 255, so the 32-bit
 * sums are exact whatever borrows pass between the lanes along the way. */
__device__ __forceinline__ void conv2d_scan_columns(const uint4 &in, const uint4 &out, unsigned (&cs)[8])
{
    const unsigned i[4] = {in.x, in.y, in.z, in.w}, o[4] = {out.x, out.y, out.z, out.w};
#pragma unroll
    for (int w = 0; w < 4; w++)
#pragma unroll
        for (int l = 0; l < 2; l++)
            cs[2 * w + l] += conv2d_lane_pair(i[w], l) - conv2d_lane_pair(o[w], l);
}

/* The column sums of the lanes wholly off an aligned image, from the
 * pixels they mirror (MODE: nearest, reflect or mirror; the constant
 * border's are the zeros such a lane keeps), which lie inside the warp's
 * own columns when the image is at least 2 HL wide. The image's width and
 * the warp's first pixel 'first' are multiples of Q, so the slot a
 * lane's pixel s reads is the same in every such lane: a shuffle each,
 * from the lane that holds it (one for the left edge, one for the right). */
template <int C, int CF, int MODE>
__device__ __forceinline__ void conv2d_scan_fix(unsigned (&pv)[16], int xs, int first, int width)
{
    constexpr int Q = 16 / C;
    unsigned fixed[16];
#pragma unroll
    for (int s = 0; s < Q; s++) {
        const int p = xs + s;
        const int m = MODE == GF_BORDER_NEAREST ? (p < 0 ? 0 : width - 1)
                      : MODE == GF_BORDER_REFLECT ? (p < 0 ? -1 - p : 2 * width - 1 - p)
                                                  : (p < 0 ? -p : 2 * width - 2 - p);
        const int from = min(max((m - first) / Q, 0), 31);  /* far past the edge: unread */
        const int left = MODE == GF_BORDER_NEAREST ? 0 : MODE == GF_BORDER_REFLECT ? Q - 1 - s
                                                                                        : (Q - s) % Q;
        const int right = MODE == GF_BORDER_NEAREST ? Q - 1 : MODE == GF_BORDER_REFLECT
                                                                     ? Q - 1 - s
                                                                     : (2 * Q - 2 - s) % Q;
#pragma unroll
        for (int c = 0; c < CF; c++) {
            const unsigned l = __shfl_sync(0xFFFFFFFFu, pv[left * C + c], from);
            const unsigned r = __shfl_sync(0xFFFFFFFFu, pv[right * C + c], from);
            fixed[s * C + c] = p < 0 ? l : r;
        }
    }
    if (xs < 0 || xs >= width)
#pragma unroll
        for (int s = 0; s < Q; s++)
#pragma unroll
            for (int c = 0; c < CF; c++)
                pv[s * C + c] = fixed[s * C + c];
}

/* The windows of conv2d_scan_row where they reach past the neighbouring
 * lanes (RGBA): the prefix sums across the warp, per channel, then each window
 * the difference of two of them. */
template <int C, int CF, int M>
__device__ __forceinline__ void conv2d_scan_windows(unsigned (&pv)[16], float mul, float (&fv)[16 / C][CF])
{
    constexpr int Q = 16 / C, R = M / 2;
#pragma unroll
    for (int c = 0; c < CF; c++) {  /* across the lanes: the lanes before this one */
        const unsigned total = pv[16 - C + c];
        unsigned upto = total;
#pragma unroll
        for (int d = 1; d < 32; d *= 2)  /* upto += the value d lanes down, where there is one */
            asm("{\n\t.reg .pred p;\n\t.reg .b32 t;\n\t"
                "shfl.sync.up.b32 t|p, %0, %1, 0, 0xffffffff;\n\t"
                "@p add.u32 %0, %0, t;\n\t}"
                : "+r"(upto)
                : "r"(d));
#pragma unroll
        for (int q = 0; q < Q; q++)
            pv[q * C + c] += upto - total;
    }
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int c = 0; c < CF; c++) {
            /* the prefix at pixel q + R (lane + ao, slot as) minus the one at
             * q - R - 1 (lane + bo, bo <= 0, slot bs) */
            const int a = q + R, ao = a / Q, as = a % Q * C + c;
            const int b = q - R - 1, bo = b >= 0 ? 0 : -((Q - 1 - b) / Q), bs = (b - bo * Q) * C + c;
            const unsigned hi = ao ? __shfl_down_sync(0xFFFFFFFFu, pv[as], ao) : pv[as];
            const unsigned lo = bo ? __shfl_up_sync(0xFFFFFFFFu, pv[bs], -bo) : pv[bs];
            fv[q][c] = conv2d_div_odd(__uint_as_float(hi - lo + 0x4B000000u), mul);
        }
}

/* One output row from the column sums: each window's sum the difference
 * of two prefix sums (exact: below 2^23, as the bits of the float 2^23 +
 * sum), rint(sum / d) by MODE_DIV_ODD's FFMA (no clamp: in range). Gray
 * windows reach no further than the neighbouring lanes, and take the
 * lanes' own prefixes: the scan across the warp and its offsets (32
 * instructions a row) traded for a subtraction for each window begun in
 * the previous lane. The others take conv2d_scan_windows. Every lane of the
 * warp takes part (the shuffles); only the output lanes' values are meant. */
template <int C, int CF, int M>
__device__ __forceinline__ void conv2d_scan_row(const unsigned (&cs)[8], float mul,
                                                float (&fv)[16 / C][CF], bool fix, int xs,
                                                int first, const fast_header &h)
{
    constexpr int Q = 16 / C, R = M / 2;
    unsigned pv[16];
#pragma unroll
    for (int w = 0; w < 4; w++) {
        pv[4 * w] = cs[2 * w] & 0xFFFFu;
        pv[4 * w + 1] = cs[2 * w + 1] & 0xFFFFu;
        pv[4 * w + 2] = cs[2 * w] >> 16;
        pv[4 * w + 3] = cs[2 * w + 1] >> 16;
    }
    if (fix) {  /* the whole warp: an edge warp of an aligned image */
        if (h.border == GF_BORDER_NEAREST)
            conv2d_scan_fix<C, CF, GF_BORDER_NEAREST>(pv, xs, first, h.width);
        else if (h.border == GF_BORDER_REFLECT)
            conv2d_scan_fix<C, CF, GF_BORDER_REFLECT>(pv, xs, first, h.width);
        else if (h.border == GF_BORDER_MIRROR)
            conv2d_scan_fix<C, CF, GF_BORDER_MIRROR>(pv, xs, first, h.width);
    }
#pragma unroll
    for (int i = C; i < 16; i++)  /* within the lane, per channel */
        pv[i] += pv[i - C];
    if constexpr (R < Q) {
        /* every window within this lane and its two neighbours: no prefix
         * across the warp. With the lane's in-lane prefixes P and total T,
         * a window ending in the next lane adds T to that lane's P, and
         * one starting in the previous lane takes off that lane's P - T
         * (the output lanes are never the warp's first or last) */
        const unsigned total = pv[16 - C], magic_total = total + 0x4B000000u;
#pragma unroll
        for (int q = 0; q < Q; q++) {
            const int a = q + R, b = q - R - 1, as = a >= Q ? a - Q : a, bs = b < 0 ? b + Q : b;
            const unsigned hi = a >= Q ? __shfl_down_sync(0xFFFFFFFFu, pv[as], 1) : pv[as];
            const unsigned lo = b < -1 ? __shfl_up_sync(0xFFFFFFFFu, pv[bs] - total, 1)
                                       : b == -1 ? 0u : pv[bs];
            const unsigned biased = hi - lo + (a >= Q ? magic_total : 0x4B000000u);
            fv[q][0] = conv2d_div_odd(__uint_as_float(biased), mul);
        }
    } else {
        conv2d_scan_windows<C, CF, M>(pv, mul, fv);
    }
}

/* The prefix sums' walk along a strip whose rows, entering and leaving, all
 * lie inside the image, by a warp whose lanes all load their 16 aligned
 * bytes and store them whole where they write (conv2d_scan_kernel4 says
 * which): the rows' addresses without the border and the load tiers, the
 * first M - 1 rows summed four loads at a time, then each step's rows
 * fetched a step ahead into two sets of registers taken in turn. A loop
 * that copies the next step's registers into the current ones at its end
 * waits there for the loads it has just issued, with one row in flight a
 * warp; here the next row's loads are issued before that wait. The rows
 * stay in registers: through a ring in shared memory, several steps
 * ahead, the walk is slower (bench/RESULTS.md).
 * 'up': the walk goes from the strip's last row to its first, so that a
 * strip walking down and its neighbour walking up read the M - 1 rows
 * they share near the same time, the second read an L2 hit more often.
 * The leaving rows and the outputs are not read again: loaded and stored
 * evict-first, so that L2 keeps the rows still to leave (at 31x31 all
 * the warps' windows fill the H100's 50 MB). */
template <int C, int CF, int M>
__device__ __forceinline__ void conv2d_scan_walk(const fast_header &h, float mul, int xs, int y0,
                                                 int rows, bool writes, bool up)
{
    constexpr int Q = 16 / C, R = M / 2;
    const size_t rb = (size_t)h.width * C;
    const ptrdiff_t stride = up ? -(ptrdiff_t)rb : (ptrdiff_t)rb;
    const int yt = up ? y0 + rows - 1 + R : y0 - R, yo = up ? y0 + rows - 1 : y0;
    const unsigned char *const top = h.src + (size_t)yt * rb + (size_t)xs * C;
    unsigned char *const o = h.dst + (size_t)yo * rb + (size_t)xs * C;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    auto row = [&](int k) {  /* input row k of the walk: image row yt + k, or yt - k up */
        return __ldg(reinterpret_cast<const uint4 *>(top + (ptrdiff_t)k * stride));
    };
    auto gone = [&](int k) {  /* a row leaving the sums, read for the last time */
        return __ldcs(reinterpret_cast<const uint4 *>(top + (ptrdiff_t)k * stride));
    };
    unsigned cs[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
#pragma unroll 4
    for (int k = 0; k < M - 1; k++)
        conv2d_scan_columns(row(k), zero, cs);
    /* input row k enters, row k - M leaves, output row k - (M - 1) is
     * stored (its centre row k - R given where alpha is copied) */
    auto step = [&](int k, const uint4 &in, const uint4 &out, [[maybe_unused]] const uint4 &given) {
        conv2d_scan_columns(in, out, cs);
        float fv[Q][CF];
        conv2d_scan_row<C, CF, M>(cs, mul, fv, false, xs, 0, h);
        if (writes) {
            const unsigned words[4] = {given.x, given.y, given.z, given.w};
            conv2d_store_wide<C, CF, Q, true>(o + (ptrdiff_t)(k - (M - 1)) * stride, fv, words);
        }
    };
    const int last = rows + M - 2;  /* the strip's last input row */
    uint4 in_a = row(M - 1), out_a = zero, given_a = zero, in_b = zero, out_b = zero, given_b = zero;
    if constexpr (CF < C)
        given_a = row(R);
    for (int k = M - 1; k <= last; k += 2) {
        if (k + 1 <= last) {
            in_b = row(k + 1);
            out_b = gone(k + 1 - M);
            if constexpr (CF < C)
                given_b = row(k + 1 - R);
        }
        step(k, in_a, out_a, given_a);
        if (k + 1 > last)
            break;
        if (k + 2 <= last) {
            in_a = row(k + 2);
            out_a = gone(k + 2 - M);
            if constexpr (CF < C)
                given_a = row(k + 2 - R);
        }
        step(k + 1, in_b, out_b, given_b);
    }
}

/* Each warp takes conv2d_scan_outputs(C, M) columns of output pixels and a
 * strip of h.steps rows, walking down (inside the image, the odd strips
 * walk up: conv2d_scan_walk): input row k of the strip enters the
 * column sums, row k - M leaves them, each fetched one step ahead into
 * registers (the centre row too, where alpha is copied). The warps of the
 * grid take the columns of the first strip, then of the next, and so on,
 * whatever the block's size, so that no warp of a block is left without
 * columns (8 warps a block and 18 columns of warps, gray 8192 wide: 6 idle
 * warps in every third block). No shared
 * memory and no barrier; the shuffles need whole warps (the host gives
 * blocks of 32 to 256 threads, a multiple of 32). */
template <int C, int CF, int M>
__global__ void __launch_bounds__(kMaxThreads, 3) conv2d_scan_kernel4(const fast_args<1> a)
{
    constexpr int Q = 16 / C, R = M / 2, HL = conv2d_scan_left(C, M), HR = conv2d_scan_right(C, M);
    constexpr int OUT = conv2d_scan_outputs(C, M);
    const fast_header &h = a.h;
    const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
    const int lane = (int)(t & 31u);
    const long long warp = (long long)blockIdx.x * ((blockDim.x * blockDim.y) >> 5) + (t >> 5);
    const int columns = (h.width + OUT - 1) / OUT;  /* of warps */
    const long long x0 = warp % columns * OUT;  /* the warp's first output pixel */
    const long long strip = warp / columns;
    if (strip >= (h.height + h.steps - 1) / h.steps)
        return;  /* the whole warp */
    const int y0 = (int)strip * h.steps;
    const int rows = min(h.steps, h.height - y0);
    const int xs = (int)x0 - HL + lane * Q;  /* the lane's first pixel */
    const bool writes = lane >= HL / Q && lane < 32 - HR / Q && xs < h.width;
    const size_t row_bytes = (size_t)h.width * C;
    const bool inside = xs >= 0 && xs + Q <= h.width;
    /* on an aligned image at least 2 HL wide, the lanes off it load nothing
     * but the wrap border's: the pixels they mirror lie in the warp's own
     * columns (conv2d_scan_fix), so no lane gathers bytes at a memory
     * latency each, a row at a time (such edge warps set the kernel's time
     * when they did) */
    const bool mirrored = h.aligned && h.border != GF_BORDER_WRAP && h.width >= 2 * HL;
    const int first = (int)x0 - HL;  /* the warp's first pixel */
    const bool fix = mirrored && (first < 0 || first + 32 * Q > h.width);  /* the whole warp */
    const int tier = inside ? (h.aligned ? 2 : h.flat && row_bytes % 4 == 0 ? 1 : 0) : mirrored ? -1 : 0;
    /* as the running sums store: one 16-byte store where the row allows,
     * else conv2d_store (the right edge, other channels_filtered) */
    const bool wide = inside && h.vec && row_bytes % 16 == 0 && h.cf == CF;
    const float mul = 1.0f / h.scale[0];
    auto row_of = [&](int k) {  /* input row k of the strip: image row y0 - R + k */
        const int y = y0 - R + k;
        return y >= 0 && y < h.height ? y : gf_border_index(y, h.height, (gf_border)h.border);
    };
    /* strips whose rows all lie inside the image, by warps inside an
     * aligned image (nearly all of a large one's): conv2d_scan_walk. The
     * warps at its left and right edges, whose lanes off it take their
     * column sums by shuffles, stay below: the walk with those shuffles
     * spills (gray: 716 bytes stored, 1368 loaded, at 80 registers) and
     * runs slower. */
    if (y0 - R >= 0 && y0 + rows + R <= h.height && !fix &&
        __all_sync(0xFFFFFFFFu, tier == 2 && (wide || !writes))) {
        conv2d_scan_walk<C, CF, M>(h, mul, xs, y0, rows, writes, strip & 1);
        return;
    }
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    const int in_rows = rows + M - 1;
    uint4 in_next = conv2d_scan_load<C>(h, row_of(0), xs, tier), out_next = zero;
    [[maybe_unused]] uint4 given_next = zero;
    unsigned cs[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
    unsigned char *o = h.dst + (size_t)y0 * row_bytes + (size_t)max(xs, 0) * C;
    for (int k = 0; k < in_rows; k++) {
        const uint4 in = in_next, out = out_next;
        [[maybe_unused]] const uint4 given = given_next;
        if (k + 1 < in_rows) {
            in_next = conv2d_scan_load<C>(h, row_of(k + 1), xs, tier);
            out_next = k + 1 >= M ? conv2d_scan_load<C>(h, row_of(k + 1 - M), xs, tier) : zero;
            if constexpr (CF < C)  /* output row k + 1 - (M - 1): inside the image */
                if (k + 1 >= M - 1)
                    given_next = conv2d_scan_load<C>(h, y0 + k + 2 - M, xs, tier);
        }
        conv2d_scan_columns(in, out, cs);
        if (k >= M - 1) {  /* output row y0 + k - (M - 1) */
            float fv[Q][CF];
            conv2d_scan_row<C, CF, M>(cs, mul, fv, fix, xs, first, h);
            if (writes && wide) {
                const unsigned words[4] = {given.x, given.y, given.z, given.w};
                conv2d_store_wide<C, CF, Q>(o, fv, words);
            } else if (writes) {
                conv2d_store<C, CF, Q>(h, y0 + k - (M - 1), xs, fv);
            }
            o += row_bytes;
        }
    }
}

}  /* namespace */

#endif /* GF_KERNELS_CONV2D_SCAN_CUH */
