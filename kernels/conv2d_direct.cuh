/* conv2d_direct.cuh - version 4 of the 2-D correlation ("direct"): no
 * staging barrier. Each thread computes conv2d_rows4 rows x Q columns of
 * a tile, copying its Q + M - 1 input columns row by row from global
 * memory into its own ring of rows in shared memory (cp.async, kSlots4 - 1
 * rows ahead; the halo words beside its own bytes come from L1), M rows of
 * accumulators in registers, each output row finished and stored (16-byte
 * stores) as soon as its last input row is in. Versions 2 and 3 staged
 * rows per block and waited at a barrier, which left each SM one step of
 * loads in flight; here no warp waits for another.
 *
 * The arithmetic is chosen per mask by the plan, the first that fits
 * (conv2d_make_plan's order), each an instantiation of conv2d_kernel4
 * with DP naming the path (conv2d_common.cuh's path numbers):
 *   float (0)        one matrix of 3x3, 5x5 or 7x7, or a 3x3 gradient
 *                    pair without its zero taps; version 1's order.
 *   DP4A, DP2A       integer weights of 8 (16) bits: four byte products
 *                    and their sum in one instruction, no conversion.
 *   kSeparable4      a column times a row of bytes: row pass by DP4A,
 *                    column pass by FFMA (kBinomial4: a cascade of FADD;
 *                    kBox4: a running sum).
 *   kGradient4 + i   the Sobel, Prewitt and Scharr pairs on RGBA in 16-bit
 *                    lanes, two channels an instruction.
 *   kRunning4        RGBA box masks of 5x5 to 31x31 as running sums.
 * Every integer path's sums are exact, so every path returns the same
 * bytes. Masks whose outputs cannot leave 0..255 (kInRange) and masks of
 * one scaling mode get kernels of their own, with no clamp or no test of
 * the mode per output.
 *
 * In strips (h.steps > 1, conv2d_strips4) a block walks down several tiles,
 * each thread's rows going on through its ring, so that the M - 1 halo
 * rows and the setup are paid once a strip; the columns of threads at the
 * image's edges, whose rows are gathered through the border mapping at a
 * memory latency each, are given to edge blocks a tile at a time. */
#ifndef GF_KERNELS_CONV2D_DIRECT_CUH
#define GF_KERNELS_CONV2D_DIRECT_CUH

#include "conv2d_common.cuh"

namespace {

/* Output rows per thread and tile (a thread's strip is h.steps tiles):
 * 16 for RGBA 5x5, 7x7 and gradient pairs (their M - 1 halo rows and the
 * per-thread setup spread over twice the outputs), 8 for the rest (3x3 of
 * one matrix and gray are slower at 16, bench/RESULTS.md), 32 for 15x15
 * (each input row costs 15 rows of DP4A, and the first 14 feed no output
 * of the thread). */
template <int C, int K, int M>
__host__ __device__ constexpr int conv2d_rows4()
{
    return M > 7 ? 32 : C == 4 && (M >= 5 || K == 2) ? 16 : 8;
}

/* The halo of a row on either side of a thread's columns, M / 2 pixels,
 * in whole 32-bit words. */
__host__ __device__ constexpr int conv2d_halo4_words(int C, int M)
{
    return (M / 2 * C + 3) / 4;
}

/* The 32-bit words a thread reads of one input row, one slot of its ring:
 * the halo on either side and its own Q columns. */
__host__ __device__ constexpr int conv2d_ring4_words(int C, int Q, int M)
{
    return 2 * conv2d_halo4_words(C, M) + Q * C / 4;
}

/* Those words: SW on either side and OWN for the thread's own columns. */
template <int C, int Q, int M> struct row4 {
    static constexpr int RAD = M / 2, SW = conv2d_halo4_words(C, M), OWN = Q * C / 4,
                         NWD = conv2d_ring4_words(C, Q, M);
    static_assert(Q * C % 4 == 0 && Q * C <= 16, "a thread's own bytes are 1 to 4 whole words");
};

/* Rows a thread keeps in its ring in shared memory: kSlots4 - 1 of them
 * fetched ahead of the one it converts; 4 for masks over 7x7, whose rows
 * are 15 words and take long enough to compute (8 would need 123 KB of
 * shared memory for a block of 256 threads); 3 past 15x15 (the running
 * sums alone: 36 words a row for 31x31, twice over, 216 KB for 256
 * threads). */
__host__ __device__ constexpr int conv2d_slots4(int M)
{
    return M > 15 ? 3 : M > 7 ? 4 : 8;
}
template <int M> constexpr int kSlots4 = conv2d_slots4(M);

/* A thread's ring: S slots (kSlots4<M>; the running sums', twice that),
 * each one input row, in planes across the block's T threads so that a
 * warp's accesses to one plane are consecutive (no bank conflicts). The
 * own bytes are NV vectors of VB bytes (one 16- or 8-byte copy where Q * C
 * allows), then the halo, as NH vectors of HBYTES a side (words, but for
 * the running sums). Vectors wider than a word may cover more than the SW
 * halo words, PADW words a side, fetched and never read: the running sums'
 * rows are whole 16-byte vectors on the fast path (h.aligned: the row's
 * bytes and x * C multiples of 16), so the fast path's test for SW words
 * keeps the padded vectors inside the row too. Only the thread itself
 * writes and reads its slots, so no barrier is needed:
 * cp.async.wait_group orders its own copies. */
template <int C, int Q, int M, int S = kSlots4<M>, int HBYTES = 4> struct ring4 {
    using R = row4<C, Q, M>;
    static constexpr int VB = R::OWN == 4 ? 16 : R::OWN == 2 ? 8 : 4, NV = R::OWN * 4 / VB;
    /* the halo on either side as NH vectors of HB bytes (4: words) */
    static constexpr int HB = HBYTES, NH = (R::SW * 4 + HB - 1) / HB, PADW = NH * HB / 4 - R::SW;
    static constexpr int SLOT_BYTES = R::OWN * 4 + 2 * NH * HB;  /* one slot, both halos */
    static_assert(HB <= VB && (PADW == 0 || VB == 16), "halo vectors as aligned as the own ones");
    unsigned own0, halo0;  /* shared addresses of this thread's first vector and word */
    unsigned T;            /* the block's threads */
    /* base: the ring's shared address; t: this thread */
    __device__ ring4(unsigned base, unsigned t, unsigned threads)
        : own0(base + t * VB), halo0(base + S * R::OWN * 4 * threads + t * HB), T(threads)
    {
    }
    __device__ unsigned own(int slot, int v) const
    {
        return own0 + (unsigned)(slot * NV + v) * T * VB;
    }
    __device__ unsigned halo(int slot, int k) const
    {
        return halo0 + (unsigned)(slot * 2 * NH + k) * T * HB;
    }
};

/* The fast path's copies of one row into a slot, 'at' the thread's first
 * own byte of the row (the halo words come from L1, where the neighbouring
 * threads' own copies put them): the own bytes
 * as one 16- or 8-byte copy where Q * C allows, else as words; with
 * 'zero', zeros (a constant border's row off the image). Nothing passes
 * through registers, so the ring's depth costs none. */
template <class G>
__device__ __forceinline__ void conv2d_fetch4(const G &ring, int slot, const unsigned char *at, bool zero)
{
    using R = typename G::R;
#pragma unroll
    for (int v = 0; v < G::NV; v++)
        conv2d_copy_async<G::VB>(ring.own(slot, v), at + v * G::VB, zero);
#pragma unroll
    for (int s = 0; s < G::NH; s++) {
        conv2d_copy_async<G::HB>(ring.halo(slot, s), at - G::HB * (G::NH - s), zero);
        conv2d_copy_async<G::HB>(ring.halo(slot, G::NH + s), at + 4 * R::OWN + G::HB * s, zero);
    }
}

/* A shared vector of N bytes into the words o[0 .. N / 4 - 1]. */
template <int N>
__device__ __forceinline__ void conv2d_lds_words(unsigned *o, unsigned at)
{
    if constexpr (N == 16)
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(o[0]), "=r"(o[1]), "=r"(o[2]), "=r"(o[3]) : "r"(at) : "memory");
    else if constexpr (N == 8)
        asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(o[0]), "=r"(o[1]) : "r"(at) : "memory");
    else
        asm volatile("ld.shared.u32 %0, [%1];" : "=r"(o[0]) : "r"(at) : "memory");
}

