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

#include "conv2d_lanes4.cuh"

namespace {

/* a bool known at compile time, for conv2d_body4's copies of its loop */
template <bool B> struct conv2d_flag {
    __host__ __device__ constexpr operator bool() const { return B; }
};

/* DP: the accumulators start at 0x4B400000, the float 1.5 * 2^23, so that
 * (|sum| < 2^22) their bits are the float 1.5 * 2^23 + sum: one FFMA makes
 * the sum times 1 / scale when it is prescaled (a power of two: exact), and
 * with 2^23 added (top) also rounds it half to even, like conv2d_value's
 * FADD of 2^23 after its clamp (the clamp commutes with the rounding:
 * [0, 255] becomes [2^23, 2^23 + 255]). */
constexpr int kAccStart4 = 0x4B400000;

/* The finish's factors per matrix: mul scales a sum, sub takes the
 * accumulators' bias off a scaled sum, top adds 2^23 to round (SUM_FIRST:
 * the bias is taken off the sum first, exact, as -12582912 / d would be
 * rounded; MODE_DIV_ODD and the cascades' plain sums). */
template <bool SUM_FIRST, int K>
__device__ __forceinline__ void conv2d_scales4(const fast_header &h, bool div, float (&mul)[K],
                                               float (&sub)[K], float (&top)[K])
{
#pragma unroll
    for (int k = 0; k < K; k++) {
        mul[k] = div ? 1.0f : 1.0f / h.scale[k];
        sub[k] = -12582912.0f * mul[k];
        top[k] = SUM_FIRST ? kMagic : sub[k] + kMagic;
    }
}

/* An output row starts: its accumulators at the bias. */
template <int Q, int K, int CF>
__device__ __forceinline__ void conv2d_start_row4(int (&acc)[Q][K][CF])
{
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int k = 0; k < K; k++)
#pragma unroll
            for (int c = 0; c < CF; c++)
                acc[q][k][c] = kAccStart4;
}

/* The separable paths' row pass: one DP4A chain per output and channel
 * over the row's byte weights (a.w[0 .. WW - 1]), its sum biased like the
 * accumulators (|h| < 2^22), returned as a float without the bias (exact). */
template <int CF, int Q, int WW, int N>
__device__ __forceinline__ void conv2d_row_pass4(const fast_args<N> &a, const unsigned (&win)[CF][Q][WW],
                                                 float (&hf)[Q][CF])
{
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int c = 0; c < CF; c++) {
            int s = kAccStart4;
#pragma unroll
            for (int j = 0; j < WW; j++)
                s = conv2d_dp4a(win[c][q][j], __float_as_uint(a.w[j]), s);
            hf[q][c] = __fadd_rn(__int_as_float(s), -12582912.0f);
        }
}

/* The separable paths' column pass of input row r, whose row pass is hf:
 * exact integer products and sums in floats. kSeparable4: hf times each
 * column weight (a.w[WW + i]) into the M rows in progress. The cascades
 * leave in done the sums of output row r - (M - 1), complete: kBinomial4
 * as M - 1 stages of pairwise sums (acc[k] holds stage k of row r - 1;
 * stage k + 1 of row r is stage k of rows r and r - 1), kBox4 as a running
 * sum (acc[0 .. M - 2]: the row passes of rows r - 1 .. r - M + 1,
 * acc[M - 1] their sum). */
