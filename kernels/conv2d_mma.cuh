/* conv2d_mma.cuh - version 4's tensor-core path (kMma4): masks of M x M, 11 <= M <= 31, that factor as a column times
 * a row of integer weights 0..255 (sampled Gaussians), gray and RGBA.
 *
 * Both 1-D passes are products of 8-bit integer matrices on the tensor
 * cores (mma.sync m16n8k32, u8 x u8 into s32: exact), so the sums are the
 * separable integer path's and the bytes the same:
 *   row pass     out^T = W_row x In^T per 16 output bytes of a row and 8
 *                image rows: A (16 x 32) a Toeplitz matrix of the row's
 *                weights (A[m][k] = w[(k - s - m) / C] where that is a tap
 *                of the same channel, else 0), B (32 x 8) 32 bytes of 8
 *                input rows straight from shared memory by ldmatrix. RGBA
 *                stays interleaved: the Toeplitz matrix only pairs bytes
 *                of one channel, so 3 of 4 products are 0; from 27x27 on
 *                (conv2d_mma_row_pass_planar) a lane's ldmatrix words are
 *                split into channel planes by PRMT instead, an m-tile 16
 *                pixels of one channel, 2 chunks of K where 5 were at
 *                31x31. The row sums (< 2^16: the
 *                row's weights sum to at most 257) go to shared memory
 *                split into two planes, their low bytes and their high
 *                bytes, transposed (a column of the tile is contiguous),
 *                by one stmatrix an item.
 *   column pass  Out = W_col x Mid per 16 output rows and 8 byte columns:
 *                A the column's Toeplitz matrix, B 32 rows of 8 columns of
 *                the row sums' low bytes, then of their high bytes, each
 *                straight from its plane by ldmatrix: two products, lo +
 *                256 hi, the exact sum.
 *   finish       the sum as the float 2^23 + 2^22 + S (an integer add),
 *                then the separable integer path's scaling, its mode
 *                chosen once a tile.
 * The A fragments depend only on the lane and the mask: built once per
 * block, which then loops over tiles (a persistent grid), stepping its
 * tile's coordinates without a division.
 *
 * Per tile (TW x TH output pixels, 256 threads): the input rows with their
 * halo are copied into shared memory (conv2d_mma_block::fetch), the row
 * pass writes the row sums, the column pass the output bytes over the
 * input rows, and the block stores them 16 bytes at a time. A warp keeps
 * its 16-byte column of the tile through both passes. One buffer: the next
 * tile's copies start once the outputs are out; the SM's other blocks (3,
 * 4 on gray from 19x19, 2 on planes) cover the wait.
 *
 * Choices that are not obvious (the measurements are in bench/RESULTS.md):
 *   - The finish works on the biased sum (an FFMA), its mode chosen once
 *     a tile, so no output divides or branches (conv2d_mma_body).
 *   - The row sums leave the row pass by one stmatrix an item, and RGBA
 *     from 27x27 takes the row pass on channel planes, its outputs in the
 *     row sums' plane and the next tile's copies right after the row pass,
 *     beside the column pass and the stores (conv2d_mma_store_sums,
 *     conv2d_mma_row_pass_planar, conv2d_mma_block::walk).
 *   - Tiles, not strips: a block walking a strip with the last steps' row
 *     sums in a ring (no halo row fetched twice) gives a warp 1 or 2 items
 *     between barriers where a tile gives it ~10, and the chain of a
 *     step's items set the pace; it was slower. RGBA's automatic tile is
 *     the tallest that holds two blocks an SM (conv2d_preferred_tile).
 *   - Blocks an SM: conv2d_mma_min_blocks.
 *
 * Roofline budget: bytes as every conv2d kernel (C read + C written a
 * pixel; the halo rows and columns come again from L2, (TW + M - 1)(TH +
 * M - 1) / (TW TH) of them). Tensor work per output byte: gray 31x31
 * (2 + 4) / 128 m16n8k32, RGBA 31x31 on planes (2 + 4) / 128 (interleaved
 * (5 + 4) / 128), each row pass's share times its halo rows, (TH + M - 1)
 * / TH rounded up to 16; at one m16n8k32 an SM and clock, 8192x8192
 * RGBA's ~15 M of them take ~55 us against the copy's ~180 us, gray's ~4 M
 * ~15 us against ~50: neither the tensor cores nor memory is the bound,
 * the issue of the ~0.75 instruction a pixel (ldmatrix, mma, the finish,
 * the copies) and the latency between a tile's phases are. */

#ifndef GF_KERNELS_CONV2D_MMA_CUH
#define GF_KERNELS_CONV2D_MMA_CUH

#include "conv2d_common.cuh"

