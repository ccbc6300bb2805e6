/* conv2d_ring4.cuh - version 4's per-thread machinery (conv2d_direct.cuh):
 * output rows a thread, the ring of input rows each thread keeps in
 * shared memory and fills with cp.async, the halo words, and the DP4A /
 * DP2A packing of rows into integer dot products. */
#ifndef GF_KERNELS_CONV2D_RING4_CUH
#define GF_KERNELS_CONV2D_RING4_CUH

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

}  // namespace

#endif /* GF_KERNELS_CONV2D_RING4_CUH */
