/* clahe_gpu.h - plain C entry points of clahe_gpu.cu: OpenCV's CLAHE on the device,
 * on one plane of an interleaved 8- or 16-bit image (a channel, or the
 * luma of RGB), read from and written to the image itself. Launchers
 * enqueue on 'stream', check the launch and never synchronise. */
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
    int *hist;                  /* tiles * bins */
    void *cells;                /* (tiles_y + 1) * (tiles_x + 1) * bins entries */
    /* 16 bits: count in global memory, not in a block's shared memory
     * (chosen anyway where a block cannot have 128 KiB of it) */
    int hist_global;
} clahe_params;

/* Bytes of hist and cells. */
void clahe_scratch_bytes(const clahe_params *p, size_t *hist, size_t *cells);

/* Each tile's histogram over the padded image (BORDER_REFLECT_101), hist
 * zeroed first. */
cudaError_t clahe_histograms(const clahe_params *p, cudaStream_t stream);
/* Each tile's clip and redistribution, CDF and look-up table, stored into
 * the cells: per cell between four tile centres, per value, the four
 * tables' entries side by side. 16 bits: the tables overwrite hist on the
 * way. */
cudaError_t clahe_tile_luts(const clahe_params *p, cudaStream_t stream);
/* Each pixel's blend of its cell's four entries, into the channel, or as
 * the new luma of RGB (chroma kept, tone.h's YCrCb round trip). */
cudaError_t clahe_interpolate(const clahe_params *p, cudaStream_t stream);
/* The three in order. */
cudaError_t clahe_run(const clahe_params *p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