namespace {

/* 9x9 keeps the separable integer path (kSeparable4), which this one was
 * not measured against; box masks take their running or prefix sums, but
 * on gray from this size on this path. */
constexpr int kMmaMinMask = 11;
constexpr int kMmaBias = 0x4B400000;  /* the float 12582912 = 2^23 + 2^22 */

/* 32-byte chunks of K of the row pass (the last tap of an m-tile's output
 * byte 15, the copy starting s bytes early so that it is 16-byte aligned)
 * and of the column pass. */
__host__ __device__ constexpr int conv2d_mma_shift(int C, int M) { return (16 - M / 2 * C % 16) % 16; }
__host__ __device__ constexpr int conv2d_mma_row_chunks(int C, int M)
{
    return (conv2d_mma_shift(C, M) + 15 + (M - 1) * C) / 32 + 1;
}
__host__ __device__ constexpr int conv2d_mma_column_chunks(int M) { return (15 + M - 1) / 32 + 1; }

template <int C, int M> struct conv2d_mma_shape {
    static constexpr int R = M / 2;
    static constexpr int RC = R * C;  /* halo bytes on each side */
    static constexpr int S = conv2d_mma_shift(C, M);
    static constexpr int NCH_ROW = conv2d_mma_row_chunks(C, M);
    static constexpr int NCH_COL = conv2d_mma_column_chunks(M);
};

/* A pitch >= n bytes that is 16 mod 32: the 8 rows of 16 bytes an ldmatrix
 * reads fall on distinct banks. */
__host__ __device__ constexpr int conv2d_mma_pitch(int n)
{
    return (n + 15) / 32 * 32 + 16;
}

/* Row-pass rows of a tile (pairs of n-tiles), and the row sums' pitch. */
__host__ __device__ constexpr int conv2d_mma_rows(int M, int th) { return (th + M - 1 + 15) / 16 * 16; }
__host__ __device__ constexpr int conv2d_mma_mid_pitch(int M, int th)
{
    return conv2d_mma_pitch(th - 16 + 32 * conv2d_mma_column_chunks(M) > conv2d_mma_rows(M, th)
                                ? th - 16 + 32 * conv2d_mma_column_chunks(M)
                                : conv2d_mma_rows(M, th));
}

/* RGBA masks of 27x27 to 31x31 (whose halo, rounded up to 16 bytes, is 16
 * pixels) take the row pass on channel planes in tiles of 32 pixels or
 * more: the row sums of channel ch, pixel x sit at ch * (tw * MP + 32) + x *
 * MP in each plane (32 bytes between the channels' rows, so that an
 * ldmatrix's 8 rows, 2 pixels by 4 channels, and a stmatrix's, 8 pixels of
 * one channel, fall on distinct banks). */
__host__ __device__ constexpr bool conv2d_mma_planar(int C, int M) { return C == 4 && M >= 27; }
constexpr int kMmaPlanarSkew = 32;

/* Shared bytes of a tile of tw x th pixels: the weights, the input rows,
 * the row sums' two planes. */
__host__ __device__ constexpr size_t conv2d_mma_shared(int C, int M, int tw, int th)
{
    return 64 + (size_t)conv2d_mma_rows(M, th) * conv2d_mma_pitch(tw * C - 16 + 32 * conv2d_mma_row_chunks(C, M)) +
           ((size_t)tw * C * conv2d_mma_mid_pitch(M, th) + (conv2d_mma_planar(C, M) ? 4 * kMmaPlanarSkew : 0)) * 2;
}

__device__ __forceinline__ void conv2d_mma_u8(int (&d)[4], const unsigned (&a)[4], unsigned b0,
                                              unsigned b1)
{
#if __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)d, (void)a, (void)b0, (void)b1;
    __trap();  /* the plan never picks this path below compute capability 8.0 */
#endif
}

template <int N>
__device__ __forceinline__ void conv2d_ldmatrix(unsigned (&r)[N], unsigned addr)
{
#if __CUDA_ARCH__ >= 800
    if constexpr (N == 4)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(addr));
#else
    for (int i = 0; i < N; i++)
        r[i] = 0;
    (void)addr;
#endif
}

/* stmatrix .x4 of four 8 x 8 matrices of 16-bit elements: lane l gives the
 * address of row l & 7 of matrix l >> 3 and holds, one word a matrix, its
 * elements of row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1. Before
 * compute capability 9.0 each lane stores its own words: own, that of
 * matrix 0, and matrix j's j0 (j odd) plus j1 (j > 1) bytes further. */
__device__ __forceinline__ void conv2d_stmatrix(unsigned addr, const unsigned (&r)[4], unsigned own, unsigned j0,
                                                unsigned j1)
{
#if __CUDA_ARCH__ >= 900
    (void)own, (void)j0, (void)j1;
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
#else
    (void)addr;
#pragma unroll
    for (int j = 0; j < 4; j++)
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(own + (j & 1) * j0 + (j >> 1) * j1), "r"(r[j]) : "memory");
#endif
}

/* A fragment of chunk c (rows m: output bytes or rows, columns k: input
 * bytes or rows of the chunk) of the Toeplitz matrix A[m][k] = w[(k + 32c
 * - s - m) / C] for taps of the same channel inside the mask, else 0. */
template <int C, int M>
__device__ __forceinline__ void conv2d_mma_toeplitz(unsigned (&a)[4], const unsigned char *w, int c,
                                                    int s, int lane)
{
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int m = g + 8 * (r & 1), kb = 32 * c + 16 * (r >> 1) + 4 * q;
        unsigned word = 0;
#pragma unroll
        for (int b = 0; b < 4; b++) {
            const int d = kb + b - s - m;
            if (d >= 0 && d % C == 0 && d / C < M)
                word |= (unsigned)w[d / C] << (8 * b);
        }
        a[r] = word;
    }
}