/* A slot's words back into registers, in row order: halo, own, halo
 * (the padding words, the first PADW of the left halo's vectors and the
 * last PADW of the right's, dropped). */
template <class G>
__device__ __forceinline__ void conv2d_read4(const G &ring, int slot, unsigned (&w)[G::R::NWD])
{
    using R = typename G::R;
    constexpr int HW = G::HB / 4;  /* words of a halo vector */
#pragma unroll
    for (int s = 0; s < G::NH; s++) {
        unsigned v[2][HW];
        conv2d_lds_words<G::HB>(v[0], ring.halo(slot, s));
        conv2d_lds_words<G::HB>(v[1], ring.halo(slot, G::NH + s));
#pragma unroll
        for (int i = 0; i < HW; i++) {
            const int left = s * HW + i - G::PADW, right = s * HW + i;  /* halo words */
            if (left >= 0)
                w[left] = v[0][i];
            if (right < R::SW)
                w[R::SW + R::OWN + right] = v[1][i];
        }
    }
#pragma unroll
    for (int v = 0; v < G::NV; v++)
        conv2d_lds_words<G::VB>(&w[R::SW + v * G::VB / 4], ring.own(slot, v));
}

/* The Q + M - 1 pixels x - M/2 .. x + Q - 1 + M/2 of input row ym (mapped
 * through the border already; -1 is the constant border's zero row), CF
 * channels each, as floats: from the fetched words (byte positions known at
 * compile time) or, off the fast path, pixel by pixel through the border. */
template <int C, int CF, int Q, int M>
__device__ __forceinline__ void conv2d_pixels4(const fast_header &h, int ym, int x, bool fast,
                                               const unsigned (&w)[row4<C, Q, M>::NWD],
                                               float (&px)[Q + M - 1][CF])
{
    using R = row4<C, Q, M>;
    constexpr int N = Q + M - 1;
    if (ym < 0) {
#pragma unroll
        for (int i = 0; i < N; i++)
#pragma unroll
            for (int c = 0; c < CF; c++)
                px[i][c] = 0.0f;
    } else if (fast) {
#pragma unroll
        for (int i = 0; i < N; i++)
#pragma unroll
            for (int c = 0; c < CF; c++) {
                const int b = 4 * R::SW - R::RAD * C + i * C + c;  /* byte of w */
                px[i][c] = conv2d_byte(w[b / 4], b % 4);
            }
    } else {
        const unsigned char *row = h.src + (size_t)ym * h.width * C;
#pragma unroll
        for (int i = 0; i < N; i++) {
            const int xi = gf_border_index(x - R::RAD + i, h.width, (gf_border)h.border);
#pragma unroll
            for (int c = 0; c < CF; c++)
                px[i][c] = xi < 0 ? 0.0f : (float)row[(size_t)xi * C + c];
        }
    }
}

/* ---- version 4, integer weights: DP4A ---------------------------------------
 * Masks whose weights are integers of -128..127 (every built-in one) on gray
 * and RGBA images take this path: the sums are exact integers either way, so
 * the bytes are version 1's, and one DP4A multiplies four pixel bytes by
 * four weights and adds them, with no conversion of the bytes to float. A
 * row's bytes are regrouped once per channel into "windows": window (q, k)
 * holds bytes 4k .. 4k + 3 of output q's M input pixels, weights past M are
 * 0. Gray windows are the fetched words realigned with PRMT; RGBA pixels
 * are transposed into one word per channel first (8 PRMT per 4 pixels). */
template <int M> struct dp4 {
    static constexpr int WW = (M + 3) / 4;  /* words per window */
};

/* kSeparable4, the separable integer path: masks that factor as an integer column
 * times a row of -128..127 (5x5 to 9x9), sums below 2^22.
 * Each input row gets the row pass once per output column (WW DP4A per
 * channel), and the column pass is one FFMA per mask row: for 7x7, 2 DP4A
 * + 8 float instructions per pixel and channel instead of 28 DP2A. The
 * parameters are the row's WW packed words, then the M column weights as
 * floats. */
/* kBinomial4 and kBox4: two kinds of column of that path whose column pass needs no multiply
 * (kernels of their own, one scaling mode each): binomial columns C(M-1, i)
 * (gaussian5, gaussian7), whose column pass is M - 1 FADD, a cascade of
 * M - 1 two-tap sums s_k(r) = s_{k-1}(r) + s_{k-1}(r - 1) (the filter
 * (1 + z)^(M-1)), with s_0 the row pass; and columns of ones (box5, box7,
 * box9), a running sum of the last M row passes, 2 FADD. Every partial sum
 * is an exact integer below 2^22, as the full one is, so the bytes are the
 * same as M FFMA's. conv2d_direct_integer() reports both as
 * CONV2D_SEPARABLE_INTEGER. */
__host__ __device__ constexpr bool conv2d_separable4(int dp)
{
    return dp >= kSeparable4 && dp <= kBox4;
}
static_assert(CONV2D_DP4A == 1 && CONV2D_DP2A == 2, "the DP template argument");

/* acc + the dot product of four unsigned pixel bytes and four signed weights */
__device__ __forceinline__ int conv2d_dp4a(unsigned pixels, unsigned weights, int acc)
{
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(pixels), "r"(weights), "r"(acc));
    return d;
}

/* acc + the dot product of two signed 16-bit weights and pixel bytes 0, 1
 * (HI false) or 2, 3 (HI true) */
