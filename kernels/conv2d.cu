/* conv2d.cu - the CUDA 2-D correlation: every kernel instantiation and the
 * table the planner (conv2d_plan.cu) launches them through.
 *
 * An interleaved 8-bit image of 1..4 channels is correlated with 1..4
 * matrices of up to 31x31, the responses combined per pixel (magnitude,
 * max, min, sum), scaled, offset, rounded half to even and clamped to a
 * byte; channels past channels_filtered are copied. Five versions, each a
 * family of kernels in a header of its own:
 *
 *   0 naive      (conv2d_tiled.cuh) one thread an output, every tap read
 *                from global memory through the border mapping: the
 *                correctness baseline.
 *   1 tiled      (conv2d_tiled.cuh) the block's tile and halo staged in
 *                shared memory once, the border mapped while staging.
 *   2 blocked    (conv2d_blocked.cuh) any mask: P x Q outputs a thread, a
 *                window of Q pixels sliding along each staged float row,
 *                weights in the parameter bank; 3x3, 5x5 and 7x7 fully
 *                unrolled, a generic kernel for the rest. Version 1's bytes.
 *   3 separable  (conv2d_separable.cuh) one-matrix masks that factor as a
 *                column times a row: a fused row pass and column pass
 *                through a ring in shared memory, w + h FMA a pixel.
 *   4 direct     no staging barrier: each thread streams its own rows. The
 *                plan picks the first path that fits the mask
 *                (conv2d_make_plan): row streams of 3x3 separable masks
 *                (conv2d_stream.cuh), the tensor cores for 11x11 to 31x31
 *                of byte factors (conv2d_mma.cuh), box masks as prefix sums
 *                across a warp (conv2d_scan.cuh), and in conv2d_direct.cuh
 *                running sums of box masks, the separable integer path,
 *                DP4A / DP2A for integer weights, 16-bit lanes for the
 *                gradient pairs, float for the rest.
 *
 * Roofline, per output pixel of C channels, K matrices, T = w x h taps:
 * C bytes read and C written, 2 T C K flops (one FMA a tap, channel and
 * matrix). An H100 copies ~3.0 TB/s and issues ~60 TFLOP/s of FP32, a
 * balance near 20 flop/B: RGBA 3x3 (9 flop/B) is memory-bound, 5x5 sits
 * at the balance, 7x7 and above are compute-bound (or bound by the issue
 * of what feeds the FMAs). Each family's header gives its own budget.
 *
 * Arithmetic (conv2d_common.cuh): integer weights give exact integer sums,
 * so every version and path returns the CPU reference's bytes for the
 * built-in masks; versions 2 and 4 also keep version 1's summation order
 * and finishing operations for fractional weights, version 3 may differ by
 * one level there.
 *
 * Instantiations: each family's kernels are templates over the channel
 * layout (C channels, CF computed), the mask size and the path; the table
 * below names every instantiation once, with its runner (which fills the
 * kernel's parameters and launches it) and the facts the planner matches a
 * launch against. A kernel not in the table is not compiled. */
#include <assert.h>
#include <string.h>

#include "conv2d_tiled.cuh"
#include "conv2d_blocked.cuh"
#include "conv2d_separable.cuh"
#include "conv2d_direct.cuh"
#include "conv2d_scan.cuh"
#include "conv2d_mma.cuh"
#include "conv2d_stream.cuh"
#include "conv2d_plan.cuh"