/* The row pass's sums of one m-tile and two n-tiles (acc0, acc1: 16 rows)
 * out to the row sums' planes: the low bytes of 4 rows' sums of output g,
 * of g + 8, then their high bytes, one stmatrix (st; own, the lane's own
 * word before compute capability 9.0). */
__device__ __forceinline__ void conv2d_mma_store_sums(const int (&acc0)[4], const int (&acc1)[4], unsigned sel_lo,
                                                      unsigned st, unsigned own, int MP, int PLANE)
{
    unsigned wv[4];
#pragma unroll
    for (int h8 = 0; h8 < 2; h8++) {
        const unsigned p0 = __byte_perm(acc0[2 * h8], acc0[2 * h8 + 1], 0x5140);
        const unsigned p1 = __byte_perm(acc1[2 * h8], acc1[2 * h8 + 1], 0x5140);
        wv[h8] = __byte_perm(p0, p1, sel_lo);
        wv[2 + h8] = __byte_perm(p0, p1, sel_lo + 0x2222);
    }
    conv2d_stmatrix(st, wv, own, 8 * MP, PLANE);
}

/* The planar row pass's A fragment of m-tile mp (outputs 16 mp .. 16 mp +
 * 15 of a group of 32 pixels of one channel) and chunk c of its window of
 * 64 pixels (the group's first pixel - 16 on): the lane's register byte b of
 * k = 16 h + 4 q + b holds pixel 32 c + 16 h + 4 b + q of the window (the
 * order the transposes of its ldmatrix words give), so A[m][k] = w[t], t =
 * that pixel - 16 - 16 mp - m + M / 2, where 0 <= t < M. */
template <int M>
__device__ __forceinline__ void conv2d_mma_toeplitz_planar(unsigned (&a)[4], const unsigned char *w, int mp,
                                                           int c, int lane)
{
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int m = g + 8 * (r & 1), h = r >> 1;
        unsigned word = 0;
#pragma unroll
        for (int b = 0; b < 4; b++) {
            const int t = 32 * c + 16 * h + 4 * b + q - 16 - 16 * mp - m + M / 2;
            if (t >= 0 && t < M)
                word |= (unsigned)w[t] << (8 * b);
        }
        a[r] = word;
    }
}

/* The row pass on channel planes, RGBA (conv2d_mma_planar): in the
 * interleaved rows 3 of 4 of the products are 0 (5 chunks of K for 16
 * output bytes at 31x31); in planes an m-tile is 16 pixels of one channel
 * and 2 chunks of 32 pixels cover its taps. An item is a group of 32 output
 * pixels (the window of 64 input pixels from the group's first - 16: 256
 * bytes), a pair of n-tiles (16 rows) and two channels (half = 0: R and G,
 * 1: B and A): 8 ldmatrix of the interleaved bytes, a lane's words pixels
 * 4 s + q, s = 0..15, of its row; 4 PRMT per 4 of them give the two
 * channels' bytes of those 4 pixels (the A fragments take that order of
 * K); 16 mma; the sums out as in the interleaved pass
 * (conv2d_mma_store_sums), into the channels' rows. Items: rows / 16 pairs times TWB / 64 units (group,
 * half); a warp keeps its unit and walks the pairs. */
template <int NCH>
__device__ __forceinline__ void conv2d_mma_row_pass_planar(const unsigned (&arow)[NCH][4], unsigned in_s, int IP,
                                                           unsigned mid_s, int MP, int CHS, int PLANE, int pairs,
                                                           int TWB, int warp, int warps, int perm0, int pdn,
                                                           unsigned sel_lo)
{
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int ushift = TWB == 256 ? 2 : 1;  /* units of a pair: 2 or 4 */
    const int unit = warp & ((1 << ushift) - 1), gp = unit >> 1, half = unit & 1;
    const int pp0 = warp >> ushift, ppstep = max(1, warps >> ushift);
    const unsigned sel = half ? 0x7362u : 0x5140u;  /* bytes 2, 3 or 0, 1 of two words, interleaved */
    unsigned base = in_s + (pp0 * 16 + perm0) * IP + 128 * gp + 16 * (lane >> 3);
    const unsigned ch0 = mid_s + 2 * half * CHS + 32 * gp * MP + pp0 * 16;
    unsigned st = ch0 + (lane & 15) * MP + (lane >> 4) * PLANE;
    unsigned own = ch0 + g * MP + 4 * q;
    for (int np = pp0; np < pairs; np += ppstep, base += ppstep * 16 * IP, st += ppstep * 16, own += ppstep * 16) {
        unsigned b[2][2][2][2];  /* [n-tile][channel][chunk][register] */
#pragma unroll
        for (int n = 0; n < 2; n++) {
            unsigned x[16];  /* pixels 4 s + q of the window, row g of the n-tile */
#pragma unroll
            for (int u = 0; u < 4; u++) {
                unsigned r4[4];
                conv2d_ldmatrix<4>(r4, base + n * pdn * IP + 64 * u);
                x[4 * u] = r4[0], x[4 * u + 1] = r4[1], x[4 * u + 2] = r4[2], x[4 * u + 3] = r4[3];
            }
#pragma unroll
            for (int t = 0; t < 4; t++) {  /* pixels 4t..4t+3 of the lane's 16: chunk t >> 1, register t & 1 */
                const unsigned t0 = __byte_perm(x[4 * t], x[4 * t + 1], sel);
                const unsigned t1 = __byte_perm(x[4 * t + 2], x[4 * t + 3], sel);
                b[n][0][t >> 1][t & 1] = __byte_perm(t0, t1, 0x5410);
                b[n][1][t >> 1][t & 1] = __byte_perm(t0, t1, 0x7632);
            }
        }
#pragma unroll
        for (int mp = 0; mp < 2; mp++) {
            int acc[2][2][4] = {};  /* [channel][n-tile] */
#pragma unroll
            for (int c = 0; c < 2; c++)
#pragma unroll
                for (int k = 0; k < 2; k++)
#pragma unroll
                    for (int n = 0; n < 2; n++)
                        conv2d_mma_u8(acc[k][n], arow[2 * mp + c], b[n][k][c][0], b[n][k][c][1]);
#pragma unroll
            for (int k = 0; k < 2; k++) {
                const int off = k * CHS + 16 * mp * MP;
                conv2d_mma_store_sums(acc[k][0], acc[k][1], sel_lo, st + off, own + off, MP, PLANE);
            }
        }
    }
}