template <bool HI>
__device__ __forceinline__ int conv2d_dp2a(unsigned weights, unsigned pixels, int acc)
{
    int d;
    if (HI)
        asm("dp2a.hi.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(weights), "r"(pixels), "r"(acc));
    else
        asm("dp2a.lo.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(weights), "r"(pixels), "r"(acc));
    return d;
}

/* Bytes o .. o + 3 of a byte stream held in words (o known at compile
 * time); bytes past the last word are 0. */
template <int NS>
__device__ __forceinline__ unsigned conv2d_window(const unsigned (&s)[NS], int o)
{
    const int i = o / 4, sh = o % 4;
    const unsigned lo = i < NS ? s[i] : 0u, hi = i + 1 < NS ? s[i + 1] : 0u;
    return sh == 0 ? lo : __byte_perm(lo, hi, 0x3210u + 0x1111u * (unsigned)sh);
}

/* Off the fast path: the row's words gathered pixel by pixel through the
 * border (row -1, the constant border's, is all zeros). */
template <int C, int Q, int M>
__device__ __forceinline__ void conv2d_gather4(const fast_header &h, int ym, int x,
                                               unsigned (&w)[row4<C, Q, M>::NWD])
{
    using R = row4<C, Q, M>;
#pragma unroll
    for (int k = 0; k < R::NWD; k++)
        w[k] = 0u;
    if (ym < 0)
        return;
    const unsigned char *row = h.src + (size_t)ym * h.width * C;
#pragma unroll
    for (int i = 0; i < Q + M - 1; i++) {
        const int xi = gf_border_index(x - R::RAD + i, h.width, (gf_border)h.border);
#pragma unroll
        for (int c = 0; c < C; c++) {
            const int b = 4 * R::SW - R::RAD * C + i * C + c;  /* byte of w */
            const unsigned v = xi < 0 ? 0u : row[(size_t)xi * C + c];
            w[b / 4] |= v << (8 * (b % 4));
        }
    }
}

/* The running sums' rows off the fast path: input row ym[0] and the row
 * leaving the sums, ym[1], RGBA. The columns are mapped first and every
 * load (a pixel's word) is issued before the first is used, so that both
 * rows cost one memory latency: the columns at the image's edges take this
 * path for every row, and conv2d_gather4 waits for its loads one at a time
 * (the border's branches between them), which would make the edge columns
 * set the kernel's time. With a source that is
 * not 4-byte aligned, the rows one after the other, by conv2d_gather4. */
template <int Q, int M>
__device__ __forceinline__ void conv2d_gather_pair4(const fast_header &h, const int (&ym)[2], int x,
                                                    unsigned (&in)[Q + M - 1], unsigned (&out)[Q + M - 1])
{
    constexpr int N = Q + M - 1, RAD = M / 2;  /* word j: pixel x - RAD + j */
    if (!h.flat) {
        conv2d_gather4<4, Q, M>(h, ym[0], x, in);
        conv2d_gather4<4, Q, M>(h, ym[1], x, out);
        return;
    }
    int xi[N];
#pragma unroll
    for (int j = 0; j < N; j++)
        xi[j] = gf_border_index(x - RAD + j, h.width, (gf_border)h.border);
    const unsigned *row0 = reinterpret_cast<const unsigned *>(h.src) + (size_t)max(ym[0], 0) * h.width;
    const unsigned *row1 = reinterpret_cast<const unsigned *>(h.src) + (size_t)max(ym[1], 0) * h.width;
#pragma unroll
    for (int j = 0; j < N; j++) {
        in[j] = __ldg(row0 + max(xi[j], 0));
        out[j] = __ldg(row1 + max(xi[j], 0));
    }
#pragma unroll
    for (int j = 0; j < N; j++) {  /* the constant border's zeros */
        in[j] = ym[0] < 0 || xi[j] < 0 ? 0u : in[j];
        out[j] = ym[1] < 0 || xi[j] < 0 ? 0u : out[j];
    }
}

/* The windows of one input row: win[c][q][k] for the CF channels and Q
 * outputs of the thread (gray: C = 1; RGBA: C = 4, where SW = RAD, so word
 * j is pixel x - RAD + j). */
template <int C, int CF, int Q, int M>
__device__ __forceinline__ void conv2d_windows4(const unsigned (&w)[row4<C, Q, M>::NWD],
                                                unsigned (&win)[CF][Q][dp4<M>::WW])
{
    using R = row4<C, Q, M>;
    constexpr int WW = dp4<M>::WW;
    static_assert(C == 1 || C == 4, "gray or RGBA");
    if constexpr (C == 1) {
#pragma unroll
        for (int q = 0; q < Q; q++)
#pragma unroll
            for (int k = 0; k < WW; k++)
                win[0][q][k] = conv2d_window(w, 4 * R::SW - R::RAD + q + 4 * k);
    } else {
        constexpr int NG = (R::NWD + 3) / 4;
        unsigned plane[CF][NG];
#pragma unroll
        for (int g = 0; g < NG; g++) {
            auto px = [&](int j) { return 4 * g + j < R::NWD ? w[4 * g + j] : 0u; };
            const unsigned t0 = __byte_perm(px(0), px(1), 0x5140u),  /* a0 b0 a1 b1 */
                t1 = __byte_perm(px(2), px(3), 0x5140u),             /* c0 d0 c1 d1 */
                t2 = __byte_perm(px(0), px(1), 0x7362u),             /* a2 b2 a3 b3 */
                t3 = __byte_perm(px(2), px(3), 0x7362u);             /* c2 d2 c3 d3 */
            plane[0][g] = __byte_perm(t0, t1, 0x5410u);
            plane[1][g] = __byte_perm(t0, t1, 0x7632u);
            plane[2][g] = __byte_perm(t2, t3, 0x5410u);
            if constexpr (CF == 4)
                plane[CF - 1][g] = __byte_perm(t2, t3, 0x7632u);
        }
#pragma unroll
        for (int c = 0; c < CF; c++)
#pragma unroll
            for (int q = 0; q < Q; q++)
#pragma unroll
                for (int k = 0; k < WW; k++)
                    win[c][q][k] = conv2d_window(plane[c], q + 4 * k);
    }
}

/* ---- version 4, 3x3 gradient pairs in 16-bit lanes --------------------------
 * The Sobel, Prewitt and Scharr pairs on RGBA. Their x gradient is a column
 * u = (p, w, p) times the row (-1, 0, 1), their y gradient the transpose,
 * so both come from two row passes of each input row, d = right - left and
 * s = p (left + right) + w centre, and two column passes, gx = p (d(r - 2)
 * + d(r)) + w d(r - 1) and gy = s(r) - s(r - 2). Those are small integers
 * (|g| <= 16 x 255), so two channels share each 32-bit instruction: a
 * pixel word splits into R, B and G, A in 16-bit lanes (a LOP3 and a
 * PRMT), and biases (256 a lane on d, (2p + w) 256 on the gradients) keep
 * every lane inside 0..65535, so no lane borrows from or carries into the
 * next and the lanes are the exact gradients plus their bias. The DP4A
 * pair spends 6 DP4A a channel and input row, after regrouping the bytes
 * by channel; this spends ~6 integer instructions per two channels. Each
 * gradient reaches a float with a PRMT (2^23 + the lane) and one exact
 * FADD or FFMA, then version 1's finishing: the same bytes.
 *
 * kGradient4 + i is the kind kGradients4[i]. With 'integer_sqrt' the
 * kernel takes matrices of scale 1 only, whose sum of squares n is an
 * integer: sqrt(n) lies at least 0.25 / (2 x 255.5) ~ 4.9e-4 from any
 * half-integer below 255.5 (n - (k + 1/2)^2 is at least 1/4 away from 0),
 * far beyond sqrt.approx's error there (a few ulp of 255, 1.5e-5 each), so
 * MUFU.SQRT alone rounds to the same byte as sqrt.rn (3 instructions
 * instead of 8; test_cuda_direct_gradient_lanes runs every pair of
 * gradients of 0..255). Scharr's scale (4) makes ties possible (n / 16 =
 * 6.25: 2.5), so its kernel keeps conv2d_magnitude. */
struct conv2d_gradient_kind {
    int p, w;           /* the column u = (p, w, p) */
    bool integer_sqrt;  /* scale 1 only: MUFU.SQRT */
};
constexpr conv2d_gradient_kind kGradients4[] = {{1, 2, true},     /* Sobel */
                                                {1, 1, true},     /* Prewitt */
                                                {3, 10, false}};  /* Scharr */
__host__ __device__ constexpr bool conv2d_gradient4(int dp)
{
    return dp >= kGradient4 && dp < kGradient4 + kGradientKinds4;
}

/* Channel c's lane of a pixel's two lane pairs (lane c / 2 of pair c % 2)
 * as the float 2^23 + the lane: one PRMT. */
__device__ __forceinline__ float conv2d_lane_float(const unsigned (&pairs)[2], int c)
{
    return __uint_as_float(__byte_perm(pairs[c % 2], 0x4B000000u, c / 2 ? 0x7432u : 0x7410u));
}

/* A thread's row passes of the last two input rows, per output and lane
 * pair (0: R, B; 1: G, A): d and s of rows r - 1 and r - 2. */
template <int Q> struct conv2d_lanes4 {
    unsigned d1[Q][2], d2[Q][2], s1[Q][2], s2[Q][2];
    unsigned own[Q];  /* row r - 1's words of the thread's own pixels (its alpha) */
};

/* Input row r (the RGBA words of pixels x - 1 .. x + Q) into the lanes:
 * gx and gy of output row r - 1, each lane its gradient + kBias. */
template <int G, int Q>
__device__ __forceinline__ void conv2d_gradient_row4(const unsigned (&px)[Q + 2], conv2d_lanes4<Q> &st,
                                                     unsigned (&gx)[Q][2], unsigned (&gy)[Q][2])
{
    constexpr unsigned P = kGradients4[G].p, W = kGradients4[G].w, kLane = 0x00010001u;
    constexpr unsigned kBias = (2 * P + W) * 256u * kLane;
    unsigned lane[Q + 2][2];
#pragma unroll
    for (int j = 0; j < Q + 2; j++)
#pragma unroll
        for (int l = 0; l < 2; l++)
            lane[j][l] = conv2d_lane_pair(px[j], l);
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int l = 0; l < 2; l++) {
            const unsigned a = lane[q][l], b = lane[q + 1][l], c = lane[q + 2][l];
            const unsigned d = c - a + 256u * kLane, s = P * (a + c) + W * b;
            gx[q][l] = P * (d + st.d2[q][l]) + W * st.d1[q][l];
            gy[q][l] = s - st.s2[q][l] + kBias;
            st.d2[q][l] = st.d1[q][l];
            st.d1[q][l] = d;
            st.s2[q][l] = st.s1[q][l];
            st.s1[q][l] = s;
        }
}

/* The thread's Q outputs of a row from its gradients' lanes, as
 * conv2d_value returns them: the magnitude of (gx / scale0, gy / scale1)
 * per channel. Channel c is lane c / 2 of pair c % 2. */
template <int CF, int Q, int G>
__device__ __forceinline__ void conv2d_gradient_finish4(const unsigned (&gx)[Q][2], const unsigned (&gy)[Q][2],
                                                        const float (&mul)[2], float (&fv)[Q][CF])
{
    constexpr float kBase = kMagic + (float)((2 * kGradients4[G].p + kGradients4[G].w) * 256);
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int c = 0; c < CF; c++) {
            const float lx = conv2d_lane_float(gx[q], c), ly = conv2d_lane_float(gy[q], c);
            float rx, ry;  /* the responses, exact: (lane - kBase) times a power of two */
            if constexpr (kGradients4[G].integer_sqrt) {
                rx = __fadd_rn(lx, -kBase);
                ry = __fadd_rn(ly, -kBase);
            } else {
                rx = __fmaf_rn(lx, mul[0], -kBase * mul[0]);
                ry = __fmaf_rn(ly, mul[1], -kBase * mul[1]);
            }
            const float v = __fmaf_rn(ry, ry, __fmul_rn(rx, rx));  /* conv2d_value's order */
            fv[q][c] = kGradients4[G].integer_sqrt
                           ? __fadd_rn(conv2d_mufu_sqrt<false>(fminf(v, 65025.0f)), kMagic)
                           : conv2d_magnitude(v);
        }
}

