/* clahe_gpu.h - plain C entry points of clahe_gpu.cu: OpenCV's CLAHE on the device,
 * on one plane of an interleaved 8- or 16-bit image (a channel, or the
 * luma of RGB). Launchers enqueue on 'stream', check the launch and never
 * synchronise. */
#ifndef GF_CLAHE_GPU_H
#define GF_CLAHE_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    void *pixels;               /* device, width * height * channels samples */
    int width, height, channels;
    int depth;                  /* 8 (unsigned char) or 16 (uint16_t) */
    int channel;                /* the channel filtered; -1: the luma of RGB */
    int tiles_x, tiles_y;
    /* src/clahe.h gf_clahe_grid_of's numbers, for bins = 256 or 65536 */
    int tile_w, tile_h, clip_limit;
    float lut_scale, inv_tw, inv_th;
    /* device scratch, clahe_scratch_bytes() each */
    uint16_t *plane;            /* width * height */
    int *hist;                  /* tiles * bins */
    uint16_t *luts;             /* tiles * bins */
} clahe_params;

/* Bytes of plane, hist and luts. */
void clahe_scratch_bytes(const clahe_params *p, size_t *plane, size_t *hist, size_t *luts);

/* The plane CLAHE reads: the channel's samples, or gf_luma of RGB. */
cudaError_t clahe_fill_plane(const clahe_params *p, cudaStream_t stream);
/* Each tile's histogram over the padded image (BORDER_REFLECT_101), hist
 * zeroed first. */
cudaError_t clahe_histograms(const clahe_params *p, cudaStream_t stream);
/* Each tile's clip and redistribution, CDF and look-up table. */
cudaError_t clahe_tile_luts(const clahe_params *p, cudaStream_t stream);
/* Each pixel's blend of its four tiles' tables, into the channel, or as
 * the new luma of RGB (chroma kept, tone.h's YCrCb round trip). */
cudaError_t clahe_interpolate(const clahe_params *p, cudaStream_t stream);
/* The four in order. */
cudaError_t clahe_run(const clahe_params *p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
