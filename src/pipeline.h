/* pipeline.h - the ordered operations of one job, run on one backend. */
#ifndef GF_PIPELINE_H
#define GF_PIPELINE_H

#include "backend.h"
#include "clahe.h"
#include "diffuse.h"

typedef enum { GF_OP_CONVOLVE = 0, GF_OP_EQUALIZE, GF_OP_STRETCH, GF_OP_CLAHE, GF_OP_DIFFUSE } gf_op_kind;

typedef struct {
    gf_op_kind kind;
    const char *mask_name;      /* GF_OP_CONVOLVE: as given to -m */
    gf_mask *mask;              /* GF_OP_CONVOLVE, once loaded */
    gf_equalize_mode equalize;  /* GF_OP_EQUALIZE */
    gf_stretch stretch;         /* GF_OP_STRETCH */
    gf_clahe clahe;             /* GF_OP_CLAHE */
    gf_diffuse diffuse;         /* GF_OP_DIFFUSE */
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

/* Append a convolution with the mask named or found at name_or_path (the
 * string kept, not copied), loaded later by gf_pipeline_load_masks. */
int gf_pipeline_name_mask(gf_pipeline *pipeline, const char *name_or_path);
/* Load every named mask not loaded yet; -1 with the error set. */
int gf_pipeline_load_masks(gf_pipeline *pipeline);
int gf_pipeline_add_equalize(gf_pipeline *pipeline, gf_equalize_mode mode);
int gf_pipeline_add_stretch(gf_pipeline *pipeline, const gf_stretch *how);
int gf_pipeline_add_clahe(gf_pipeline *pipeline, const gf_clahe *how);
int gf_pipeline_add_diffuse(gf_pipeline *pipeline, const gf_diffuse *how);
void gf_pipeline_free(gf_pipeline *pipeline);

/* Channels a convolution filters: all of them, or all but the last (alpha)
 * for gray+alpha and RGBA unless filter_alpha is set. */
int gf_pipeline_channels_filtered(const gf_pipeline *pipeline, int channels);

/* Colour channels of an image: 1 for gray and gray+alpha, 3 for RGB(A).
 * Tone operations change these only. */
int gf_colour_channels(int channels);

/* Every operation in order on the backend's current image (uploaded
 * already), then its statistics into stats unless NULL; waits for the
 * backend. Returns as gf_pipeline_run. */
int gf_pipeline_apply(const gf_pipeline *pipeline, gf_backend *backend, int channels,
                      gf_channel_stats *stats);

/* Upload img, run every operation in order; then measure the result into
 * stats (one entry per channel) unless stats is NULL, and download it into
 * img unless download is 0. With no operation and no stats, img is left
 * as it is and the backend is not used. Returns 0, -1 when the backend failed, -2 on a
 * usage error (see backend.h). */
int gf_pipeline_run(const gf_pipeline *pipeline, gf_backend *backend, gf_image *img,
                    gf_channel_stats *stats, int download, gf_pipeline_times *times);

#endif