namespace {

template <int NW>
static void conv2d_fill(fast_args<NW> &a, const conv2d_plan &pl)
{
    a.h = pl.h;
    /* bit copies: the DP4A path's packed weights are not meant as floats;
     * every runner that reads weights holds all the plan packed */
    assert(pl.nw >= 0 && pl.nw <= NW);
    const int n = pl.nw;
    memcpy(a.w, pl.w, (size_t)n * sizeof(float));
    memset(a.w + n, 0, (size_t)(NW - n) * sizeof(float));
}

template <int C, int CF, int K, int MW, int MH, int P, int Q, bool WS, int NW>
static cudaError_t conv2d_run2(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<NW> args;
    conv2d_fill(args, pl);
    return conv2d_start(conv2d_kernel2<C, CF, K, MW, MH, P, Q, WS, NW>, pl.grid, pl.block,
                        pl.shared, stream, args);
}

template <int C, int CF, int K, int M, int Q, unsigned ZERO, int DP, int MODE4>
static cudaError_t conv2d_run4(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<K * M * M> args;
    conv2d_fill(args, pl);
    return conv2d_start(conv2d_kernel4<C, CF, K, M, Q, ZERO, DP, MODE4>, pl.grid, pl.block, pl.shared,
                        stream, args);
}

template <int C, int CF, int M>
static cudaError_t conv2d_run_scan4(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<1> args;  /* the prefix sums read no weight: a box's are all one */
    args.h = pl.h;
    args.w[0] = 0.0f;
    return conv2d_start(conv2d_scan_kernel4<C, CF, M>, pl.grid, pl.block, pl.shared, stream, args);
}

template <int C, int CF, int M>
static cudaError_t conv2d_run_mma4(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<16> args;
    conv2d_fill(args, pl);
    return conv2d_start(conv2d_mma_kernel4<C, CF, M>, pl.grid, pl.block, pl.shared, stream, args);
}

template <int C, int CF, int MODE4, int SHAPE>
static cudaError_t conv2d_run_stream4(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<16> args;
    conv2d_fill(args, pl);
    return conv2d_start(conv2d_stream_kernel4<C, CF, MODE4, SHAPE>, pl.grid, pl.block, pl.shared, stream,
                        args);
}

template <int C, int CF, bool WS>
static cudaError_t conv2d_run3(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<64> args;
    conv2d_fill(args, pl);
    return conv2d_start(conv2d_kernel3<C, CF, WS>, pl.grid, pl.block, pl.shared, stream, args);
}

#define CONV2D_V2(C, CF, K, M, P, Q, WS, NW)                                                  \
    {2, C, CF, K, M, M, P, Q, WS, 0u, (const void *)conv2d_kernel2<C, CF, K, M, M, P, Q, WS, NW>, \
     conv2d_run2<C, CF, K, M, M, P, Q, WS, NW>, kModeAny}
/* fully unrolled sizes (weights as parameters), then the generic kernel */
#define CONV2D_V2_LAYOUT(C, CF)                                                               \
    CONV2D_V2(C, CF, 1, 3, 4, 4, false, 9), CONV2D_V2(C, CF, 2, 3, 2, 4, false, 18),          \
    CONV2D_V2(C, CF, 1, 5, 4, 4, false, 25), CONV2D_V2(C, CF, 1, 7, 4, 4, false, 49),         \
    CONV2D_V2(C, CF, 1, 0, 1, 8, false, kParamWeights),                                        \
    CONV2D_V2(C, CF, 2, 0, 1, 8, false, kParamWeights),                                        \
    CONV2D_V2(C, CF, 3, 0, 1, 4, false, kParamWeights),                                        \
    CONV2D_V2(C, CF, 4, 0, 1, 4, false, kParamWeights),                                        \
    CONV2D_V2(C, CF, 1, 0, 1, 8, true, 4), CONV2D_V2(C, CF, 2, 0, 1, 8, true, 4),              \
    CONV2D_V2(C, CF, 3, 0, 1, 4, true, 4), CONV2D_V2(C, CF, 4, 0, 1, 4, true, 4)
#define CONV2D_V3(C, CF)                                                                      \
    {3, C, CF, 1, 0, 0, 8, 8, false, 0u, (const void *)conv2d_kernel3<C, CF, false>,          \
     conv2d_run3<C, CF, false>, kModeAny},                                                     \
    {3, C, CF, 1, 0, 0, 8, 8, true, 0u, (const void *)conv2d_kernel3<C, CF, true>,            \
     conv2d_run3<C, CF, true>, kModeAny}

/* version 4: conv2d_rows4 rows of Q columns per thread, Q such that a thread's
 * own bytes of a row are whole words (at most 16 bytes) and, where that
 * allows, its accumulators (M rows in progress x Q x K x CF) take at most
 * 64 registers; one matrix of 3x3, 5x5 or 7x7, or a 3x3 gradient pair
 * (the Sobel, Prewitt and Scharr zeros, magnitude), and 15x15 on the DP4A
 * path (60 accumulators: Q = 4 gray, 1 RGBA). RGB has no 7x7: Q = 4
 * would need ~84 accumulators, and no smaller Q makes whole words. */
#define CONV2D_V4X(C, CF, K, M, Q, Z, DP, MODE4)                                              \
    {4, C, CF, K, M, M, conv2d_rows4<C, K, M>(), Q, DP, Z,                                      \
     (const void *)conv2d_kernel4<C, CF, K, M, Q, Z, DP, MODE4>,                              \
     conv2d_run4<C, CF, K, M, Q, Z, DP, MODE4>, MODE4}
#define CONV2D_V4M(C, CF, K, M, Q, Z, DP) CONV2D_V4X(C, CF, K, M, Q, Z, DP, kModeAny)
/* and the same for the prescaled masks without offsets only */
#define CONV2D_V4Q(C, CF, M, Q, DP)                                                            \
    CONV2D_V4M(C, CF, 1, M, Q, 0u, DP), CONV2D_V4X(C, CF, 1, M, Q, 0u, DP, MODE_PRESCALED_NO_OFFSET)
/* the kernels of one size and layout for masks whose outputs stay in
 * 0..255 (kInRange): prescaled without an offset (gaussian) and divided by
 * an odd integer (box); DP: 1 (DP4A) or the binomial and box columns of
 * the separable integer path */
#define CONV2D_V4R(C, CF, M, Q, DP_GAUSSIAN, DP_BOX)                                           \
    CONV2D_V4X(C, CF, 1, M, Q, 0u, DP_GAUSSIAN, MODE_PRESCALED_NO_OFFSET + kInRange),         \
    CONV2D_V4X(C, CF, 1, M, Q, 0u, DP_BOX, MODE_DIV_ODD + kInRange)
/* a gradient pair of kind kGradients4[G] in 16-bit lanes, 4 pixels a thread */
#define CONV2D_V4G(C, CF, G)                                                                  \
    CONV2D_V4X(C, CF, 2, 3, 4, CONV2D_GRADIENT_ZEROS, kGradient4 + G, MODE_PRESCALED_NO_OFFSET)
/* box masks of M x M as running sums on RGBA, alpha copied and filtered */
#define CONV2D_V4RUN(M)                                                                       \
    CONV2D_V4X(4, 3, 1, M, 4, 0u, kRunning4, MODE_DIV_ODD + kInRange),                       \
    CONV2D_V4X(4, 4, 1, M, 4, 0u, kRunning4, MODE_DIV_ODD + kInRange)
/* box masks of M x M as prefix sums across a warp: gray, RGBA with alpha
 * copied and filtered; one row of 16 / C pixels a thread */
#define CONV2D_V4SCAN1(C, CF, M)                                                               \
    {4, C, CF, 1, M, M, 1, 16 / C, kBoxScan4, 0u, (const void *)conv2d_scan_kernel4<C, CF, M>, \
     conv2d_run_scan4<C, CF, M>, MODE_DIV_ODD + kInRange}
#define CONV2D_V4SCAN(M) CONV2D_V4SCAN1(1, 1, M), CONV2D_V4SCAN1(4, 3, M), CONV2D_V4SCAN1(4, 4, M)
/* M x M masks that factor as a column times a row of bytes 0..255 on the
 * tensor cores, any scaling: gray, RGBA with alpha copied and filtered;
 * blocks of 256 threads whatever the tile */
#define CONV2D_V4MMA1(C, CF, M)                                                                \
    {4, C, CF, 1, M, M, 1, 1, kMma4, 0u, (const void *)conv2d_mma_kernel4<C, CF, M>,          \
     conv2d_run_mma4<C, CF, M>, kModeAny}
#define CONV2D_V4MMA(M) CONV2D_V4MMA1(1, 1, M), CONV2D_V4MMA1(4, 3, M), CONV2D_V4MMA1(4, 4, M)
/* 3x3 masks of a column times a row of small integers as row streams,
 * outputs in range: gray, RGBA with alpha copied and filtered; 16 bytes a
 * thread, kStreamRows4 rows; gaussian3's shape prescaled, box3's over an
 * odd integer, and any shape either way */
#define CONV2D_V4STREAM1(C, CF, MODE4, SHAPE)                                                  \
    {4, C, CF, 1, 3, 3, kStreamRows4, 16 / C, kStream4 + SHAPE, 0u,                            \
     (const void *)conv2d_stream_kernel4<C, CF, MODE4, SHAPE>,                                 \
     conv2d_run_stream4<C, CF, MODE4, SHAPE>, MODE4}
#define CONV2D_V4STREAM(C, CF)                                                                 \
    CONV2D_V4STREAM1(C, CF, MODE_PRESCALED_NO_OFFSET + kInRange, kStreamBinomial),             \
    CONV2D_V4STREAM1(C, CF, MODE_DIV_ODD + kInRange, kStreamOnes),                             \
    CONV2D_V4STREAM1(C, CF, MODE_PRESCALED_NO_OFFSET + kInRange, kStreamAny),                  \
    CONV2D_V4STREAM1(C, CF, MODE_DIV_ODD + kInRange, kStreamAny)
/* M x M masks on the separable integer path in any scaling mode: gray, 4
 * pixels a thread, and RGBA, one pixel (M rows of accumulators) */
#define CONV2D_V4SEP(M)                                                                       \
    CONV2D_V4M(1, 1, 1, M, 4, 0u, kSeparable4), CONV2D_V4M(4, 3, 1, M, 1, 0u, kSeparable4),   \
    CONV2D_V4M(4, 4, 1, M, 1, 0u, kSeparable4)
#define CONV2D_V4(C, CF, Q3, QG, Q5, DP)                                                      \
    CONV2D_V4M(C, CF, 1, 3, Q3, 0u, DP),                                                      \
    CONV2D_V4M(C, CF, 2, 3, QG, CONV2D_GRADIENT_ZEROS, DP), CONV2D_V4M(C, CF, 1, 5, Q5, 0u, DP)

}  /* namespace */