/* ---- version 4, box masks as running sums on RGBA (kRunning4) --------------
 * Masks of ones over an odd integer, 5x5 to 31x31 (box5, box9, box15, box31).
 * Output row j's column sums are row j - 1's plus the row pass of the input
 * row that enters the window minus that of the one that leaves it, M rows
 * up: the leaving row is fetched again (from L1 or L2: the thread fetched
 * it M steps before) into a second set of slots of the ring, so no delay
 * line of M row passes is kept (kBox4 keeps one in registers, one RGBA
 * pixel a thread: 36 registers and 32 moves a step for 9x9). Each row pass
 * is a running sum along the row too (two instructions an output after the
 * first), so the work per pixel hardly grows with M. The words split into
 * 16-bit lanes (R, B and G, A, as kGradient4's) and every sum runs on both
 * lanes of a word at once: the column sums stay below M^2 x 255 < 2^16
 * (M <= 15), so whatever borrows pass between the lanes along the way
 * (differences are negative), the final lanes are the exact sums (addition
 * mod 2^32 is exact, and each lane's result is in 0..65535). From 17x17 on
 * the column sums pass 16 bits (31 x 31 x 255 < 2^18), and only the row
 * passes stay in lanes (M x 255 < 2^16): each change of a column sum, the
 * difference of two row passes, splits into its two signed lanes (exact:
 * each lies within +-M x 255), added to one 32-bit sum per channel. Exact
 * integer sums, then MODE_DIV_ODD's FFMA: kBox4's bytes. */

/* The slots of a kernel's ring: kSlots4 for the rows ahead, and as many
 * again for the rows leaving the running sums. */
__host__ __device__ constexpr int conv2d_ring_slots4(int M, int DP)
{
    return (DP == kRunning4 ? 2 : 1) * conv2d_slots4(M);
}

/* The bytes of each copy of the halo: 4 (words, each kernel but the
 * running sums'), else the narrowest of 4, 8 and 16 that takes the fewest
 * copies, the halo padded to whole copies (ring4's PADW): 7x7 and 11x11 to
 * 15x15 take one or two 16-byte copies a side instead of 3 to 7 words or
 * three 8-byte copies, 5x5 one 8-byte copy: the time grows with the
 * number of copies, not their bytes. */
__host__ __device__ constexpr int conv2d_halo_bytes4(int C, int Q, int M, int DP)
{
    const int sw = 4 * conv2d_halo4_words(C, M);
    int best = 4;
    for (int b = 8; b <= 16 && DP == kRunning4 && Q * C % b == 0; b *= 2)
        if ((sw + b - 1) / b < (sw + best - 1) / best)
            best = b;
    return best;
}

/* The shared bytes of one slot of a thread's ring: its own bytes and both
 * halos, padded to whole copies. */
