/* conv2d_planner.h - the planner's entry points (conv2d_plan.cu) for the
 * C API of kernels.h (conv2d_query.cu): host only. */
#ifndef GF_KERNELS_CONV2D_PLANNER_H
#define GF_KERNELS_CONV2D_PLANNER_H

#include "conv2d_plan.cuh"

/* The prefix sums' strips go in groups of this many rows (h.steps counts
 * rows). */
constexpr int kScanRows4 = 8;

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
