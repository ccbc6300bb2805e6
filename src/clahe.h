/* clahe.h - contrast-limited adaptive histogram equalization, with
 * OpenCV's semantics (cv2.createCLAHE(clipLimit, tileGridSize).apply). */
#ifndef GF_CLAHE_H
#define GF_CLAHE_H

#include "image.h"

typedef struct {
    double clip;            /* OpenCV's clipLimit (default 40) */
    int tiles_x, tiles_y;   /* tileGridSize (default 8 x 8) */
    int per_channel;        /* each colour channel on its own; else the luma of RGB */
} gf_clahe;

/* The numbers CLAHE_Impl::apply derives for a width x height plane of
 * 'bins' values (256 or 65536): the padded image's tile size, the clip
 * limit per bin (0: none), the CDF's scale and the interpolation's tile
 * reciprocals, each in OpenCV's float. The host and the GPU path
 * (kernels/clahe_gpu.cu) both take them from here, so they agree bit for bit. */
typedef struct {
    int tile_w, tile_h;
    int clip_limit;
    float lut_scale;
    float inv_tw, inv_th;   /* 1 / tile_w, 1 / tile_h */
} gf_clahe_grid;

void gf_clahe_grid_of(const gf_clahe *how, int width, int height, int bins, gf_clahe_grid *g);

/* A gf_host_op: img's colour channels (alpha never); 0, or -1 with the error. */
int gf_clahe_image(gf_image *img, const void *clahe);

#endif