__host__ __device__ constexpr int conv2d_slot_bytes4(int C, int Q, int M, int DP)
{
    const int hb = conv2d_halo_bytes4(C, Q, M, DP);
    return Q * C + 2 * ((4 * conv2d_halo4_words(C, M) + hb - 1) / hb) * hb;
}

/* The column sums of a thread's Q outputs: lane pairs (R, B) and (G, A)
 * up to 15x15; past it (WIDE) one sum per channel, R, G, B, A, kept as the
 * bits of the float 2^23 + the sum (0 <= sum < 2^23). */
template <int Q, int M> struct conv2d_running4 {
    static constexpr bool WIDE = M > 15;
    unsigned col[Q][WIDE ? 4 : 2];
    __device__ static conv2d_running4 start()
    {
        conv2d_running4 st;
#pragma unroll
        for (int q = 0; q < Q; q++)
#pragma unroll
            for (int c = 0; c < (WIDE ? 4 : 2); c++)
                st.col[q][c] = WIDE ? 0x4B000000u : 0u;
        return st;
    }
};

/* The column sums of output row r - (M - 1) from those of the row before:
 * + the row pass of input row r ('in', the words of pixels x - M / 2 ..
 * x + Q - 1 + M / 2) - that of input row r - M ('out'). */
template <int Q, int M>
__device__ __forceinline__ void conv2d_running_row4(const unsigned (&in)[Q + M - 1],
                                                    const unsigned (&out)[Q + M - 1],
                                                    conv2d_running4<Q, M> &st)
{
    constexpr int N = Q + M - 1;
#pragma unroll
    for (int l = 0; l < 2; l++) {
        unsigned a[N], b[N];
#pragma unroll
        for (int j = 0; j < N; j++) {
            a[j] = conv2d_lane_pair(in[j], l);
            b[j] = conv2d_lane_pair(out[j], l);
        }
        unsigned sa = 0, sb = 0;  /* the row passes of output q, lanes of pair l */
#pragma unroll
        for (int j = 0; j < M; j++) {
            sa += a[j];
            sb += b[j];
        }
#pragma unroll
        for (int q = 0; q < Q; q++) {
            if (q > 0) {
                sa += a[q + M - 1] - a[q - 1];
                sb += b[q + M - 1] - b[q - 1];
            }
            const unsigned d = sa - sb;
            if constexpr (conv2d_running4<Q, M>::WIDE) {
                /* its lanes, signed: channels l and l + 2 */
                const int lo = (short)(d & 0xFFFFu), hi = ((int)d - lo) >> 16;
                st.col[q][l] += lo;
                st.col[q][l + 2] += hi;
            } else {
                st.col[q][l] += d;
            }
        }
    }
}

/* Output row r - (M - 1) from the column sums, as conv2d_value returns it:
 * rint(sum / d) by MODE_DIV_ODD's FFMA (no clamp: in range), the sum from
 * 2^23 + its lane by a FADD. */
template <int CF, int Q, int M>
__device__ __forceinline__ void conv2d_running_finish4(const conv2d_running4<Q, M> &st, float mul,
                                                       float (&fv)[Q][CF])
{
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int c = 0; c < CF; c++) {
            float v;
            if constexpr (conv2d_running4<Q, M>::WIDE)
                v = __uint_as_float(st.col[q][c]);
            else
                v = conv2d_lane_float(st.col[q], c);
            fv[q][c] = conv2d_div_odd(v, mul);
        }
}

/* a bool known at compile time, for conv2d_body4's copies of its loop */
template <bool B> struct conv2d_flag {
    __host__ __device__ constexpr operator bool() const { return B; }
};

/* conv2d_rows4 x steps output rows of Q columns per thread. Input rows
 * stream top to bottom in a loop that is not unrolled (a fully unrolled
 * strip was ~17 K instructions, and two thirds of the warps' cycles went
 * to instruction fetch). Each step copies the row kSlots4<M> - 1 ahead
 * into the thread's ring in shared memory (cp.async: no registers held
 * while in flight), waits for its own row and reads it back. The loop body
 * is written out three times so that the 3x3 accumulators rotate by
 * renaming, not by moves. acc[i] holds output row r - i, so input row r is mask row i of
 * acc[i]: every output gets its mask rows in order and, within a row, its
 * columns in order, version 1's summation order, hence version 1's bytes
 * (the DP4A path's sums are exact integers: the same bytes). After row r,
 * acc[M - 1] is complete: it is finished and stored (16-byte stores), and
 * the accumulators shift by one. MODE: how the sums are scaled (for 3x3
 * masks the kernel picks one copy of the whole loop per mode, so that no
 * output branches on it; kModeAny: h.mode, tested per output). The gray
 * 3x3 gradient pairs also keep one copy per value of 'fast'. */
