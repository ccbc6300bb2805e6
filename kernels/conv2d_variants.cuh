/* conv2d_variants.cuh - the kernels' table, compiled in sets: each set
 * (a conv2d_set_*.cu) is a translation unit, so its kernels are a module
 * of their own, and a call loads only the modules of the kernels it
 * launches. CUDA's lazy loading loads a whole module at its first launch:
 * one module of all 284 kernels cost a call 98-109 ms on the H200, a set
 * 22-32 ms (bench/RESULTS.md). Before including this, a set defines
 * conv2d_set_takes(version, C, M) and CONV2D_SET, the name of its
 * conv2d_set; the table itself is conv2d_variant_list.cuh. */
#ifndef GF_KERNELS_CONV2D_VARIANTS_CUH
#define GF_KERNELS_CONV2D_VARIANTS_CUH

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


/* The table's entries, each a kernel's instantiation with its runner and
 * the facts the planner matches: empty (version 0) where this set does not
 * take the kernel, which is then not compiled here. */
template <int C, int CF, int K, int M, int P, int Q, bool WS, int NW>
conv2d_variant conv2d_v2_entry()
{
    if constexpr (conv2d_set_takes(2, C, M))
        return {2, C, CF, K, M, M, P, Q, WS, 0u, (const void *)conv2d_kernel2<C, CF, K, M, M, P, Q, WS, NW>,
                conv2d_run2<C, CF, K, M, M, P, Q, WS, NW>, kModeAny};
    else
        return {};
}

template <int C, int CF, bool WS>
conv2d_variant conv2d_v3_entry()
{
    if constexpr (conv2d_set_takes(3, C, 0))
        return {3, C, CF, 1, 0, 0, 8, 8, WS, 0u, (const void *)conv2d_kernel3<C, CF, WS>, conv2d_run3<C, CF, WS>,
                kModeAny};
    else
        return {};
}

template <int C, int CF, int K, int M, int Q, unsigned Z, int DP, int MODE4>
conv2d_variant conv2d_v4_entry()
{
    if constexpr (conv2d_set_takes(4, C, M))
        return {4, C, CF, K, M, M, conv2d_rows4<C, K, M>(), Q, DP, Z,
                (const void *)conv2d_kernel4<C, CF, K, M, Q, Z, DP, MODE4>,
                conv2d_run4<C, CF, K, M, Q, Z, DP, MODE4>, MODE4};
    else
        return {};
}

/* one row of 16 / C pixels a thread */
template <int C, int CF, int M>
conv2d_variant conv2d_scan_entry()
{
    if constexpr (conv2d_set_takes(4, C, M))
        return {4, C, CF, 1, M, M, 1, 16 / C, kBoxScan4, 0u, (const void *)conv2d_scan_kernel4<C, CF, M>,
                conv2d_run_scan4<C, CF, M>, MODE_DIV_ODD + kInRange};
    else
        return {};
}

/* blocks of 256 threads whatever the tile */
template <int C, int CF, int M>
conv2d_variant conv2d_mma_entry()
{
    if constexpr (conv2d_set_takes(4, C, M))
        return {4, C, CF, 1, M, M, 1, 1, kMma4, 0u, (const void *)conv2d_mma_kernel4<C, CF, M>,
                conv2d_run_mma4<C, CF, M>, kModeAny};
    else
        return {};
}

/* 16 bytes a thread, kStreamRows4 rows */
template <int C, int CF, int MODE4, int SHAPE>
conv2d_variant conv2d_stream_entry()
{
    if constexpr (conv2d_set_takes(4, C, 3))
        return {4, C, CF, 1, 3, 3, kStreamRows4, 16 / C, kStream4 + SHAPE, 0u,
                (const void *)conv2d_stream_kernel4<C, CF, MODE4, SHAPE>,
                conv2d_run_stream4<C, CF, MODE4, SHAPE>, MODE4};
    else
        return {};
}

#define CONV2D_V2(C, CF, K, M, P, Q, WS, NW) conv2d_v2_entry<C, CF, K, M, P, Q, WS, NW>()
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
#define CONV2D_V3(C, CF) conv2d_v3_entry<C, CF, false>(), conv2d_v3_entry<C, CF, true>()

/* version 4: conv2d_rows4 rows of Q columns per thread, Q such that a thread's
 * own bytes of a row are whole words (at most 16 bytes) and, where that
 * allows, its accumulators (M rows in progress x Q x K x CF) take at most
 * 64 registers; one matrix of 3x3, 5x5 or 7x7, or a 3x3 gradient pair
 * (the Sobel, Prewitt and Scharr zeros, magnitude), and 15x15 on the DP4A
 * path (60 accumulators: Q = 4 gray, 1 RGBA). RGB has no 7x7: Q = 4
 * would need ~84 accumulators, and no smaller Q makes whole words. */
#define CONV2D_V4X(C, CF, K, M, Q, Z, DP, MODE4) conv2d_v4_entry<C, CF, K, M, Q, Z, DP, MODE4>()
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
#define CONV2D_V4SCAN1(C, CF, M) conv2d_scan_entry<C, CF, M>()
#define CONV2D_V4SCAN(M) CONV2D_V4SCAN1(1, 1, M), CONV2D_V4SCAN1(4, 3, M), CONV2D_V4SCAN1(4, 4, M)
/* M x M masks that factor as a column times a row of bytes 0..255 on the
 * tensor cores, any scaling: gray, RGBA with alpha copied and filtered;
 * blocks of 256 threads whatever the tile */
#define CONV2D_V4MMA1(C, CF, M) conv2d_mma_entry<C, CF, M>()
#define CONV2D_V4MMA(M) CONV2D_V4MMA1(1, 1, M), CONV2D_V4MMA1(4, 3, M), CONV2D_V4MMA1(4, 4, M)
/* 3x3 masks of a column times a row of small integers as row streams,
 * outputs in range: gray, RGBA with alpha copied and filtered; 16 bytes a
 * thread, kStreamRows4 rows; gaussian3's shape prescaled, box3's over an
 * odd integer, and any shape either way */
#define CONV2D_V4STREAM1(C, CF, MODE4, SHAPE) conv2d_stream_entry<C, CF, MODE4, SHAPE>()
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


/* this set's entries, empty where it does not take the kernel */
const conv2d_variant conv2d_set_entries[] = {
#include "conv2d_variant_list.cuh"
};

}  /* namespace */

extern const conv2d_set CONV2D_SET = {conv2d_set_entries,
                                      (int)(sizeof conv2d_set_entries / sizeof conv2d_set_entries[0])};

#endif /* GF_KERNELS_CONV2D_VARIANTS_CUH */
