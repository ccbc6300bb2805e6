/* conv2d_tiled.cuh - versions 0 (naive) and 1 (tiled) of the 2-D
 * correlation: the reference kernels the others are checked against.
 *
 * Both take kernels.h's conv2d_launch as it is (weights in device memory,
 * any mask up to 31x31, any combine) and launch one thread per output
 * pixel, a block of tile_width x tile_height. Version 0 reads every tap
 * from global memory through the border mapping (each input byte fetched
 * w x h times, L1 and L2 absorbing most of it). Version 1 stages the
 * block's tile plus its halo (tile + mask - 1 each way) and the weights in
 * shared memory once, mapping the border while staging, so the taps read
 * shared memory only. Both sum in the same order, mask rows then columns,
 * one fmaf a tap, and finish with conv2d_finish: division by the scale,
 * offset, combine, rintf, clamp. Versions 2 and 4 keep this order and
 * these operations, hence these bytes. */
#ifndef GF_KERNELS_CONV2D_TILED_CUH
#define GF_KERNELS_CONV2D_TILED_CUH

#include "conv2d_common.cuh"

/* Combine the K matrix responses of one channel, round half to even, clamp. */
__device__ __forceinline__ unsigned char conv2d_finish(const float (&acc)[CONV2D_MAX_MATRICES],
                                                       const conv2d_launch &p)
{
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < CONV2D_MAX_MATRICES; k++) {
        if (k >= p.mask_count)
            break;
        float r = acc[k] / p.scale[k] + p.offset[k];
        switch (p.combine) {
        case GF_COMBINE_MAGNITUDE: v += r * r; break;
        case GF_COMBINE_MAX:       v = k == 0 ? r : fmaxf(v, r); break;
        case GF_COMBINE_MIN:       v = k == 0 ? r : fminf(v, r); break;
        default:                   v += r; break;   /* NONE (one matrix) and SUM */
        }
    }
    if (p.combine == GF_COMBINE_MAGNITUDE)
        v = sqrtf(v);
    v = rintf(v);
    return (unsigned char)fminf(fmaxf(v, 0.0f), 255.0f);
}

/* ---- version 0: naive ---------------------------------------------------- */

template <int C>
__global__ void conv2d_kernel0(conv2d_launch p)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= p.width || y >= p.height)
        return;
    const int taps = p.mask_width * p.mask_height;
    const int ax = p.mask_width / 2, ay = p.mask_height / 2;
    float acc[C][CONV2D_MAX_MATRICES] = {};
    for (int my = 0; my < p.mask_height; my++) {
        const int sy = gf_border_index(y + my - ay, p.height, (gf_border)p.border);
        for (int mx = 0; mx < p.mask_width; mx++) {
            const int sx = gf_border_index(x + mx - ax, p.width, (gf_border)p.border);
            float px[C];
#pragma unroll
            for (int c = 0; c < C; c++)
                px[c] = (sx < 0 || sy < 0) ? 0.0f
                                           : (float)p.src[((size_t)sy * p.width + sx) * C + c];
#pragma unroll
            for (int k = 0; k < CONV2D_MAX_MATRICES; k++) {
                if (k >= p.mask_count)
                    break;
                const float w = p.weights[k * taps + my * p.mask_width + mx];
#pragma unroll
                for (int c = 0; c < C; c++)
                    acc[c][k] = fmaf(px[c], w, acc[c][k]);
            }
        }
    }
    const size_t at = ((size_t)y * p.width + x) * C;
#pragma unroll
    for (int c = 0; c < C; c++)
        p.dst[at + c] = c < p.channels_filtered ? conv2d_finish(acc[c], p) : p.src[at + c];
}

/* ---- version 1: shared-memory tile with halo ----------------------------- */

static inline __host__ __device__ size_t conv2d_weight_bytes(const conv2d_launch &p)
{
    /* rounded up to 16 so that the pixel tile after it stays aligned */
    size_t bytes = (size_t)p.mask_count * p.mask_width * p.mask_height * sizeof(float);
    return (bytes + 15) & ~(size_t)15;
}

template <int C>
__global__ void conv2d_kernel1(conv2d_launch p)
{
    extern __shared__ __align__(16) unsigned char conv2d_smem[];
    float *w = (float *)conv2d_smem;
    unsigned char *tile = conv2d_smem + conv2d_weight_bytes(p);

    const int taps = p.mask_width * p.mask_height;
    const int tw = blockDim.x, th = blockDim.y;
    const int sw = tw + p.mask_width - 1, sh = th + p.mask_height - 1;
    const int x0 = blockIdx.x * tw - p.mask_width / 2;
    const int y0 = blockIdx.y * th - p.mask_height / 2;
    const int tid = threadIdx.y * tw + threadIdx.x, nthreads = tw * th;

    for (int i = tid; i < p.mask_count * taps; i += nthreads)
        w[i] = p.weights[i];
    for (int i = tid; i < sw * sh; i += nthreads) {
        const int ly = i / sw, lx = i - ly * sw;
        const int gx = gf_border_index(x0 + lx, p.width, (gf_border)p.border);
        const int gy = gf_border_index(y0 + ly, p.height, (gf_border)p.border);
        const unsigned char *from = p.src + ((size_t)gy * p.width + gx) * C;
#pragma unroll
        for (int c = 0; c < C; c++)
            tile[i * C + c] = (gx < 0 || gy < 0) ? 0 : from[c];
    }
    __syncthreads();

    const int x = blockIdx.x * tw + threadIdx.x;
    const int y = blockIdx.y * th + threadIdx.y;
    if (x >= p.width || y >= p.height)
        return;
    float acc[C][CONV2D_MAX_MATRICES] = {};
    for (int my = 0; my < p.mask_height; my++) {
        const unsigned char *line = tile + ((threadIdx.y + my) * sw + threadIdx.x) * C;
        for (int mx = 0; mx < p.mask_width; mx++) {
            float px[C];
#pragma unroll
            for (int c = 0; c < C; c++)
                px[c] = (float)line[mx * C + c];
#pragma unroll
            for (int k = 0; k < CONV2D_MAX_MATRICES; k++) {
                if (k >= p.mask_count)
                    break;
                const float wk = w[k * taps + my * p.mask_width + mx];
#pragma unroll
                for (int c = 0; c < C; c++)
                    acc[c][k] = fmaf(px[c], wk, acc[c][k]);
            }
        }
    }
    const size_t at = ((size_t)y * p.width + x) * C;
#pragma unroll
    for (int c = 0; c < C; c++)
        p.dst[at + c] = c < p.channels_filtered ? conv2d_finish(acc[c], p) : p.src[at + c];
}

#endif /* GF_KERNELS_CONV2D_TILED_CUH */