template <int C, int CF, int K, int M, int Q, unsigned ZERO, int DP, int MODE, bool IN_RANGE = false>
__device__ __forceinline__ void conv2d_body4(const fast_args<K * M * M> &a, int x, int y0, int steps)
{
    using R = row4<C, Q, M>;
    const fast_header &h = a.h;
    /* input rows of the thread's strip: 'steps' tiles of conv2d_rows4 rows,
     * one ring all the way down */
    const int IN = conv2d_rows4<C, K, M>() * steps + M - 1;
    constexpr int N = Q + M - 1;
    constexpr int COMB = K == 1 ? COMB_SUM : COMB_MAG;
    const bool fast_rt = h.aligned && x * C >= 4 * R::SW && (x + Q) * C + 4 * R::SW <= h.width * C;
    const size_t row_bytes = (size_t)h.width * C;
    const bool div = MODE == MODE_DIV || (MODE == kModeAny && h.mode == MODE_DIV);
    const int rows = min(IN, h.height - y0 + M - 1);  /* input rows that feed an output */
    const bool inside = y0 >= R::RAD && y0 - R::RAD + IN <= h.height;  /* no row off the image */
    auto row_of = [&](int r) {
        return inside ? y0 - R::RAD + r : gf_border_index(y0 - R::RAD + r, h.height, (gf_border)h.border);
    };
    extern __shared__ uint4 conv2d_shared4[];
    /* the box masks' running sums: rows leaving the sums in slots S .. 2S - 1 */
    constexpr bool box_run = DP == kRunning4;
    constexpr int S = kSlots4<M>;
    using G = ring4<C, Q, M, conv2d_ring_slots4(M, DP), conv2d_halo_bytes4(C, Q, M, DP)>;
    static_assert(G::SLOT_BYTES == conv2d_slot_bytes4(C, Q, M, DP),
                  "the host sizes the ring (conv2d_make_plan) as the kernel lays it out");
    const G ring((unsigned)__cvta_generic_to_shared(conv2d_shared4),
                 threadIdx.y * blockDim.x + threadIdx.x, blockDim.x * blockDim.y);
    const unsigned char *const column = h.src + (size_t)x * C;  /* the thread's bytes of row 0 */
    /* inside: the next row to fetch, one row further at each fetch (a
     * pointer add, with the halo copies at constant offsets from it), except
     * for RGBA 3x3 with alpha copied, which spilled at its 80 registers
     * with the pointer's two */
    constexpr bool running = !(C == 4 && CF == 3 && K == 1 && M == 3 && DP != 0);
    const unsigned char *next = running && inside ? column + (size_t)(y0 - R::RAD) * row_bytes : column;
    /* the strip: 'fast' a constant where the kernel keeps two copies of
     * its loop (the gray 3x3 gradient pairs: the fast path's copy has no
     * branch around the gathers; 7% on gray sobel, where RGBA sobel lost
     * 2%, in lanes 4%, and gray box3 spilled) */
    auto strip = [&](auto fast_v) {
        const bool fast = fast_v;
        auto fetch = [&](int r) {  /* row r (each r once, in order) into its slot, as one group */
            if (running && fast && r < rows && inside) {
                conv2d_fetch4(ring, r % S, next, false);
                if constexpr (box_run)  /* row r - M, zeros before the first */
                    conv2d_fetch4(ring, S + r % S, r < M ? next : next - M * row_bytes, r < M);
            } else if (fast && r < rows) {  /* the constant border's row -1: row 0's address */
                const int ym = row_of(r);
                /* zeros for the integer paths, which read the slot as it is (the
                 * float path tests ym itself) */
                conv2d_fetch4(ring, r % S, column + (size_t)max(ym, 0) * row_bytes, DP != 0 && ym < 0);
                if constexpr (box_run) {
                    const int yo = r < M ? -1 : row_of(r - M);
                    conv2d_fetch4(ring, S + r % S, column + (size_t)max(yo, 0) * row_bytes, yo < 0);
                }
            }
            if (running && inside)
                next += row_bytes;
            conv2d_copy_commit();  /* an empty group past the last row keeps the count */
        };
        typename std::conditional<DP != 0, int, float>::type acc[M][Q][K][CF];
        /* DP: the accumulators start at 0x4B400000, the float 1.5 * 2^23, so
         * that (|sum| < 2^22) their bits are the float 1.5 * 2^23 + sum: one
         * FFMA makes the sum times 1 / scale when it is prescaled (a power of
         * two: exact), and with 2^23 added (top) also rounds it half to even,
         * like conv2d_value's FADD of 2^23 after its clamp (the clamp commutes
         * with the rounding: [0, 255] becomes [2^23, 2^23 + 255]) */
        [[maybe_unused]] constexpr int kAccStart = 0x4B400000;  /* unread on the float path */
        /* one matrix prescaled with no offset (gaussian): one FFMA and a clamp
         * per output */
        constexpr bool quick = K == 1 && (MODE == MODE_PRESCALED_NO_OFFSET || MODE == MODE_DIV_ODD);
        /* the cascades' sums are plain floats, not biased (kBinomial4, kBox4:
         * kernels of one quick mode each) */
        constexpr bool cascade = DP == kBinomial4 || DP == kBox4;
        static_assert((!cascade && !box_run && !IN_RANGE) || quick, "quick outputs only");
        static_assert(!box_run || (C == 4 && K == 1 && MODE == MODE_DIV_ODD && IN_RANGE && M <= 31 &&
                                   Q * C == 16 && R::SW == R::RAD),
                      "RGBA box masks over an odd integer, in range, 4 pixels a thread");
        [[maybe_unused]] conv2d_running4<Q, M> sums = conv2d_running4<Q, M>::start();
        /* the gradient pairs in lanes: their own row passes and outputs */
        constexpr bool gradient = conv2d_gradient4(DP);
        static_assert(!gradient || (C == 4 && K == 2 && M == 3 && MODE == MODE_PRESCALED_NO_OFFSET),
                      "RGBA 3x3 gradient pairs, prescaled without offsets");
        [[maybe_unused]] conv2d_lanes4<Q> lanes = {};
        /* those outputs' rows, when every channel is computed and the row's
         * bytes are aligned (fast: the rows' length; h.vec: both buffers):
         * one store at a running pointer, no address arithmetic or alignment
         * test per row; the same for the lanes kernels, whose copied channels
         * come from registers */
        constexpr bool kWide = ((quick && CF == C) || gradient || box_run) && (Q * C == 4 || Q * C == 8 || Q * C == 16);
        /* both unread where kWide is false (the float path, the DP4A gradient pairs) */
        [[maybe_unused]] const bool wide = kWide && fast && h.vec && h.cf == CF && x + Q <= h.width;
        [[maybe_unused]] unsigned char *out = h.dst + ((size_t)y0 * h.width + x) * C;  /* output row y0 */
        float mul[K], sub[K], top[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            mul[k] = div ? 1.0f : 1.0f / h.scale[k];
            sub[k] = -12582912.0f * mul[k];
            /* MODE_DIV_ODD: the bias is taken off first (exact), as
             * -12582912 / d would be rounded */
            top[k] = MODE == MODE_DIV_ODD || cascade ? kMagic : sub[k] + kMagic;
        }
        auto finish = [&](int y, const float (&sums)[Q][K][CF]) {
            conv2d_finish_row<C, CF, K, Q>(sums, h, y, x, [&](const float (&s)[K]) {
                if constexpr (MODE == kModeAny)
                    return div ? conv2d_value<MODE_DIV, COMB, K>(s, h)
                               : conv2d_value<MODE_PRESCALED, COMB, K>(s, h);
                else
                    return conv2d_value<MODE, COMB, K>(s, h);
            });
        };
        auto step = [&](int r) {
            fetch(r + S - 1);  /* into the slot row r - 1 left */
            unsigned mine[R::NWD];
            [[maybe_unused]] unsigned leaving[R::NWD];  /* box_run: row r - M */
            if (fast) {
                conv2d_copy_wait<S - 1>();  /* row r's group is in */
                conv2d_read4(ring, r % S, mine);
                if constexpr (box_run)
                    conv2d_read4(ring, S + r % S, leaving);
            }
            if constexpr (box_run) {
                if (!fast) {  /* both rows at one memory latency */
                    const int ym[2] = {row_of(r), r < M ? -1 : row_of(r - M)};
                    conv2d_gather_pair4<Q, M>(h, ym, x, mine, leaving);
                }
                conv2d_running_row4<Q, M>(mine, leaving, sums);
                if (r >= M - 1) {  /* output row r - (M - 1) */
                    float fv[Q][CF];
                    conv2d_running_finish4<CF, Q, M>(sums, mul[0], fv);
                    if (wide) {
                        unsigned given[Q * C / 4];  /* the copied channels' source words */
                        if constexpr (CF < C) {
                            const uint4 v = __ldg(reinterpret_cast<const uint4 *>(h.src + (out - h.dst)));
                            given[0] = v.x, given[1] = v.y, given[2] = v.z, given[3] = v.w;
                        }
                        conv2d_store_wide<C, CF, Q>(out, fv, given);
                    } else {
                        conv2d_store<C, CF, Q>(h, y0 + r - (M - 1), x, fv);
                    }
                    out += row_bytes;
                }
            } else if constexpr (gradient) {
                if (!fast)
                    conv2d_gather4<C, Q, M>(h, row_of(r), x, mine);
                unsigned gx[Q][2], gy[Q][2];
                conv2d_gradient_row4<DP - kGradient4, Q>(mine, lanes, gx, gy);
                if (r >= M - 1) {  /* output row r - 1 of the image's rows y0 - 1 .. */
                    float fv[Q][CF];
                    conv2d_gradient_finish4<CF, Q, DP - kGradient4>(gx, gy, mul, fv);
                    /* alpha from the centre row's words, still in registers */
                    if (wide)
                        conv2d_store_wide<C, CF, Q>(out, fv, lanes.own);
                    else
                        conv2d_store<C, CF, Q>(h, y0 + r - (M - 1), x, fv, lanes.own);
                    out += row_bytes;
                }
#pragma unroll
                for (int q = 0; q < Q; q++)
                    lanes.own[q] = mine[R::SW + q];
            } else if constexpr (DP) {
                if (!fast)
                    conv2d_gather4<C, Q, M>(h, row_of(r), x, mine);
                constexpr int WW = dp4<M>::WW;
                unsigned win[CF][Q][WW];
                conv2d_windows4<C, CF, Q, M>(mine, win);
                if constexpr (!cascade) {
#pragma unroll
                    for (int q = 0; q < Q; q++)  /* output row r starts */
#pragma unroll
                        for (int k = 0; k < K; k++)
#pragma unroll
                            for (int c = 0; c < CF; c++)
                                acc[0][q][k][c] = kAccStart;
                }
                /* the cascades: the sums of output row r - (M - 1), complete */
                [[maybe_unused]] float done[Q][CF];
                if constexpr (conv2d_separable4(DP)) {
                    /* the row pass: one DP4A chain per output and channel, its
                     * sum h biased like the accumulators (|h| < 2^22), then
                     * h as a float (exact) times each column weight into the M
                     * rows in progress: exact integer products and sums */
                    float hf[Q][CF];
#pragma unroll
                    for (int q = 0; q < Q; q++)
#pragma unroll
                        for (int c = 0; c < CF; c++) {
                            int s = kAccStart;
#pragma unroll
                            for (int j = 0; j < WW; j++)
                                s = conv2d_dp4a(win[c][q][j], __float_as_uint(a.w[j]), s);
                            hf[q][c] = __fadd_rn(__int_as_float(s), -12582912.0f);
                        }
#pragma unroll
                    for (int q = 0; q < Q; q++)
#pragma unroll
                        for (int c = 0; c < CF; c++) {
                            if constexpr (DP == kBinomial4) {
                                /* acc[k] holds stage k of row r - 1; stage k + 1
                                 * of row r is stage k of rows r and r - 1 */
                                float v = hf[q][c];
#pragma unroll
                                for (int k = 0; k < M - 1; k++) {
                                    const float up = __fadd_rn(v, __int_as_float(acc[k][q][0][c]));
                                    acc[k][q][0][c] = __float_as_int(v);
                                    v = up;
                                }
                                done[q][c] = v;
                            } else if constexpr (DP == kBox4) {
                                /* acc[0 .. M - 2]: the row passes of rows r - 1 ..
                                 * r - M + 1, acc[M - 1] their sum */
                                const float t = __fadd_rn(__int_as_float(acc[M - 1][q][0][c]), hf[q][c]);
                                done[q][c] = t;
                                acc[M - 1][q][0][c] =
                                    __float_as_int(__fadd_rn(t, -__int_as_float(acc[M - 2][q][0][c])));
#pragma unroll
                                for (int i = M - 2; i > 0; i--)
                                    acc[i][q][0][c] = acc[i - 1][q][0][c];
                                acc[0][q][0][c] = __float_as_int(hf[q][c]);
                            }
                        }
                    if constexpr (DP == kSeparable4) {
#pragma unroll
                        for (int i = 0; i < M; i++) {  /* input row r is mask row i of output row r - i */
                            const float cw = a.w[WW + i];
#pragma unroll
                            for (int q = 0; q < Q; q++)
#pragma unroll
                                for (int c = 0; c < CF; c++)
                                    acc[i][q][0][c] = __float_as_int(
                                        __fmaf_rn(hf[q][c], cw, __int_as_float(acc[i][q][0][c])));
                        }
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < M; i++)  /* input row r is mask row i of output row r - i */
#pragma unroll
                        for (int k = 0; k < K; k++)
#pragma unroll
                            for (int j = 0; j < WW; j++) {
                                constexpr int per = DP == 2 ? 2 : 1;
                                const int at = ((k * M + i) * WW + j) * per;
                                const unsigned wp = __float_as_uint(a.w[at]);
                                const unsigned wq = __float_as_uint(a.w[at + per - 1]);
#pragma unroll
                                for (int q = 0; q < Q; q++)
#pragma unroll
                                    for (int c = 0; c < CF; c++) {
                                        int &s = acc[i][q][k][c];
                                        if constexpr (DP == 2)
                                            s = conv2d_dp2a<true>(wq, win[c][q][j],
                                                                  conv2d_dp2a<false>(wp, win[c][q][j], s));
                                        else
                                            s = conv2d_dp4a(win[c][q][j], wp, s);
                                    }
                            }
                }
                const int j = r - (M - 1);  /* acc[M - 1] is output row j, complete now */
                if (j >= 0 && quick) {
                    float fv[Q][CF];  /* the bytes, as conv2d_value returns them */
#pragma unroll
                    for (int q = 0; q < Q; q++)
#pragma unroll
                        for (int c = 0; c < CF; c++) {
                            float t;
                            if constexpr (cascade)
                                t = done[q][c];
                            else
                                t = __int_as_float(acc[M - 1][q][0][c]);
                            if constexpr (MODE == MODE_DIV_ODD && !cascade)
                                t = __fadd_rn(t, -12582912.0f);  /* the sum itself */
                            const float v = __fmaf_rn(t, mul[0], top[0]);
                            fv[q][c] = IN_RANGE ? v : fminf(fmaxf(v, kMagic), kMagic + 255.0f);
                        }
                    if constexpr (kWide) {
                        if (wide)
                            conv2d_store_wide<C, CF, Q>(out, fv);
                        else
                            conv2d_store<C, CF, Q>(h, y0 + j, x, fv);
                        out += row_bytes;
                    } else {
                        conv2d_store<C, CF, Q>(h, y0 + j, x, fv);
                    }
                } else if (j >= 0) {
                    float sums[Q][K][CF];
#pragma unroll
                    for (int q = 0; q < Q; q++)
#pragma unroll
                        for (int k = 0; k < K; k++)
#pragma unroll
                            for (int c = 0; c < CF; c++)
                                sums[q][k][c] =
                                    __fmaf_rn(__int_as_float(acc[M - 1][q][k][c]), mul[k], sub[k]);
                    finish(y0 + j, sums);
                }
            } else {
                float px[N][CF];
                conv2d_pixels4<C, CF, Q, M>(h, row_of(r), x, fast, mine, px);
                conv2d_zero(acc[0]);
#pragma unroll
                for (int i = 0; i < M; i++)  /* input row r is mask row i of output row r - i */
#pragma unroll
                    for (int mx = 0; mx < M; mx++)
#pragma unroll
                        for (int k = 0; k < K; k++) {
                            const int wi = (k * M + i) * M + mx;
                            if ((ZERO >> wi) & 1)
                                continue;  /* a weight known to be 0: acc + 0 * px is acc */
                            const float wv = a.w[wi];
#pragma unroll
                            for (int q = 0; q < Q; q++)
#pragma unroll
                                for (int c = 0; c < CF; c++)
                                    acc[i][q][k][c] = fmaf(px[q + mx][c], wv, acc[i][q][k][c]);
                        }
                const int j = r - (M - 1);  /* acc[M - 1] is output row j, complete now */
                if (j >= 0)
                    finish(y0 + j, acc[M - 1]);
            }
            if constexpr (!cascade && !gradient && !box_run) {  /* (those move their own) */
#pragma unroll
                for (int i = M - 1; i > 0; i--)  /* the rows in progress move one older */
#pragma unroll
                    for (int q = 0; q < Q; q++)
#pragma unroll
                        for (int k = 0; k < K; k++)
#pragma unroll
                            for (int c = 0; c < CF; c++)
                                acc[i][q][k][c] = acc[i - 1][q][k][c];
            }
        };
        conv2d_zero(acc);  /* rows before the first output: never stored */
#pragma unroll
        for (int r = 0; r < S - 1; r++)
            fetch(r);
#pragma unroll 1
        for (int r = 0; r < rows; r += 3) {  /* three steps: the 3x3 accumulators rotate by renaming */
            step(r);
            if (r + 1 < rows)
                step(r + 1);
            if (r + 2 < rows)
                step(r + 2);
        }
    };
    if constexpr (C == 1 && M == 3 && K == 2) {
        if (fast_rt)
            strip(conv2d_flag<true>{});
        else
            strip(conv2d_flag<false>{});
    } else {
        strip(fast_rt);
    }
}