/* A block's tile in shared memory and its walk over the tiles, computed
 * once a block (lay_out before the weights' fragments, walk after): what
 * the phases of conv2d_mma_body read. */
template <int C, int M> struct conv2d_mma_block {
    using S = conv2d_mma_shape<C, M>;
    static constexpr int kLog2C = C == 4 ? 2 : 0;
    int lane, warp, warps, g, q;
    int TWB, TH, rows, IP, MP, OP;
    /* rows x IP input bytes (the outputs, TH x OP, staged over them); then
     * the row sums' low bytes and their high bytes: TWB rows of MP bytes
     * each, a row an output byte, in its order or (planar) by channel */
    unsigned char *in, *mid;
    bool planar;
    int CHS, PLANE;  /* planar: a channel's rows; a plane's bytes */
    unsigned mid_s, in_s;
    long long row_bytes;
    int tiles_x, tiles_y, in_rows;
    gf_border border;
    int chunks, prstep, pr0, pc;  /* the copies' 16-byte pieces (fetch) */
    int mtiles, mshift, np0, npstep;
    bool outs_in_mid;
    int perm0, pdn;
    unsigned sel_lo;
    bool aligned, vec_out;
    int step_y, step_x;

    __device__ __forceinline__ int mid_row(int b) const
    {
        return planar ? (b & (C - 1)) * CHS + (b >> kLog2C) * MP : b * MP;
    }

    template <class H> __device__ __forceinline__ void lay_out(const H &h, unsigned char *smem)
    {
        lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
        g = lane >> 2, q = lane & 3;
        TWB = h.tw * C, TH = h.th;
        rows = conv2d_mma_rows(M, TH);  /* row-pass rows: pairs of n-tiles */
        IP = conv2d_mma_pitch(TWB - 16 + 32 * S::NCH_ROW);
        MP = conv2d_mma_mid_pitch(M, TH);
        OP = conv2d_mma_pitch(TWB);
        in = smem + 64;
        mid = in + rows * IP;
        planar = conv2d_mma_planar(C, M) && TWB >= 128;
        CHS = h.tw * MP + kMmaPlanarSkew;
        PLANE = planar ? 4 * CHS : TWB * MP;
        mid_s = (unsigned)__cvta_generic_to_shared(mid);
        in_s = (unsigned)__cvta_generic_to_shared(in);
    }

    template <class H> __device__ __forceinline__ void walk(const H &h)
    {
        row_bytes = (long long)h.width * C;
        tiles_x = (h.width + h.tw - 1) / h.tw, tiles_y = (h.height + TH - 1) / TH;
        border = (gf_border)h.border;
        in_rows = TH + 2 * S::R;
        /* 16-byte pieces of a row the taps reach (2 to 25): thread pr0
         * chunks + pc copies piece pc of rows pr0, + prstep, ... (the last
         * blockDim.x mod chunks threads none: pc -1) */
        chunks = (S::S + TWB + 2 * S::RC + 15) / 16;
        prstep = (int)blockDim.x / chunks, pr0 = (int)threadIdx.x / chunks;
        pc = pr0 < prstep ? (int)threadIdx.x - pr0 * chunks : -1;
        mtiles = TWB / 16, mshift = __ffs(mtiles) - 1;  /* TWB: a power of two */
        /* a warp's first pair of n-tiles (row pass) or row tile (column
         * pass), and its step: warps / mtiles of them run side by side */
        np0 = warp >> mshift, npstep = max(1, warps >> mshift);
        /* The planar pass's tiles (128 bytes or more: a warp alone on each
         * of its byte columns) put the outputs into the row sums' low plane
         * behind the column pass (the 16 columns of row tile rt, of the
         * warp's own rows, which no later row tile reads), not over the
         * input rows: the next tile's copies then start as soon as the row
         * pass is done, beside the column pass and the stores. Output row r
         * of byte column c sits in its row r ^ c (mod 16), so that both the
         * column pass's stores and the block's 16-byte reads fall on
         * distinct banks. */
        outs_in_mid = planar && npstep == 1;
        /* the row pass's n-tile n, column j, is row 4 (j >> 1) + (j & 1) +
         * 2 (n ^ (j >> 2)) of its 16: a lane's sums of the two n-tiles are
         * then of 4 consecutive rows, one stmatrix word, and each
         * ldmatrix's 8 rows still fall on distinct banks; pdn: n-tile 1's
         * row minus n-tile 0's */
        perm0 = 4 * ((lane & 7) >> 1) + (lane & 1) + 2 * ((lane & 7) >> 2);
        pdn = (lane & 7) < 4 ? 2 : -2;
        sel_lo = q < 2 ? 0x5410u : 0x1054u;  /* the words' byte order */
        aligned = ((uintptr_t)h.src % 16 == 0) && row_bytes % 16 == 0;
        vec_out = ((uintptr_t)h.dst % 16 == 0) && row_bytes % 16 == 0;
        /* tiles blockIdx.x, + gridDim.x, ... in rows of tiles_x */
        step_y = gridDim.x / tiles_x, step_x = gridDim.x - step_y * tiles_x;
    }

    /* the next tile, stepped without a division */
    __device__ __forceinline__ void advance(int &x, int &y) const
    {
        x += step_x, y += step_y;
        if (x >= tiles_x)
            x -= tiles_x, y++;
    }

    /* tile (tx, ty)'s input rows y0 - R .. y0 + TH + R - 1 from byte a0
     * into shared memory: the 16-byte pieces inside the row (of an aligned
     * image), c_lo <= c < c_hi, copied with cp.async; the others (the edge
     * tiles' pieces past either end, or all of an unaligned image) gathered
     * byte by byte through the border, a thread a byte */
    template <class H> __device__ __forceinline__ void fetch(const H &h, int tx, int ty) const
    {
        const long long a0 = (long long)tx * TWB - S::RC - S::S;
        const int y0 = ty * TH;
        int c_lo = 0, c_hi = 0;
        if (aligned) {
            c_lo = a0 >= 0 ? 0 : (int)((15 - a0) / 16);
            c_hi = (int)min((long long)chunks, (row_bytes - a0) / 16);
            if (c_hi < c_lo)
                c_lo = c_hi = 0;
        }
        if (pc >= c_lo && pc < c_hi) {
            /* rows r_in0 <= r < r_in1 lie inside the image: their source
             * steps by a constant; the others go through the border */
            const int ylo = y0 - S::R, r_in0 = max(0, -ylo), r_in1 = min(in_rows, h.height - ylo);
            const long long at0 = a0 + 16 * pc, step = (long long)prstep * row_bytes;
            long long at = at0 + (long long)(ylo + pr0) * row_bytes;
            unsigned to = in_s + pr0 * IP + 16 * pc;
            for (int r = pr0; r < in_rows; r += prstep, to += prstep * IP, at += step) {
                if (r >= r_in0 && r < r_in1) {
                    conv2d_copy_async<16>(to, h.src + at, false);
                } else {
                    const int yi = gf_border_index(ylo + r, h.height, border);
                    conv2d_copy_async<16>(to, h.src + (yi < 0 ? 0 : (long long)yi * row_bytes) + at0, yi < 0);
                }
            }
        }
        conv2d_copy_commit();
        if (const int ng = c_lo + chunks - c_hi; ng > 0) {
            const unsigned gmagic = ng > 1 ? 0xFFFFFFFFu / ng + 1 : 0u;  /* 2^32 / 1 would not fit */
            for (int i = threadIdx.x; i < in_rows * ng * 16; i += blockDim.x) {
                const int k = i >> 4, b = i & 15, r = ng > 1 ? __umulhi(k, gmagic) : k, j = k - r * ng;
                const int c = j < c_lo ? j : c_hi + (j - c_lo);
                const long long x = a0 + 16 * c + b;
                const int yi = gf_border_index(y0 - S::R + r, h.height, border);
                const int xi = gf_border_index((int)(x >> kLog2C), h.width, border);  /* floor(x / C) */
                in[r * IP + 16 * c + b] =
                    yi < 0 || xi < 0 ? 0 : h.src[(long long)yi * row_bytes + (long long)xi * C + (int)(x & (C - 1))];
            }
        }
    }

    /* row pass, interleaved (not planar): m-tile mt (16 output bytes) of
     * two n-tiles (8 rows each), two independent chains of products. A warp
     * keeps its m-tiles (mt = warp mod mtiles, + warps while below mtiles)
     * and walks the pairs of n-tiles np = warp / mtiles, + npstep: the
     * addresses step by a constant. */
    __device__ __forceinline__ void row_pass(const unsigned (&arow)[S::NCH_ROW][4]) const
    {
        for (int mt = warp & (mtiles - 1); mt < mtiles && !planar; mt += warps) {
            unsigned base = in_s + (np0 * 16 + perm0) * IP + mt * 16 + 16 * (lane >> 3);
            unsigned st = mid_s + (mt * 16 + (lane & 15)) * MP + (lane >> 4) * PLANE + np0 * 16;
            unsigned own = mid_s + (mt * 16 + g) * MP + np0 * 16 + 4 * q;
            for (int np = np0; np < rows / 16;
                 np += npstep, base += npstep * 16 * IP, st += npstep * 16, own += npstep * 16) {
                unsigned b[2][S::NCH_ROW + 1][2];
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int c = 0; c < S::NCH_ROW; c += 2) {
                        if (c + 1 < S::NCH_ROW) {
                            unsigned r4[4];
                            conv2d_ldmatrix<4>(r4, base + n * pdn * IP + 32 * c);
                            b[n][c][0] = r4[0], b[n][c][1] = r4[1], b[n][c + 1][0] = r4[2], b[n][c + 1][1] = r4[3];
                        } else {
                            unsigned r2[2];
                            conv2d_ldmatrix<2>(r2, base + n * pdn * IP + 32 * c);
                            b[n][c][0] = r2[0], b[n][c][1] = r2[1];
                        }
                    }
                int acc[2][4] = {};
#pragma unroll
                for (int c = 0; c < S::NCH_ROW; c++)
#pragma unroll
                    for (int n = 0; n < 2; n++)
                        conv2d_mma_u8(acc[n], arow[c], b[n][c][0], b[n][c][1]);
                conv2d_mma_store_sums(acc[0], acc[1], sel_lo, st, own, MP, PLANE);
            }
        }
    }

    /* column pass: m-tile (16 output rows) of two n-tiles (8 output bytes
     * each); a warp keeps its byte columns cp and walks the row tiles rt,
     * as the row pass; finish maps each biased sum to its output byte */
    template <class Finish>
    __device__ __forceinline__ void column_pass(const unsigned (&acol)[S::NCH_COL][4], Finish finish) const
    {
        const int ncol = mid_row(8) - mid_row(0);  /* n-tile 1's rows: 8 output bytes on */
        for (int cp = warp & (mtiles - 1); cp < mtiles; cp += warps) {
            /* lanes 8j..8j+7 address matrix j's rows (output byte columns):
             * j = 0, 1 the low bytes of rows k 0-15, 16-31, j = 2, 3 the
             * high */
            unsigned col = mid_s + mid_row(cp * 16 + (lane & 7)) + np0 * 16 + 16 * ((lane >> 3) & 1) +
                           (lane >> 4) * PLANE;
            const int x = (g ^ cp) & 15;  /* outs_in_mid: row g's place */
            unsigned char *at = outs_in_mid ? mid + mid_row(cp * 16 + x) + 2 * q
                                            : in + (np0 * 16 + g) * OP + cp * 16 + 2 * q;
            const int at_row8 = outs_in_mid ? (x & 8 ? -ncol : ncol) : 8 * OP;
            const int at_step = outs_in_mid ? 16 : npstep * 16 * OP;
            for (int rt = np0; rt < TH / 16; rt += npstep, col += npstep * 16, at += at_step) {
                /* lo starts at the bits of the float 2^23 + 2^22: lo + 256
                 * hi are then the bits of 2^23 + 2^22 + S (|S| < 2^22) */
                int lo[2][4], hi[2][4] = {};
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        lo[n][i] = kMmaBias;
                unsigned bf[2][S::NCH_COL][4];
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int c = 0; c < S::NCH_COL; c++)
                        conv2d_ldmatrix<4>(bf[n][c], col + n * ncol + 32 * c);
                /* outs_in_mid: the stores below go over row sums that these
                 * loads read for other lanes, and n = 0's outputs do not
                 * depend on n = 1's loads: the sync puts the stores after
                 * every load, for the compiler too (the ldmatrix asm names
                 * no memory; racecheck reported the hazard). Tested at
                 * compile time: behind outs_in_mid the kernels took 128
                 * registers and spilled (110 and none so) */
                if constexpr (conv2d_mma_planar(C, M))
                    __syncwarp();
#pragma unroll
                for (int c = 0; c < S::NCH_COL; c++)
#pragma unroll
                    for (int n = 0; n < 2; n++) {
                        conv2d_mma_u8(lo[n], acol[c], bf[n][c][0], bf[n][c][1]);
                        conv2d_mma_u8(hi[n], acol[c], bf[n][c][2], bf[n][c][3]);
                    }
#pragma unroll
                for (int n = 0; n < 2; n++) {
                    unsigned o[4];  /* output bytes in their low 8 bits */
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        o[i] = finish(__int_as_float(lo[n][i] + (hi[n][i] << 8)));
                    *reinterpret_cast<unsigned short *>(at + 8 * n) = (unsigned short)__byte_perm(o[0], o[1], 0x0040);
                    *reinterpret_cast<unsigned short *>(at + 8 * n + at_row8) =
                        (unsigned short)__byte_perm(o[2], o[3], 0x0040);
                }
            }
        }
    }

    /* the outputs of the tile from byte x0b of row y0: whole 16-byte pieces
     * where the tile is inside the row; output row r's 16-byte piece c at
     * outs + out_at(r, c); alpha copied from the source where only the
     * first CF channels are filtered */
    template <int CF, class H> __device__ __forceinline__ void store(const H &h, long long x0b, int y0) const
    {
        const unsigned char *const outs = outs_in_mid ? mid : in;
        auto out_at = [&](int r, int c) {
            return outs_in_mid ? mid_row(16 * c + ((r ^ c) & 15)) + (r & ~15) : r * OP + 16 * c;
        };
        const int out_rows = min(TH, h.height - y0);
        const int out_bytes = (int)min((long long)TWB, row_bytes - x0b);
        if (vec_out && out_bytes == TWB) {
            const int ochunks = TWB / 16;
            for (int i = threadIdx.x; i < out_rows * ochunks; i += blockDim.x) {
                const int r = i >> mshift, c = i & (ochunks - 1);
                uint4 v = *reinterpret_cast<const uint4 *>(outs + out_at(r, c));
                const long long at = (long long)(y0 + r) * row_bytes + x0b + 16 * c;
                if constexpr (CF < C) {  /* RGBA, alpha copied */
                    const uint4 a = __ldg(reinterpret_cast<const uint4 *>(h.src + at));
                    v.x = (v.x & 0x00FFFFFFu) | (a.x & 0xFF000000u);
                    v.y = (v.y & 0x00FFFFFFu) | (a.y & 0xFF000000u);
                    v.z = (v.z & 0x00FFFFFFu) | (a.z & 0xFF000000u);
                    v.w = (v.w & 0x00FFFFFFu) | (a.w & 0xFF000000u);
                }
                *reinterpret_cast<uint4 *>(h.dst + at) = v;
            }
        } else {
            for (int i = threadIdx.x; i < out_rows * out_bytes; i += blockDim.x) {
                const int r = i / out_bytes, b = i - r * out_bytes;
                const long long at = (long long)(y0 + r) * row_bytes + x0b + b;
                h.dst[at] = CF < C && b % C >= CF ? h.src[at] : outs[out_at(r, b >> 4) + (b & 15)];
            }
        }
    }
};

