/* diffuse.h - iterative diffusion: linear heat, or Perona-Malik's
 * edge-preserving diffusion, in float64 state, rounded once at the end. */
#ifndef GF_DIFFUSE_H
#define GF_DIFFUSE_H

#include <stdio.h>

#include "border.h"
#include "image.h"

/* The explicit scheme on the 4-neighbour stencil is stable up to this step. */
#define GF_DIFFUSE_MAX_STEP 0.25
#define GF_DIFFUSE_DEFAULT_ITERATIONS 16
#define GF_DIFFUSE_DEFAULT_STEP 0.2
#define GF_DIFFUSE_DEFAULT_PERCENTILE 90.0

typedef enum { GF_DIFFUSE_HEAT = 0, GF_DIFFUSE_PM_EXP, GF_DIFFUSE_PM_RATIONAL } gf_diffuse_kind;

typedef struct {
    gf_diffuse_kind kind;
    int iterations;
    double step;            /* the time step */
    double k;               /* Perona-Malik's K; 0: from the gradients' percentile */
    double percentile;      /* of the gradient magnitudes, when k is 0 */
    gf_border border;       /* set by the pipeline: the job's -b */
    int channels_filtered;  /* set by the pipeline: alpha unless --filter-alpha */
    FILE *log;              /* -v: a line a run (kind, iterations, step, K, ms); NULL: quiet */
} gf_diffuse;

/* A gf_host_op: 0, or -1 with the error (a step over GF_DIFFUSE_MAX_STEP
 * is refused). */
int gf_diffuse_image(gf_image *img, const void *diffuse);
/* 0, or -1 with the error for values gf_diffuse_image refuses. */
int gf_diffuse_check(const gf_diffuse *how);
/* The -v line of a run to how->log (not NULL): kind, iterations, step, K, ms. */
void gf_diffuse_report(const gf_diffuse *how, double k, double ms);

#endif
