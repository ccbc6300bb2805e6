/* conv2d_planner.h - the planner's entry points (conv2d_plan.cu) for the
 * C API of kernels.h (conv2d_query.cu): host only. */
#ifndef GF_KERNELS_CONV2D_PLANNER_H
#define GF_KERNELS_CONV2D_PLANNER_H

#include "conv2d_plan.cuh"

/* The prefix sums' strips go in groups of this many rows (h.steps counts
 * rows). */
constexpr int kScanRows4 = 8;

/* Version 4's arithmetic paths, in the order the planner tries them (after
 * a 3x3 gradient pair in lanes, which comes before them all): a mask takes
 * the first that applies and has a kernel for its size, layout and mode.
 * conv2d_paths4 gives each path's kernels (the dp of their table entries),
 * the name -v prints and what the weights must be; the sizes and layouts
 * are the instantiation table's (conv2d.cu). */
enum conv2d_path4_id {
    kPathStreamBinomial, kPathStreamOnes, kPathStreamAny, kPathMmaBox, kPathBoxScan, kPathBoxRunning,
    kPathBinomialColumn, kPathOnesColumn, kPathMma, kPathSeparable, kPathDp4a, kPathDp2a, kPathFloat,
    kPaths4
};
struct conv2d_path4 {
    int dp;               /* the kernels' DP argument (conv2d_variant::ws) */
    int channels;         /* only images of this many channels; 0: any */
    const char *name;     /* for -v, with ", no clamp" for a kernel in range */
    const char *weights;  /* the masks it takes */
};
extern const conv2d_path4 conv2d_paths4[kPaths4];
extern const conv2d_path4 conv2d_gradient_path4;

/* The name of a version 4 plan's path (conv2d_direct_path's) into name. */
void conv2d_path_name(const conv2d_plan &pl, char *name, size_t size);

/* The instantiation of a version for a layout, matrix count, mask size
 * (0: any), weights' kind (ws), zero taps and mode; NULL if none. */
const conv2d_variant *conv2d_find(int version, int C, int CF, int K, int M, int ws, unsigned zero = 0,
                                  int mode = kModeAny);

/* Variant, tile layout and shared bytes of a launch of versions 2 to 4; with
 * 'full' also the header, weights and grid. False when the version cannot
 * run it. */
bool conv2d_make_plan(int version, const conv2d_launch *p, conv2d_plan *pl, bool full);

/* The current device and its SM count; false when they cannot be known. */
bool conv2d_device_sms(int *dev, int *sms);

/* Blocks of a plan's kernel that the device holds at once; 0 when a query
 * fails. */
long long conv2d_resident_blocks(const conv2d_plan &pl, int threads);

/* Whether version 4's path dp is one of the row streams' kernels. */
bool conv2d_stream4(int dp);

#endif /* GF_KERNELS_CONV2D_PLANNER_H */
