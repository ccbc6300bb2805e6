/* kernels.h - plain C entry points of the CUDA kernels (the .cu files in kernels/).
 *
 * Host code includes this header only; it sees no templates and no CUDA
 * syntax. Launchers enqueue on 'stream', check the launch with
 * cudaGetLastError() and return its result; they never synchronise. */
#ifndef GF_KERNELS_H
#define GF_KERNELS_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CONV2D_VERSIONS 2     /* 0 naive global memory, 1 shared-memory tiled with halo */

/* One convolution: every matrix of the mask over every channel. */
typedef struct {
    const unsigned char *src;  /* device, width * height * channels, interleaved */
    unsigned char *dst;        /* device, same shape; must not alias src */
    int width, height;
    int channels;              /* 1..4 */
    int channels_filtered;     /* channels >= this one are copied (alpha) */
    int border;                /* gf_border */
    int mask_width, mask_height;
    int mask_count;            /* 1..GF_MASK_MAX_MATRICES */
    int combine;               /* gf_combine */
    const float *weights;      /* device, mask_count * mask_width * mask_height, row-major */
    float scale[4];
    float offset[4];
    int tile_width, tile_height;  /* block shape: one thread per output pixel */
} conv2d_launch;

/* Dynamic shared memory a launch of this version needs (0 for naive). */
size_t conv2d_shared_bytes(int version, const conv2d_launch *p);
/* The __global__ function a launch would use, for the occupancy API. */
const void *conv2d_kernel_entry(int version, int channels);
/* Launch version 0..CONV2D_VERSIONS-1. */
cudaError_t conv2d_gpu(int version, const conv2d_launch *p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