template <int DP, int M, int Q, int K, int CF, int N>
__device__ __forceinline__ void conv2d_column_pass4(const fast_args<N> &a, const float (&hf)[Q][CF],
                                                    int (&acc)[M][Q][K][CF], float (&done)[Q][CF])
{
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int c = 0; c < CF; c++) {
            if constexpr (DP == kBinomial4) {
                float v = hf[q][c];
#pragma unroll
                for (int k = 0; k < M - 1; k++) {
                    const float up = __fadd_rn(v, __int_as_float(acc[k][q][0][c]));
                    acc[k][q][0][c] = __float_as_int(v);
                    v = up;
                }
                done[q][c] = v;
            } else if constexpr (DP == kBox4) {
                const float t = __fadd_rn(__int_as_float(acc[M - 1][q][0][c]), hf[q][c]);
                done[q][c] = t;
                acc[M - 1][q][0][c] = __float_as_int(__fadd_rn(t, -__int_as_float(acc[M - 2][q][0][c])));
#pragma unroll
                for (int i = M - 2; i > 0; i--)
                    acc[i][q][0][c] = acc[i - 1][q][0][c];
                acc[0][q][0][c] = __float_as_int(hf[q][c]);
            }
        }
    if constexpr (DP == kSeparable4) {
        constexpr int WW = dp4<M>::WW;
#pragma unroll
        for (int i = 0; i < M; i++) {  /* input row r is mask row i of output row r - i */
            const float cw = a.w[WW + i];
#pragma unroll
            for (int q = 0; q < Q; q++)
#pragma unroll
                for (int c = 0; c < CF; c++)
                    acc[i][q][0][c] = __float_as_int(__fmaf_rn(hf[q][c], cw, __int_as_float(acc[i][q][0][c])));
        }
    }
}

/* DP4A (DP 1) and DP2A (DP 2): input row r's window words times mask row
 * i's packed weights into output row r - i, for every i and matrix. */
template <int DP, int M, int Q, int K, int CF, int WW, int N>
__device__ __forceinline__ void conv2d_dp_rows4(const fast_args<N> &a, const unsigned (&win)[CF][Q][WW],
                                                int (&acc)[M][Q][K][CF])
{
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
                            s = conv2d_dp2a<true>(wq, win[c][q][j], conv2d_dp2a<false>(wp, win[c][q][j], s));
                        else
                            s = conv2d_dp4a(win[c][q][j], wp, s);
                    }
            }
}

/* One matrix's finished row (quick modes): the bytes as conv2d_value
 * returns them, from the complete accumulators (biased) or, for the
 * cascades, from their plain sums; one FFMA and, unless the outputs are
 * known to be in range, a clamp. */
template <int MODE, bool IN_RANGE, bool CASCADE, int Q, int K, int CF>
__device__ __forceinline__ void conv2d_quick_values4(const int (&acc)[Q][K][CF], const float (&done)[Q][CF],
                                                     float mul, float top, float (&fv)[Q][CF])
{
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int c = 0; c < CF; c++) {
            float t;
            if constexpr (CASCADE)
                t = done[q][c];
            else
                t = __int_as_float(acc[q][0][c]);
            if constexpr (MODE == MODE_DIV_ODD && !CASCADE)
                t = __fadd_rn(t, -12582912.0f);  /* the sum itself */
            const float v = __fmaf_rn(t, mul, top);
            fv[q][c] = IN_RANGE ? v : fminf(fmaxf(v, kMagic), kMagic + 255.0f);
        }
}

/* The float path: input row r's pixels times mask row i into output row
 * r - i, the taps known to be 0 (ZERO) left out (acc + 0 * px is acc). */
template <unsigned ZERO, int M, int Q, int K, int CF, int NPX, int N>
__device__ __forceinline__ void conv2d_float_rows4(const fast_args<N> &a, const float (&px)[NPX][CF],
                                                   float (&acc)[M][Q][K][CF])
{
#pragma unroll
    for (int i = 0; i < M; i++)  /* input row r is mask row i of output row r - i */
#pragma unroll
        for (int mx = 0; mx < M; mx++)
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int wi = (k * M + i) * M + mx;
                if ((ZERO >> wi) & 1)
                    continue;
                const float wv = a.w[wi];
#pragma unroll
                for (int q = 0; q < Q; q++)
#pragma unroll
                    for (int c = 0; c < CF; c++)
                        acc[i][q][k][c] = fmaf(px[q + mx][c], wv, acc[i][q][k][c]);
            }
}

