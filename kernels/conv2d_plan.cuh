/* conv2d_plan.cuh - what the kernels' table (conv2d_variants.cuh) and the planner
 * (conv2d_plan.cu) share: an instantiation's entry in the table, a plan of
 * one launch, and the launch itself. */
#ifndef GF_KERNELS_CONV2D_PLAN_CUH
#define GF_KERNELS_CONV2D_PLAN_CUH

#include "conv2d_common.cuh"

/* the zero taps of the Sobel, Prewitt and Scharr pairs: the x gradient's
 * middle column (weights 1, 4, 7), the y gradient's middle row (12, 13, 14) */
#define CONV2D_GRADIENT_ZEROS 0x7092u

struct conv2d_plan;
typedef cudaError_t (*conv2d_runner)(const conv2d_plan &, cudaStream_t);

/* One instantiation: version, channel layout (C channels, CF computed),
 * matrices, mask size (0: any), outputs per thread (P rows x Q columns),
 * weights in shared memory (ws) or in the parameters. */
struct conv2d_variant {
    int version, C, CF, K, MW, MH, P, Q;
    int ws;         /* versions 2, 3: weights in shared memory (1); 4: integer weights
                       of one byte, DP4A (1), of 16 bits, DP2A (2), or a column times
                       a row of bytes (kSeparable4) */
    unsigned zero;  /* weights known to be 0 (bit i: weight i) */
    const void *entry;
    conv2d_runner run;
    int mode;       /* version 4: the one scaling mode of the kernel (MODE_*, with
                       kInRange), or kModeAny; versions 2 and 3: kModeAny */
};

struct conv2d_plan {
    const conv2d_variant *v;
    int path;  /* version 4: the place of v's arithmetic in conv2d_make_plan's order */
    fast_header h;
    float w[kParamWeights];
    int nw;
    dim3 grid, block;
    size_t shared;
};

/* Every launch goes through here: the kernel's own parameter type, the
 * shared-memory opt-in above 48 KB. */
template <class A>
static cudaError_t conv2d_start(void (*kernel)(A), dim3 grid, dim3 block, size_t shared,
                                cudaStream_t stream, const A &args)
{
    const cudaError_t err = conv2d_allow_shared((const void *)kernel, shared);
    if (err != cudaSuccess)
        return err;
    kernel<<<grid, block, shared, stream>>>(args);
    return cudaGetLastError();
}

typedef void (*conv2d_entry)(conv2d_launch);

/* One set's entries (conv2d_variants.cuh), the empty ones included. */
struct conv2d_set {
    const conv2d_variant *entries;
    int count;
};

/* The instantiations of versions 2 to 4, every set's (conv2d.cu): the
 * planner's only way to their kernels. */
const conv2d_variant *conv2d_variant_table(int *count);

/* Versions 0 and 1: the kernel for a channel count (conv2d.cu), or NULL. */
conv2d_entry conv2d_entry_for(int version, int channels);

#endif /* GF_KERNELS_CONV2D_PLAN_CUH */