/* The body: H a header with src, dst, width, height, border, tw, th;
 * word(i), i < 16, the weights' words: the row's M bytes, then from byte 32
 * the column's; finish... the finishers, of which the pick-th (from 0) maps
 * t, the float 2^23 + 2^22 + S of the exact sum S, to a word whose low byte
 * is the output byte (several, so that the scaling mode is chosen once a
 * tile, not once an output). */
template <int C, int CF, int M, class H, class Word, class... Finish>
__device__ __forceinline__ void conv2d_mma_body(const H &h, Word word, int pick, Finish... finish)
{
    static_assert(C == 1 || C == 4, "gray or RGBA");
    using S = conv2d_mma_shape<C, M>;
    extern __shared__ __align__(16) unsigned char conv2d_mma_smem[];
    conv2d_mma_block<C, M> block;
    block.lay_out(h, conv2d_mma_smem);

    /* the weights' bytes, for the lanes' Toeplitz fragments */
    if (threadIdx.x < 16)
        reinterpret_cast<unsigned *>(conv2d_mma_smem)[threadIdx.x] = word(threadIdx.x);
    __syncthreads();
    const unsigned char *const w = conv2d_mma_smem;

    /* planar: arow[2 mp + c] the fragment of m-tile mp, chunk c */
    unsigned arow[S::NCH_ROW][4], acol[S::NCH_COL][4];
    if constexpr (conv2d_mma_planar(C, M)) {
        static_assert(S::NCH_ROW >= 4 && S::RC + S::S == 64, "a window of 16 pixels each side");
        if (block.planar) {
#pragma unroll
            for (int c = 0; c < 4; c++)
                conv2d_mma_toeplitz_planar<M>(arow[c], w, c >> 1, c & 1, block.lane);
        }
    }
    if (!block.planar) {
#pragma unroll
        for (int c = 0; c < S::NCH_ROW; c++)
            conv2d_mma_toeplitz<C, M>(arow[c], w, c, S::S, block.lane);
    }
#pragma unroll
    for (int c = 0; c < S::NCH_COL; c++)
        conv2d_mma_toeplitz<1, M>(acol[c], w + 32, c, 0, block.lane);

    block.walk(h);
    int tx = blockIdx.x % block.tiles_x, ty = blockIdx.x / block.tiles_x;
    if (ty < block.tiles_y)
        block.fetch(h, tx, ty);
    for (; ty < block.tiles_y; block.advance(tx, ty)) {
        const long long x0b = (long long)tx * block.TWB;
        const int y0 = ty * block.TH;
        conv2d_copy_wait<0>();
        __syncthreads();  /* the tile's input is in */

        if constexpr (conv2d_mma_planar(C, M)) {
            if (block.planar)
                conv2d_mma_row_pass_planar(arow, block.in_s, block.IP, block.mid_s, block.MP, block.CHS, block.PLANE, block.rows / 16, block.TWB,
                                           block.warp, block.warps, block.perm0, block.pdn, block.sel_lo);
        }
        block.row_pass(arow);
        __syncthreads();
        if (block.outs_in_mid) {  /* the input rows are free: the next tile's copies */
            int nx = tx, ny = ty;
            block.advance(nx, ny);
            if (ny < block.tiles_y)
                block.fetch(h, nx, ny);
        }

        /* the finisher chosen once a tile, not once an output */
        int f = 0;
        ((pick == f++ ? block.column_pass(acol, finish) : void()), ...);
        __syncthreads();

        block.template store<CF>(h, x0b, y0);
        int nx = tx, ny = ty;
        block.advance(nx, ny);
        if (!block.outs_in_mid && ny < block.tiles_y) {
            __syncthreads();  /* the outputs are out of shared memory */
            block.fetch(h, nx, ny);
        }
    }
}

