/* tile_rule.h - the conv2d kernels' tile rule (tile_rule.c): which tile a
 * launch takes on a device, and whether a given tile launches there. A
 * function of the device's properties and the launch, so that the GPU
 * backend, --tile sweep and the bench ask the same rule. */
#ifndef GF_TILE_RULE_H
#define GF_TILE_RULE_H

#include <cuda_runtime_api.h>

#include "../kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the occupancy API says of a launch's kernel. */
typedef struct {
    int blocks_per_sm;
    double occupancy;  /* resident warps / the SM's maximum */
} occupancy_info;

/* The occupancy of a launch whose plan says launch (conv2d_describe,
 * conv2d_report) on the current device, whose properties are d; -1 on a
 * CUDA error. */
int gf_tile_occupancy(const struct cudaDeviceProp *d, const conv2d_launch_info *launch,
                      occupancy_info *info);

/* Whether p's tile can launch on the device; -2 and a message naming the
 * limit when it cannot (a usage error, not a device failure). plan: what
 * conv2d_describe says of p, or NULL to ask it here. */
int gf_tile_fits(const struct cudaDeviceProp *d, int version, const conv2d_launch *p,
                 const conv2d_launch_info *plan);

/* p's tile set by the tile rule; -2 when no tile fits, -1 on a CUDA error. */
int gf_tile_choose(const struct cudaDeviceProp *d, int version, conv2d_launch *p);

#ifdef __cplusplus
}
#endif

#endif /* GF_TILE_RULE_H */
