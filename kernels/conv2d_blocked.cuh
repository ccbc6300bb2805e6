/* conv2d_blocked.cuh - version 2 of the 2-D correlation: register
 * blocking, for any mask.
 *
 * Each thread computes P x Q outputs (P rows, Q adjacent columns) with a
 * window of Q pixels sliding along each input row in registers: a row
 * costs Q + w - 1 shared loads for P x Q x w FMA per channel and matrix.
 * The shared tile is float (each byte converted once, when staged, by
 * conv2d_stage; one LDS.128 per RGBA pixel and window step); the weights
 * are kernel parameters (the constant bank: FFMA operands, no loads), or in
 * shared memory when they do not fit the parameters (WS). 3x3 (one or two
 * matrices), 5x5 and 7x7 are fully unrolled with compile-time weight
 * indices; every other size runs one generic kernel per matrix count (P =
 * 1, the column loop unrolled to 31 with a run-time exit). A block walks
 * down a column of tiles, keeping the last h - 1 input rows in a ring, so
 * each input row is staged once per column of blocks. Zero taps of the
 * gradient pairs (sobel, prewitt, scharr) are skipped by an instantiation
 * of their own.
 *
 * P x Q per instantiation (conv2d.cu's table): 3x3 one matrix, 5x5, 7x7:
 * 4 x 4; 3x3 two matrices: 2 x 4; generic one or two matrices: 1 x 8;
 * three or four: 1 x 4. Blocks of (tw / Q, th / P) threads, tw a multiple
 * of 8, th of 4, at most kMaxThreads.
 *
 * Invariant: every output accumulates in version 1's order (mask rows,
 * then columns, one fmaf each) and is finished by conv2d_value, so the
 * bytes are version 1's for any mask, fractional weights included. */
#ifndef GF_KERNELS_CONV2D_BLOCKED_CUH
#define GF_KERNELS_CONV2D_BLOCKED_CUH

#include "conv2d_common.cuh"

namespace {

/* One input row r (0-based from the thread's first input row) into the
 * accumulators of the thread's P x Q outputs: output row j takes it as its
 * mask row my = r - j. A window of Q pixels slides along the row, one new
 * pixel per mask column, so the row costs Q + w - 1 shared loads. Every
 * output accumulates in version 1's order: mask rows, then columns. */
template <int C, int CF, int K, int MW, int MH, int P, int Q, bool WS, int NW>
__device__ __forceinline__ void conv2d_row2(float (&acc)[P][Q][K][CF], const float *tile,
                                            int row_at, const int (&cls)[Q], int r, int mw, int mh,
                                            const fast_args<NW> &a, const float *wsh)
{
    constexpr int CP = slot_floats<C>::value;
    float win[Q][CP];
#pragma unroll
    for (int q = 0; q < Q; q++)
        conv2d_lds<C>(tile, row_at + cls[q], win[q]);
#pragma unroll
    for (int mx = 0; mx < (MW ? MW : kMaxMask); mx++) {
        if (!MW && mx >= mw)
            break;
        if (mx > 0) {
#pragma unroll
            for (int q = 0; q + 1 < Q; q++)
#pragma unroll
                for (int c = 0; c < CP; c++)
                    win[q][c] = win[q + 1][c];
            const int i = Q + mx - 1;  /* the pixel entering the window */
            conv2d_lds<C>(tile, row_at + cls[i % Q] + i / Q, win[Q - 1]);
        }
#pragma unroll
        for (int j = 0; j < P; j++) {
            const int my = r - j;
            if (MH && (my < 0 || my >= MH))
                continue;  /* compile-time: r is unrolled when MH is */
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int wi = (k * mh + my) * mw + mx;
                const float wv = WS ? wsh[wi] : a.w[wi];
#pragma unroll
                for (int q = 0; q < Q; q++)
#pragma unroll
                    for (int c = 0; c < CF; c++)
                        acc[j][q][k][c] = fmaf(win[q][c], wv, acc[j][q][k][c]);
            }
        }
    }
}

template <int C, int CF, int K, int P, int Q, int MODE, int COMB>
__device__ __forceinline__ void conv2d_emit2(const float (&acc)[P][Q][K][CF], const fast_header &h,
                                             int y, int x)
{
#pragma unroll
    for (int j = 0; j < P; j++) {
        if (y + j >= h.height)
            break;
        conv2d_finish_row<C, CF, K, Q>(acc[j], h, y + j, x, [&](const float (&s)[K]) {
            return conv2d_value<MODE, COMB, K>(s, h);
        });
    }
}

/* One switch per step on the (uniform) mode and combination: the finish
 * code is specialised for each. One matrix: SUM and MAG only (the host maps
 * MAX and MIN of one matrix to SUM). */