/* Whether a variant of version 4 walks strips (conv2d_strips4): gray,
 * RGBA from 5x5 on and the RGBA gradient pairs in lanes (DP: the kernel's
 * kind), the layouts faster in strips (the lanes: their 16 warps an SM no
 * longer wait at each tile's first rows). Not RGBA 3x3 of one matrix: it is bound by memory rather
 * than by issue (83% of the copy rate with one tile per block, 77% in
 * strips) and, with alpha copied, needs all of its 80 registers (the strip
 * logic made it spill 52 bytes); nor the DP4A gradient pair, which gained
 * 2% in the bench and lost up to 10% in the tool's sweep at the automatic
 * tile. */
__host__ __device__ constexpr bool conv2d_strips_ok4(int C, int M, int DP)
{
    return C == 1 || (C == 4 && M >= 5) || conv2d_gradient4(DP);
}

/* Blocks of kMaxThreads per SM that version 4 asks ptxas for: 3 (at most 80
 * registers, 37.5% occupancy) for the variants that fit 80 without spilling
 * (gray and 2-channel 3x3, the RGBA gradient pair with alpha copied), 2
 * (at most 128) for the rest, which would spill (84 to 2532 bytes). */
template <int C, int CF, int K, int M, int DP>
constexpr int conv2d_min_blocks4()
{
    if (DP == kRunning4 && M > 15)
        return 1;  /* up to 255: 2 x 36 words a row; shared memory allows 1 block of 256 */
    if (DP && M == 3 && K == 1 && C == 4 && CF == 3)
        return 3;  /* fits 80 without spilling; RGBA with alpha filtered would not */
    if (conv2d_gradient4(DP))
        return 2;  /* 99-118 registers; at 80 they spilled 60-130 bytes and ran 15% slower */
    return M == 3 && ((K == 1 && C <= 2) || (K == 2 && C == 4 && CF == 3)) ? 3 : 2;
}

