/* pipeline.h - the ordered operations of one job, run on one backend. */
#ifndef GF_PIPELINE_H
#define GF_PIPELINE_H

#include "backend.h"

typedef enum { GF_OP_CONVOLVE = 0 } gf_op_kind;

typedef struct {
    gf_op_kind kind;
    gf_mask *mask;    /* GF_OP_CONVOLVE */
} gf_op;

typedef struct {
    gf_op *ops;
    int count, capacity;
    gf_border border;
    int filter_alpha; /* filter the alpha channel like the others */
} gf_pipeline;

/* Wall-clock milliseconds of each stage of the last run. */
typedef struct {
    double upload_ms, filter_ms, download_ms;
} gf_pipeline_times;

/* Append a convolution with the mask named or found at name_or_path. */
int gf_pipeline_add_mask(gf_pipeline *pipeline, const char *name_or_path);
void gf_pipeline_free(gf_pipeline *pipeline);

/* Channels a convolution filters: all of them, or all but the last (alpha)
 * for gray+alpha and RGBA unless filter_alpha is set. */
int gf_pipeline_channels_filtered(const gf_pipeline *pipeline, int channels);

/* Upload img, run every operation in order, download the result into img.
 * Returns 0, -1 when the backend failed, -2 on a usage error (see backend.h). */
int gf_pipeline_run(const gf_pipeline *pipeline, gf_backend *backend, gf_image *img,
                    gf_pipeline_times *times);

#endif
