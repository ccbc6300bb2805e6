/* diffuse.h - iterative diffusion: linear heat, or Perona-Malik's
 * edge-preserving diffusion, in float64 state, rounded once at the end. */
#ifndef GF_DIFFUSE_H
#define GF_DIFFUSE_H

#include "border.h"
#include "image.h"

typedef enum { GF_DIFFUSE_HEAT = 0, GF_DIFFUSE_PM_EXP, GF_DIFFUSE_PM_RATIONAL } gf_diffuse_kind;

typedef struct {
    gf_diffuse_kind kind;
    int iterations;
    double step;            /* the time step */
    double k;               /* Perona-Malik's K; 0: from the gradients' percentile */
    double percentile;      /* of the gradient magnitudes, when k is 0 */
    gf_border border;       /* set by the pipeline: the job's -b */
    int channels_filtered;  /* set by the pipeline: alpha unless --filter-alpha */
} gf_diffuse;

/* A gf_host_op: 0, or -1 with the error. */
int gf_diffuse_image(gf_image *img, const void *diffuse);

#endif