/* Blocks of 256 threads an SM the registers must allow (__launch_bounds__).
 * The warps wait on the chain of a tile's phases, so more blocks an SM
 * cover more of it. The row pass on channel planes (RGBA from 27x27) holds
 * two at 110 registers: at three (80) it spilled 24 B and ran 1-5% slower
 * (bench/RESULTS.md). Gray from 19x19 (two chunks of K
 * in the column pass) holds four at 64 registers, no spill: its 128x64
 * tiles (46 KB) fit four, and the occupancy rule gives it 128x64 either
 * way (256x64 needs 86 KB). Gray below 19x19 keeps three and its 256x64
 * (65 KB): at four the occupancy rule would move it to 128x64, which ran
 * slower. */
__host__ __device__ constexpr int conv2d_mma_min_blocks(int C, int M)
{
    return conv2d_mma_planar(C, M) ? 2 : C == 1 && conv2d_mma_column_chunks(M) > 1 ? 4 : 3;
}

/* Masks of 11x11 to 31x31 that factor as a column times a row of integers
 * 0..255 whose sums stay in 16 bits (the row's weights sum to at most 257),
 * gray and RGBA: both passes as 8-bit integer products on the tensor cores
 * (conv2d_mma.cuh), the sums exact, then the separable integer path's
 * scaling of the float 2^23 + 2^22 + S: for masks prescaled without an
 * offset one FFMA (and a clamp above unless in range); for masks divided
 * by an odd integer d with outputs in range (the bench's gaussian15, whose
 * scale is 15625, and on gray the box masks, which the plan gives this
 * path first) MODE_DIV_ODD's FADD and FFMA (S < 2^22: the plan checks
 * 255 d < 2^22); else conv2d_value.
 * A persistent grid: each block builds its Toeplitz fragments once and walks
 * tiles, as many blocks as an SM holds (conv2d_mma_min_blocks). */
