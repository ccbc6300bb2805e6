/* conv2d_separable.cuh - version 3 of the 2-D correlation: one-matrix
 * masks that factor as a column times a row (gaussian, box), in one fused
 * kernel.
 *
 * Per step the new input rows are staged as floats (conv2d_stage), a row
 * pass (8 outputs a thread, a window of 8 + w - 1 pixels) writes float rows
 * into a ring in shared memory, XOR-swizzled (conv2d_swizzle) so that both
 * passes are conflict-free, then a column pass (8 rows of one column a
 * thread) reads the ring. w + h FMA per pixel and channel instead of
 * w x h, any size up to 31x31 with one kernel, no scratch memory: one read
 * and one write of the image whatever the size. Blocks of (tw, th / 8)
 * threads, tw and th multiples of 8.
 *
 * The factors come from the plan (integer factors derived from integer
 * 2-D weights, or the caller's row and column). The sum is taken in
 * another order than version 1's: equal for integer factors, within one
 * level otherwise. */
#ifndef GF_KERNELS_CONV2D_SEPARABLE_CUH
#define GF_KERNELS_CONV2D_SEPARABLE_CUH

#include "conv2d_common.cuh"

namespace {

/* Ring slot of column x of the row-pass results: an XOR swizzle inside each
 * group of n slots (n = slots per 128-byte bank line) makes both the row
 * pass's writes (thread t: columns 8t..8t+7) and the column pass's reads
 * (thread t: column t) conflict-free. */
template <int C>
__device__ __forceinline__ int conv2d_swizzle(int x)
{
    constexpr int n = 32 / slot_floats<C>::value, ln = log2_of(n);
    return x ^ ((x >> ln) & (n - 1));
}

template <int C, int CF, int MODE, int COMB>
__device__ __forceinline__ void conv2d_emit3(const float (&acc)[8][CF], const fast_header &h, int y,
                                             int x)
{
    const size_t o = ((size_t)y * h.width + x) * C;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        if (y + j >= h.height)
            break;
        const size_t at = o + (size_t)j * h.width * C;
        float fv[CF];
#pragma unroll
        for (int c = 0; c < CF; c++) {
            const float s[1] = {acc[j][c]};
            fv[c] = conv2d_value<MODE, COMB, 1>(s, h);
        }
        if (C == 4 && h.vec && h.cf == CF) {
            unsigned w = conv2d_pack(fv[0], fv[1 < CF ? 1 : 0], fv[2 < CF ? 2 : 0], fv[CF - 1]);
            if (CF < 4)  /* alpha from the source word */
                w = __byte_perm(w, *reinterpret_cast<const unsigned *>(h.src + at), 0x7210u);
            *reinterpret_cast<unsigned *>(h.dst + at) = w;
        } else {
#pragma unroll
            for (int c = 0; c < C; c++)
                h.dst[at + c] = c < CF && c < h.cf ? (unsigned char)__float_as_uint(fv[c < CF ? c : 0])
                                                   : h.src[at + c];
        }
    }
}

/* conv2d_emit3 for the header's mode and combination. */
template <int C, int CF>
__device__ __forceinline__ void conv2d_emit3_any(const float (&acc)[8][CF], const fast_header &h, int y,
                                                 int x)
{
    const bool mag = h.comb == COMB_MAG;
    if (h.mode == MODE_PRESCALED_NO_OFFSET) {
        if (mag)
            conv2d_emit3<C, CF, MODE_PRESCALED_NO_OFFSET, COMB_MAG>(acc, h, y, x);
        else
            conv2d_emit3<C, CF, MODE_PRESCALED_NO_OFFSET, COMB_SUM>(acc, h, y, x);
    } else if (h.mode == MODE_PRESCALED) {
        if (mag)
            conv2d_emit3<C, CF, MODE_PRESCALED, COMB_MAG>(acc, h, y, x);
        else
            conv2d_emit3<C, CF, MODE_PRESCALED, COMB_SUM>(acc, h, y, x);
    } else {
        if (mag)
            conv2d_emit3<C, CF, MODE_DIV, COMB_MAG>(acc, h, y, x);
        else
            conv2d_emit3<C, CF, MODE_DIV, COMB_SUM>(acc, h, y, x);
    }
}

/* Block: (tw, th / 8) threads. Per step: the rows not yet in the ring are
 * staged (at most th at a time), each thread runs the row pass on 8
 * adjacent columns of one staged row into the ring; then each thread runs
 * the column pass on 8 rows of its own column. Weights: row in w[0..31],
 * column in w[32..63] (compile-time indices: FFMA constant operands). */
