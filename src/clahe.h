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

/* A gf_host_op: img's colour channels (alpha never); 0, or -1 with the error. */
int gf_clahe_image(gf_image *img, const void *clahe);

#endif