/* The rows in progress move one older: acc[i] <- acc[i - 1]. */
template <class T, int M, int Q, int K, int CF>
__device__ __forceinline__ void conv2d_shift_rows4(T (&acc)[M][Q][K][CF])
{
#pragma unroll
    for (int i = M - 1; i > 0; i--)
#pragma unroll
        for (int q = 0; q < Q; q++)
#pragma unroll
            for (int k = 0; k < K; k++)
#pragma unroll
                for (int c = 0; c < CF; c++)
                    acc[i][q][k][c] = acc[i - 1][q][k][c];
}

/* Output row y's sums, finished as conv2d_value does (MODE kModeAny:
 * the mode read from the header, 'div' its answer) and stored. */
template <int C, int CF, int K, int Q, int MODE>
__device__ __forceinline__ void conv2d_finish4(const fast_header &h, bool div, int y, int x,
                                               const float (&sums)[Q][K][CF])
{
    constexpr int COMB = K == 1 ? COMB_SUM : COMB_MAG;
    conv2d_finish_row<C, CF, K, Q>(sums, h, y, x, [&](const float (&s)[K]) {
        if constexpr (MODE == kModeAny)
            return div ? conv2d_value<MODE_DIV, COMB, K>(s, h) : conv2d_value<MODE_PRESCALED, COMB, K>(s, h);
        else
            return conv2d_value<MODE, COMB, K>(s, h);
    });
}

/* The outputs of input row r, one function per path, called by
 * conv2d_body4's step once row r's words are in 'mine': each adds the row
 * to the sums in progress and finishes output row j = r - (M - 1) when it
 * is complete (j >= 0), stored at 'out' (wide: the row's bytes at a
 * running pointer, moved on a row) or through conv2d_store. */