/* No barrier: each thread copies its inputs from global memory into its
 * own ring in shared memory (the halo columns and rows that neighbouring
 * threads also read come from L1 and L2), so no warp waits for a block's
 * staging and every warp keeps several rows of copies in flight. MODE4:
 * kModeAny (the mode read from the header), or MODE_PRESCALED_NO_OFFSET
 * for the kernels of 5x5 and 7x7 integer masks that have only that mode
 * (gaussian5, gaussian7: faster than the loop that tests the mode per
 * output, bench/RESULTS.md). */
template <int C, int CF, int K, int M, int Q, unsigned ZERO, int DP, int MODE4>
__global__ void __launch_bounds__(kMaxThreads, (conv2d_min_blocks4<C, CF, K, M, DP>()))
    conv2d_kernel4(const fast_args<K * M * M> a)
{
    using R = row4<C, Q, M>;
    constexpr int P = conv2d_rows4<C, K, M>();
    const fast_header &h = a.h;
    const int T = blockDim.x * blockDim.y, t = threadIdx.y * blockDim.x + threadIdx.x;
    /* an edge block's thread: one column of threads off the fast path, one
     * tile of rows (the host launches enough of them for one each) */
    int x, y0, steps = 1;
    if constexpr (!conv2d_strips_ok4(C, M, DP)) {  /* one tile per block */
        x = (blockIdx.x * blockDim.x + threadIdx.x) * Q;
        y0 = (blockIdx.y * blockDim.y + threadIdx.y) * P;
    } else if (blockIdx.y < h.edge_rows) {
        const int u = (blockIdx.y * gridDim.x + blockIdx.x) * T + t;
        if (u >= h.edge_cols * ((h.height + P - 1) / P))
            return;
        const int e = u % h.edge_cols;
        x = (e < h.edge_left ? e : h.edge_right0 + e - h.edge_left) * Q;
        y0 = u / h.edge_cols * P;
    } else {
        x = (blockIdx.x * blockDim.x + threadIdx.x) * Q;
        y0 = ((blockIdx.y - h.edge_rows) * blockDim.y + threadIdx.y) * (P * h.steps);
        steps = h.steps;
        /* a column the edge blocks take: its gathers, a memory latency a
         * row, would make its strip the kernel's longest */
        if (h.edge_rows && (x * C < 4 * R::SW || (x + Q) * C + 4 * R::SW > h.width * C))
            return;
    }
    if (x >= h.width || y0 >= h.height)
        return;
    if constexpr (MODE4 != kModeAny) {  /* a kernel of its own for one mode */
        conv2d_body4<C, CF, K, M, Q, ZERO, DP, MODE4 & ~kInRange, (MODE4 & kInRange) != 0>(a, x, y0, steps);
    } else if constexpr (M > 3) {
        /* one loop: more would spill the larger masks' registers (and a
         * second loop in the same kernel spilled 24 to 1360 bytes) */
        conv2d_body4<C, CF, K, M, Q, ZERO, DP, kModeAny>(a, x, y0, steps);
    } else {
        if constexpr (K == 1 && DP == CONV2D_DP4A) {  /* the only kernels given MODE_DIV_ODD */
            if (h.mode == MODE_DIV_ODD) {
                conv2d_body4<C, CF, K, M, Q, ZERO, DP, MODE_DIV_ODD>(a, x, y0, steps);
                return;
            }
        }
        switch (h.mode) {  /* one copy of the loop per mode: no branch per output */
        case MODE_DIV:
            conv2d_body4<C, CF, K, M, Q, ZERO, DP, MODE_DIV>(a, x, y0, steps);
            break;
        case MODE_PRESCALED:
            conv2d_body4<C, CF, K, M, Q, ZERO, DP, MODE_PRESCALED>(a, x, y0, steps);
            break;
        default:
            conv2d_body4<C, CF, K, M, Q, ZERO, DP, MODE_PRESCALED_NO_OFFSET>(a, x, y0, steps);
            break;
        }
    }
}

}  /* namespace */

#endif /* GF_KERNELS_CONV2D_DIRECT_CUH */