template <int C, int CF, bool WS>
__global__ void __launch_bounds__(kMaxThreads, 2) conv2d_kernel3(const fast_args<64> a)
{
    extern __shared__ __align__(16) float conv2d_smem2[];
    constexpr int CP = slot_floats<C>::value;
    const fast_header &h = a.h;
    const int mw = h.mw, mh = h.mh;
    const int TW = h.tw, TH = h.th;
    const int L = TW + mw - 1, R = TH + mh - 1;
    float *wsh = conv2d_smem2;
    float *in = conv2d_smem2 + (WS ? 64 : 0);
    float *ring = in + (size_t)TH * h.rs * CP;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int nt = blockDim.x * blockDim.y, tid = ty * blockDim.x + tx;
    if (WS) {
        for (int i = tid; i < mw; i += nt)
            wsh[i] = h.rowdev[i];
        for (int i = tid; i < mh; i += nt)
            wsh[32 + i] = h.coldev[i];
    }
    /* row pass: thread -> staged row hr, columns 8 hx .. 8 hx + 7 */
    const int nxh = TW / 8, hr = tid / nxh, hx = tid - hr * nxh;
    int cls[8];
#pragma unroll
    for (int q = 0; q < 8; q++)
        cls[q] = q * h.lq + hx;
    const int x0 = blockIdx.x * TW, xin = x0 - mw / 2;
    const int ystrip = blockIdx.y * h.steps * TH, yin = ystrip - mh / 2;
    const bool interior = h.flat && xin >= 0 && xin + L <= h.width;
    const int vcol = conv2d_swizzle<C>(tx);

    int next = 0;  /* next ring row (input row yin + next) to compute */
    for (int s = 0; s < h.steps; s++) {
        const int y0 = ystrip + s * TH;
        if (y0 >= h.height)
            break;
        const int need = s * TH + R;
        while (next < need) {
            const int count = need - next < TH ? need - next : TH;
            __syncthreads();  /* 'in' and the ring slots to overwrite are free */
            conv2d_stage<C, CF, 8, 2>(h, in, xin, L, yin + next, count, 0, 1 << 30, interior, tid, nt);
            __syncthreads();
            if (hr < count) {
                float acc[8][CF];
                conv2d_zero(acc);
                const int row_at = hr * h.rs;
                float win[8][CP];
#pragma unroll
                for (int q = 0; q < 8; q++)
                    conv2d_lds<C>(in, row_at + cls[q], win[q]);
#pragma unroll
                for (int mx = 0; mx < kMaxMask; mx++) {
                    if (mx >= mw)
                        break;
                    if (mx > 0) {
#pragma unroll
                        for (int q = 0; q < 7; q++)
#pragma unroll
                            for (int c = 0; c < CP; c++)
                                win[q][c] = win[q + 1][c];
                        const int i = 7 + mx;
                        conv2d_lds<C>(in, row_at + cls[i % 8] + i / 8, win[7]);
                    }
                    const float wv = WS ? wsh[mx] : a.w[mx];
#pragma unroll
                    for (int q = 0; q < 8; q++)
#pragma unroll
                        for (int c = 0; c < CF; c++)
                            acc[q][c] = fmaf(win[q][c], wv, acc[q][c]);
                }
                const int slot = (next + hr) % R;
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    float v[CP];
#pragma unroll
                    for (int c = 0; c < CP; c++)
                        v[c] = c < CF ? acc[q][c < CF ? c : 0] : 0.0f;
                    conv2d_sts<C>(ring, slot * h.hrs + conv2d_swizzle<C>(8 * hx + q), v);
                }
            }
            next += count;
        }
        __syncthreads();

        /* column pass: thread -> column tx, rows 8 ty .. 8 ty + 7 */
        float acc[8][CF];
        conv2d_zero(acc);
        const int base = (s * TH + 8 * ty) % R;
        auto ring_at = [&](int i) {
            const int r = base + i < R ? base + i : base + i - R;
            return r * h.hrs + vcol;
        };
        float win[8][CP];
#pragma unroll
        for (int j = 0; j < 8; j++)
            conv2d_lds<C>(ring, ring_at(j), win[j]);
#pragma unroll
        for (int my = 0; my < kMaxMask; my++) {
            if (my >= mh)
                break;
            if (my > 0) {
#pragma unroll
                for (int j = 0; j < 7; j++)
#pragma unroll
                    for (int c = 0; c < CP; c++)
                        win[j][c] = win[j + 1][c];
                conv2d_lds<C>(ring, ring_at(7 + my), win[7]);
            }
            const float wv = WS ? wsh[32 + my] : a.w[32 + my];
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int c = 0; c < CF; c++)
                    acc[j][c] = fmaf(win[j][c], wv, acc[j][c]);
        }
        const int y = y0 + 8 * ty, x = x0 + tx;
        if (x < h.width && y < h.height)
            conv2d_emit3_any<C, CF>(acc, h, y, x);
    }
}

}  /* namespace */

#endif /* GF_KERNELS_CONV2D_SEPARABLE_CUH */