/* RGBA box masks as running sums: row r in, row r - M ('leaving') out. */
template <int C, int CF, int Q, int M, int NWD>
__device__ __forceinline__ void conv2d_running_step4(const fast_header &h, int r, int x, int y0,
                                                     const unsigned (&mine)[NWD],
                                                     const unsigned (&leaving)[NWD],
                                                     conv2d_running4<Q, M> &sums, float mul, bool wide,
                                                     unsigned char *&out, size_t row_bytes)
{
    static_assert(M <= 31 && row4<C, Q, M>::SW == row4<C, Q, M>::RAD, "the running sums' halo");
    conv2d_running_row4<Q, M>(mine, leaving, sums);
    if (r >= M - 1) {
        float fv[Q][CF];
        conv2d_running_finish4<CF, Q, M>(sums, mul, fv);
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
}

/* The RGBA 3x3 gradient pairs in 16-bit lanes; alpha from the centre
 * row's words, kept in lanes.own. */
template <int C, int CF, int Q, int M, int G, int NWD>
__device__ __forceinline__ void conv2d_gradient_step4(const fast_header &h, int r, int x, int y0,
                                                      const unsigned (&mine)[NWD], conv2d_lanes4<Q> &lanes,
                                                      const float (&mul)[2], bool wide, unsigned char *&out,
                                                      size_t row_bytes)
{
    unsigned gx[Q][2], gy[Q][2];
    conv2d_gradient_row4<G, Q>(mine, lanes, gx, gy);
    if (r >= M - 1) {  /* output row r - 1 of the image's rows y0 - 1 .. */
        float fv[Q][CF];
        conv2d_gradient_finish4<CF, Q, G>(gx, gy, mul, fv);
        if (wide)
            conv2d_store_wide<C, CF, Q>(out, fv, lanes.own);
        else
            conv2d_store<C, CF, Q>(h, y0 + r - (M - 1), x, fv, lanes.own);
        out += row_bytes;
    }
#pragma unroll
    for (int q = 0; q < Q; q++)
        lanes.own[q] = mine[row4<C, Q, M>::SW + q];
}

/* The integer paths (DP4A, DP2A, the separable ones and their cascades):
 * exact sums, finished by one FFMA (QUICK: one matrix prescaled with no
 * offset, or over an odd integer; the cascades' sums are plain floats, not
 * biased) or by conv2d_finish4. WIDE: the path may store at 'out'. */
template <int C, int CF, int K, int M, int Q, int DP, int MODE, bool IN_RANGE, bool QUICK, bool CASCADE,
          bool WIDE, int NWD>
__device__ __forceinline__ void conv2d_integer_step4(const fast_args<K * M * M> &a, const fast_header &h, int r,
                                                     int x, int y0, const unsigned (&mine)[NWD],
                                                     int (&acc)[M][Q][K][CF], const float (&mul)[K],
                                                     const float (&sub)[K], const float (&top)[K], bool div,
                                                     bool wide, unsigned char *&out, size_t row_bytes)
{
    unsigned win[CF][Q][dp4<M>::WW];
    conv2d_windows4<C, CF, Q, M>(mine, win);
    if constexpr (!CASCADE)
        conv2d_start_row4(acc[0]);  /* output row r starts */
    /* the cascades: the sums of output row r - (M - 1), complete */
    [[maybe_unused]] float done[Q][CF];
    if constexpr (conv2d_separable4(DP)) {
        float hf[Q][CF];
        conv2d_row_pass4(a, win, hf);
        conv2d_column_pass4<DP>(a, hf, acc, done);
    } else {
        conv2d_dp_rows4<DP>(a, win, acc);
    }
    const int j = r - (M - 1);  /* acc[M - 1] is output row j, complete now */
    if (j >= 0 && QUICK) {
        float fv[Q][CF];  /* the bytes, as conv2d_value returns them */
        conv2d_quick_values4<MODE, IN_RANGE, CASCADE>(acc[M - 1], done, mul[0], top[0], fv);
        if constexpr (WIDE) {
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
                    sums[q][k][c] = __fmaf_rn(__int_as_float(acc[M - 1][q][k][c]), mul[k], sub[k]);
        conv2d_finish4<C, CF, K, Q, MODE>(h, div, y0 + j, x, sums);
    }
}

/* The float path: row r's pixels (gathered where not fast) times every
 * mask row; output row r - (M - 1) finished by conv2d_finish4. */
template <int C, int CF, int K, int M, int Q, unsigned ZERO, int MODE, int NWD>
__device__ __forceinline__ void conv2d_float_step4(const fast_args<K * M * M> &a, int r, int x, int y0, int ym,
                                                   bool fast, bool div, const unsigned (&mine)[NWD],
                                                   float (&acc)[M][Q][K][CF])
{
    float px[Q + M - 1][CF];
    conv2d_pixels4<C, CF, Q, M>(a.h, ym, x, fast, mine, px);
    conv2d_zero(acc[0]);
    conv2d_float_rows4<ZERO>(a, px, acc);
    const int j = r - (M - 1);  /* acc[M - 1] is output row j, complete now */
    if (j >= 0)
        conv2d_finish4<C, CF, K, Q, MODE>(a.h, div, y0 + j, x, acc[M - 1]);
}

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
 * 3x3 gradient pairs also keep one copy per value of 'fast' (the fast
 * path's copy has no branch around the gathers: 7% on gray sobel, where
 * RGBA sobel lost 2%, in lanes 4%, and gray box3 spilled).
 *
 * Running: inside the image, the next row to fetch is a pointer, one row
 * further at each fetch (a pointer add, with the halo copies at constant
 * offsets from it), except for RGBA 3x3 with alpha copied, which spilled
 * at its 80 registers with the pointer's two. Wide stores: the quick
 * outputs' rows, when every channel is computed and the row's bytes are
 * aligned (fast: the rows' length; h.vec: both buffers), go at a running
 * pointer, with no address arithmetic or alignment test per row; the same
 * for the lanes kernels, whose copied channels come from registers. */
template <int C, int CF, int K, int M, int Q, unsigned ZERO, int DP, int MODE, bool IN_RANGE = false>
__device__ __forceinline__ void conv2d_body4(const fast_args<K * M * M> &a, int x, int y0, int steps)
{
    using R = row4<C, Q, M>;
    const fast_header &h = a.h;
    /* input rows of the thread's strip: 'steps' tiles of conv2d_rows4 rows,
     * one ring all the way down */
    const int IN = conv2d_rows4<C, K, M>() * steps + M - 1;
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
    /* inside: the next row to fetch (running: see above) */
    constexpr bool running = !(C == 4 && CF == 3 && K == 1 && M == 3 && DP != 0);
    const unsigned char *next = running && inside ? column + (size_t)(y0 - R::RAD) * row_bytes : column;
    /* the strip ('fast' a constant for the gray 3x3 gradient pairs) */
    auto strip = [&](auto fast_v) {
        const bool fast = fast_v;
        auto fetch = [&](int r) {  /* row r (each r once, in order) into its slot, as one group */
            if (running && fast && r < rows && inside) {
                conv2d_fetch4(ring, r % S, next, false);
                if constexpr (box_run)  /* row r - M, zeros before the first */
                    conv2d_fetch4(ring, S + r % S, r < M ? next : next - M * row_bytes, r < M);
            } else if (fast && r < rows) {  /* the constant border's row -1: row 0's address, */
                const int ym = row_of(r);   /* zeros for the integer paths (the float path tests ym) */
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
        constexpr bool quick = K == 1 && (MODE == MODE_PRESCALED_NO_OFFSET || MODE == MODE_DIV_ODD);
        constexpr bool cascade = DP == kBinomial4 || DP == kBox4;  /* one quick mode each */
        static_assert((!cascade && !box_run && !IN_RANGE) || quick, "quick outputs only");
        static_assert(!box_run || (C == 4 && K == 1 && MODE == MODE_DIV_ODD && IN_RANGE && Q * C == 16),
                      "RGBA box masks over an odd integer, in range, 4 pixels a thread");
        [[maybe_unused]] conv2d_running4<Q, M> sums = conv2d_running4<Q, M>::start();
        constexpr bool gradient = conv2d_gradient4(DP);
        static_assert(!gradient || (C == 4 && K == 2 && M == 3 && MODE == MODE_PRESCALED_NO_OFFSET),
                      "RGBA 3x3 gradient pairs, prescaled without offsets");
        [[maybe_unused]] conv2d_lanes4<Q> lanes = {};
        /* wide stores (see above) */
        constexpr bool kWide = ((quick && CF == C) || gradient || box_run) && (Q * C == 4 || Q * C == 8 || Q * C == 16);
        /* both unread where kWide is false (the float path, the DP4A gradient pairs) */
        [[maybe_unused]] const bool wide = kWide && fast && h.vec && h.cf == CF && x + Q <= h.width;
        [[maybe_unused]] unsigned char *out = h.dst + ((size_t)y0 * h.width + x) * C;  /* output row y0 */
        float mul[K], sub[K], top[K];
        conv2d_scales4<MODE == MODE_DIV_ODD || cascade>(h, div, mul, sub, top);
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
                conv2d_running_step4<C, CF, Q, M>(h, r, x, y0, mine, leaving, sums, mul[0], wide, out, row_bytes);
            } else if constexpr (gradient) {
                if (!fast)
                    conv2d_gather4<C, Q, M>(h, row_of(r), x, mine);
                conv2d_gradient_step4<C, CF, Q, M, DP - kGradient4>(h, r, x, y0, mine, lanes, mul, wide, out,
                                                                    row_bytes);
            } else if constexpr (DP) {
                if (!fast)
                    conv2d_gather4<C, Q, M>(h, row_of(r), x, mine);
                conv2d_integer_step4<C, CF, K, M, Q, DP, MODE, IN_RANGE, quick, cascade, kWide>(
                    a, h, r, x, y0, mine, acc, mul, sub, top, div, wide, out, row_bytes);
            } else {
                conv2d_float_step4<C, CF, K, M, Q, ZERO, MODE>(a, r, x, y0, row_of(r), fast, div, mine, acc);
            }
            if constexpr (!cascade && !gradient && !box_run)  /* (those move their own) */
                conv2d_shift_rows4(acc);  /* the rows in progress move one older */
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