extern const conv2d_variant conv2d_variants[] = {
    CONV2D_V2_LAYOUT(1, 1), CONV2D_V2_LAYOUT(2, 2), CONV2D_V2_LAYOUT(3, 3),
    CONV2D_V2_LAYOUT(4, 3), CONV2D_V2_LAYOUT(4, 4),
    CONV2D_V3(1, 1), CONV2D_V3(2, 2), CONV2D_V3(3, 3), CONV2D_V3(4, 3), CONV2D_V3(4, 4),
    CONV2D_V4(1, 1, 8, 8, 8, 0), CONV2D_V4(2, 2, 4, 4, 4, 0),
    CONV2D_V4(3, 3, 4, 4, 4, 0), CONV2D_V4(4, 3, 4, 2, 4, 0),
    CONV2D_V4(4, 4, 4, 2, 2, 0),
    CONV2D_V4M(1, 1, 1, 7, 8, 0u, 0), CONV2D_V4M(2, 2, 1, 7, 4, 0u, 0),
    CONV2D_V4M(4, 3, 1, 7, 2, 0u, 0), CONV2D_V4M(4, 4, 1, 7, 2, 0u, 0),
    /* integer weights of -128..127, gray and RGBA: DP4A */
    CONV2D_V4M(1, 1, 1, 3, 8, 0u, 1), CONV2D_V4M(1, 1, 2, 3, 8, CONV2D_GRADIENT_ZEROS, 1),
    CONV2D_V4Q(1, 1, 5, 8, 1), CONV2D_V4M(4, 3, 1, 3, 4, 0u, 1),
    CONV2D_V4M(4, 3, 2, 3, 2, CONV2D_GRADIENT_ZEROS, 1), CONV2D_V4Q(4, 3, 5, 4, 1),
    CONV2D_V4M(4, 4, 1, 3, 4, 0u, 1), CONV2D_V4M(4, 4, 2, 3, 2, CONV2D_GRADIENT_ZEROS, 1),
    CONV2D_V4Q(4, 4, 5, 2, 1),
    /* and 3x3 (gaussian3, box3) whose outputs stay in 0..255 */
    CONV2D_V4R(1, 1, 3, 8, 1, 1), CONV2D_V4R(4, 3, 3, 4, 1, 1), CONV2D_V4R(4, 4, 3, 4, 1, 1),
    CONV2D_V4Q(1, 1, 7, 8, 1), CONV2D_V4Q(4, 3, 7, 2, 1), CONV2D_V4Q(4, 4, 7, 2, 1),
    /* 7x7 of 16-bit integer weights, gray and RGBA: DP2A */
    CONV2D_V4Q(1, 1, 7, 8, 2), CONV2D_V4Q(4, 3, 7, 2, 2), CONV2D_V4Q(4, 4, 7, 2, 2),
    /* 5x5 and 7x7 that factor as an integer column times a row of bytes,
     * gray and RGBA: row pass DP4A, column pass FFMA (gaussian and box
     * masks take the kernels further down) */
    CONV2D_V4Q(1, 1, 5, 8, kSeparable4), CONV2D_V4Q(1, 1, 7, 8, kSeparable4),
    CONV2D_V4Q(4, 3, 5, 4, kSeparable4), CONV2D_V4Q(4, 3, 7, 2, kSeparable4),
    CONV2D_V4Q(4, 4, 5, 2, kSeparable4), CONV2D_V4Q(4, 4, 7, 2, kSeparable4),
    /* and 9x9 (box9), one RGBA pixel per thread (9 rows of accumulators) */
    CONV2D_V4Q(1, 1, 9, 4, kSeparable4), CONV2D_V4Q(4, 3, 9, 1, kSeparable4),
    CONV2D_V4Q(4, 4, 9, 1, kSeparable4),
    /* the same sizes and layouts, outputs in 0..255: binomial columns
     * prescaled (gaussian5, gaussian7), columns of ones over an odd
     * integer (box5, box7, box9) */
    CONV2D_V4R(1, 1, 5, 8, kBinomial4, kBox4), CONV2D_V4R(1, 1, 7, 8, kBinomial4, kBox4),
    CONV2D_V4R(4, 3, 5, 4, kBinomial4, kBox4), CONV2D_V4R(4, 3, 7, 2, kBinomial4, kBox4),
    CONV2D_V4R(4, 4, 5, 2, kBinomial4, kBox4), CONV2D_V4R(4, 4, 7, 2, kBinomial4, kBox4),
    CONV2D_V4X(1, 1, 1, 9, 4, 0u, kBox4, MODE_DIV_ODD + kInRange),
    CONV2D_V4X(4, 3, 1, 9, 1, 0u, kBox4, MODE_DIV_ODD + kInRange),
    CONV2D_V4X(4, 4, 1, 9, 1, 0u, kBox4, MODE_DIV_ODD + kInRange),
    /* box masks as prefix sums across a warp: gray from 9x9, RGBA from 15x15
     * (below, the column of ones and the running sums are faster) */
    CONV2D_V4SCAN1(1, 1, 9), CONV2D_V4SCAN1(1, 1, 11), CONV2D_V4SCAN1(1, 1, 13),
    CONV2D_V4SCAN(15), CONV2D_V4SCAN(17), CONV2D_V4SCAN(19), CONV2D_V4SCAN(21), CONV2D_V4SCAN(23),
    CONV2D_V4SCAN(25), CONV2D_V4SCAN(27), CONV2D_V4SCAN(29), CONV2D_V4SCAN(31),
    /* box masks as running sums on RGBA, 4 pixels a thread */
    CONV2D_V4RUN(5), CONV2D_V4RUN(7), CONV2D_V4RUN(9), CONV2D_V4RUN(11), CONV2D_V4RUN(13),
    CONV2D_V4RUN(15), CONV2D_V4RUN(17), CONV2D_V4RUN(19), CONV2D_V4RUN(21), CONV2D_V4RUN(23),
    CONV2D_V4RUN(25), CONV2D_V4RUN(27), CONV2D_V4RUN(29), CONV2D_V4RUN(31),
    /* gray box masks of 11x11 to 15x15 on the column of ones */
    CONV2D_V4X(1, 1, 1, 11, 4, 0u, kBox4, MODE_DIV_ODD + kInRange),
    CONV2D_V4X(1, 1, 1, 13, 4, 0u, kBox4, MODE_DIV_ODD + kInRange),
    CONV2D_V4X(1, 1, 1, 15, 4, 0u, kBox4, MODE_DIV_ODD + kInRange),
    /* 11x11 to 15x15 that factor as an integer column times a row of
     * bytes (sampled gaussians), any scaling */
    CONV2D_V4SEP(11), CONV2D_V4SEP(13), CONV2D_V4SEP(15),
    /* 11x11 to 31x31 of a column times a row of bytes 0..255 (sampled
     * gaussians): the tensor cores */
    CONV2D_V4MMA(11), CONV2D_V4MMA(13), CONV2D_V4MMA(15), CONV2D_V4MMA(17), CONV2D_V4MMA(19),
    CONV2D_V4MMA(21), CONV2D_V4MMA(23), CONV2D_V4MMA(25), CONV2D_V4MMA(27), CONV2D_V4MMA(29),
    CONV2D_V4MMA(31),
    /* 3x3 of a column times a row of small integers: row streams */
    CONV2D_V4STREAM(1, 1), CONV2D_V4STREAM(4, 3), CONV2D_V4STREAM(4, 4),
    /* the Sobel, Prewitt and Scharr pairs on RGBA: 16-bit lanes */
    CONV2D_V4G(4, 3, 0), CONV2D_V4G(4, 3, 1), CONV2D_V4G(4, 3, 2),
    CONV2D_V4G(4, 4, 0), CONV2D_V4G(4, 4, 1), CONV2D_V4G(4, 4, 2),
    /* 15x15 of integer weights of -128..127 (sums below 2^22), gray and
     * RGBA: DP4A */
    CONV2D_V4M(1, 1, 1, 15, 4, 0u, 1), CONV2D_V4M(4, 3, 1, 15, 1, 0u, 1),
    CONV2D_V4M(4, 4, 1, 15, 1, 0u, 1),
};
extern const int conv2d_variant_count = (int)(sizeof conv2d_variants / sizeof conv2d_variants[0]);

conv2d_entry conv2d_entry_for(int version, int channels)
{
    static const conv2d_entry table[2][4] = {
        {conv2d_kernel0<1>, conv2d_kernel0<2>, conv2d_kernel0<3>, conv2d_kernel0<4>},
        {conv2d_kernel1<1>, conv2d_kernel1<2>, conv2d_kernel1<3>, conv2d_kernel1<4>},
    };
    if (version < 0 || version > 1 || channels < 1 || channels > 4)
        return NULL;
    return table[version][channels - 1];
}