template <int C, int CF, int K, int P, int Q>
__device__ __forceinline__ void conv2d_emit2_any(const float (&acc)[P][Q][K][CF],
                                                 const fast_header &h, int y, int x)
{
#define CONV2D_EMIT(MODE)                                                                     \
    switch (K == 1 && h.comb != COMB_MAG ? COMB_SUM : h.comb) {                               \
    case COMB_MAG: conv2d_emit2<C, CF, K, P, Q, MODE, COMB_MAG>(acc, h, y, x); break;         \
    case COMB_MAX: if (K > 1) conv2d_emit2<C, CF, K, P, Q, MODE, COMB_MAX>(acc, h, y, x); break; \
    case COMB_MIN: if (K > 1) conv2d_emit2<C, CF, K, P, Q, MODE, COMB_MIN>(acc, h, y, x); break; \
    default:       conv2d_emit2<C, CF, K, P, Q, MODE, COMB_SUM>(acc, h, y, x); break;         \
    }
    if (h.mode == MODE_PRESCALED_NO_OFFSET) {
        CONV2D_EMIT(MODE_PRESCALED_NO_OFFSET)
    } else if (h.mode == MODE_PRESCALED) {
        CONV2D_EMIT(MODE_PRESCALED)
    } else {
        CONV2D_EMIT(MODE_DIV)
    }
#undef CONV2D_EMIT
}

/* Register cap of a version 2 instantiation: 96 when its accumulators and
 * window take at most 64 (checked: no spills), so that 5 blocks of 128
 * threads fit an SM (20 warps to overlap one block's loads with the
 * others' FMAs); 128 (2 blocks of 256) otherwise. */
template <int C, int CF, int K, int P, int Q> struct conv2d_registers {
    static constexpr int value = P * Q * K * CF + Q * slot_floats<C>::value <= 64 ? 96 : 128;
};

/* MW, MH: the mask size, or 0 for the generic kernel (run-time size, the
 * column loop unrolled to 31 with an exit, P == 1). WS: weights in shared
 * memory (from h.wdev) instead of the parameters. CF: channels computed;
 * h.cf <= CF says which of them are written (the rest are copied). */
template <int C, int CF, int K, int MW, int MH, int P, int Q, bool WS, int NW>
__global__ void __maxnreg__((conv2d_registers<C, CF, K, P, Q>::value))
    conv2d_kernel2(const fast_args<NW> a)
{
    static_assert(MH > 0 || P == 1, "the generic kernel computes one row per thread");
    extern __shared__ __align__(16) float conv2d_smem2[];
    const fast_header &h = a.h;
    const int mw = MW ? MW : h.mw, mh = MH ? MH : h.mh;
    const int taps = K * mw * mh;
    float *wsh = conv2d_smem2;
    float *tile = conv2d_smem2 + (WS ? (taps + 3) & ~3 : 0);
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int nt = blockDim.x * blockDim.y, tid = ty * blockDim.x + tx;
    if (WS)
        for (int i = tid; i < taps; i += nt)
            wsh[i] = h.wdev[i];  /* visible after the first staging barrier */

    const int TW = h.tw, TH = h.th;
    const int L = TW + mw - 1, R = TH + mh - 1;
    const int x0 = blockIdx.x * TW, xin = x0 - mw / 2;
    const int ystrip = blockIdx.y * h.steps * TH, yin = ystrip - mh / 2;
    const bool interior = h.flat && xin >= 0 && xin + L <= h.width;
    int cls[Q];  /* slot of the thread's window pixel q in a row */
#pragma unroll
    for (int q = 0; q < Q; q++)
        cls[q] = q * h.lq + tx;

    for (int s = 0; s < h.steps; s++) {
        const int y0 = ystrip + s * TH;
        if (y0 >= h.height)
            break;
        /* ring row i holds image row yin + i in slot i mod R; step s needs
         * ring rows s*TH .. s*TH + R - 1, of which the first R - TH are
         * already there after step 0 */
        const int first = s == 0 ? 0 : s * TH + mh - 1;
        if (s > 0)
            __syncthreads();  /* the slots to overwrite are no longer read */
        /* a thread stages about P * (1 + (w - 1) / tw) groups per step */
        conv2d_stage<C, CF, Q, P + (P + 3) / 4>(h, tile, xin, L, yin + first, s == 0 ? R : TH,
                                                first % R, R, interior, tid, nt);
        __syncthreads();

        float acc[P][Q][K][CF];
        conv2d_zero(acc);
        const int base = (s * TH + ty * P) % R;
        if constexpr (MH > 0) {
#pragma unroll
            for (int r = 0; r < P + MH - 1; r++) {
                const int slot = base + r < R ? base + r : base + r - R;
                conv2d_row2<C, CF, K, MW, MH, P, Q, WS, NW>(acc, tile, slot * h.rs, cls, r, mw, mh,
                                                            a, wsh);
            }
        } else {
#pragma unroll 1
            for (int r = 0; r < mh; r++) {
                const int slot = base + r < R ? base + r : base + r - R;
                conv2d_row2<C, CF, K, MW, MH, P, Q, WS, NW>(acc, tile, slot * h.rs, cls, r, mw, mh,
                                                            a, wsh);
            }
        }

        const int y = y0 + ty * P, x = x0 + Q * tx;
        if (x < h.width)
            conv2d_emit2_any<C, CF, K, P, Q>(acc, h, y, x);
    }
}

}  /* namespace */

#endif /* GF_KERNELS_CONV2D_BLOCKED_CUH */
