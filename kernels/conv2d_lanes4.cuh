/* conv2d_lanes4.cuh - version 4's paths in 16-bit lanes on RGBA (two
 * channels an instruction), used by conv2d_body4 (conv2d_direct.cuh):
 * the 3x3 gradient pairs (kGradient4 + i) and box masks as running sums
 * (kRunning4). Their sums are exact integers, so they give the bytes of
 * every other path. */
#ifndef GF_KERNELS_CONV2D_LANES4_CUH
#define GF_KERNELS_CONV2D_LANES4_CUH

#include "conv2d_ring4.cuh"

namespace {

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

}  // namespace

#endif /* GF_KERNELS_CONV2D_LANES4_CUH */