template <int C, int CF, int M>
__global__ void __launch_bounds__(kMaxThreads, conv2d_mma_min_blocks(C, M))
    conv2d_mma_kernel4(const __grid_constant__ fast_args<16> a)
{
    const fast_header &h = a.h;
    const bool div = h.mode == MODE_DIV;
    const float mul = div ? 1.0f : 1.0f / h.scale[0];  /* a power of two where prescaled */
    const float sub = -12582912.0f * mul, top = sub + kMagic;
    /* The sums are >= 0 (weights and bytes), so the prescaled mode without an
     * offset needs no lower clamp, nor an upper one in range (kInRange, set
     * by the plan: the weights' total at most the scale). */
    const int pick = h.mode == MODE_PRESCALED_NO_OFFSET + kInRange ? 0
                     : h.mode == MODE_PRESCALED_NO_OFFSET           ? 1
                     : div                                          ? 2
                     : h.mode == MODE_DIV_ODD + kInRange            ? 4
                                                                    : 3;
    auto word = [&](int i) { return __float_as_uint(a.w[i]); };
    auto in_range = [&](float t) { return __float_as_uint(__fmaf_rn(t, mul, top)); };
    auto clamped = [&](float t) { return __float_as_uint(fminf(__fmaf_rn(t, mul, top), kMagic + 255.0f)); };
    auto divided = [&](float t) {
        const float sum[1] = {__fmaf_rn(t, mul, sub)};
        return __float_as_uint(conv2d_value<MODE_DIV, COMB_SUM, 1>(sum, h));
    };
    auto any = [&](float t) {
        const float sum[1] = {__fmaf_rn(t, mul, sub)};
        return __float_as_uint(conv2d_value<MODE_PRESCALED, COMB_SUM, 1>(sum, h));
    };
    /* conv2d_div_odd's finish: t - 2^23 - 2^22 is S exactly */
    auto odd = [&](float t) { return __float_as_uint(__fmaf_rn(__fadd_rn(t, -12582912.0f), mul, kMagic)); };
    conv2d_mma_body<C, CF, M>(h, word, pick, in_range, clamped, divided, any, odd);
}

}  /* namespace */

#endif /* GF_KERNELS_CONV2D_MMA_CUH */
