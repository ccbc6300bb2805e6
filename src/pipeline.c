/* pipeline.c - run a job's operations in command-line order on one backend. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mask_params.h"
#include "util.h"

static int append(gf_pipeline *pipeline, gf_op op)
{
    if (pipeline->count == pipeline->capacity) {
        int capacity = pipeline->capacity * 2 + 4;
        gf_op *ops = realloc(pipeline->ops, (size_t)capacity * sizeof *ops);
        if (!ops) {
            gf_set_error("out of memory");
            return -1;
        }
        pipeline->ops = ops;
        pipeline->capacity = capacity;
    }
    pipeline->ops[pipeline->count++] = op;
    return 0;
}

int gf_pipeline_name_mask(gf_pipeline *pipeline, const char *name_or_path)
{
    return append(pipeline, (gf_op){.kind = GF_OP_CONVOLVE, .mask_name = name_or_path});
}

/* Op i becomes n ops, each a box of the cascade, in order. On a failure
 * the boxes already made stay with their ops (gf_pipeline_free frees them). */
static int expand_cascade(gf_pipeline *pipeline, int i, const int *radii, int n)
{
    for (int b = 1; b < n; b++)
        if (append(pipeline, pipeline->ops[i]) < 0)
            return -1;
    memmove(&pipeline->ops[i + n], &pipeline->ops[i + 1],
            (size_t)(pipeline->count - n - i) * sizeof *pipeline->ops);
    for (int b = 1; b < n; b++)
        pipeline->ops[i + b] = pipeline->ops[i];
    for (int b = 0; b < n; b++) {
        gf_mask *mask = malloc(sizeof *mask);
        if (!mask) {
            gf_set_error("out of memory");
            return -1;
        }
        if (gf_mask_box(radii[b], mask) < 0) {
            free(mask);
            return -1;
        }
        char label[160];
        snprintf(label, sizeof label, "box %dx%d, %d of %d of %s", mask->width, mask->height, b + 1, n,
                 pipeline->ops[i].mask_name);
        snprintf(mask->name, sizeof mask->name, "%.63s", label);
        pipeline->ops[i + b].mask = mask;
    }
    return 0;
}

int gf_pipeline_load_masks(gf_pipeline *pipeline)
{
    for (int i = 0; i < pipeline->count; i++) {
        gf_op *op = &pipeline->ops[i];
        if (op->kind != GF_OP_CONVOLVE || op->mask)
            continue;
        int radii[GF_MASK_MAX_BOXES];
        const int boxes = gf_mask_params_cascade(op->mask_name, radii);
        if (boxes < 0)
            return -1;
        if (boxes > 0) {
            if (expand_cascade(pipeline, i, radii, boxes) < 0)
                return -1;
            i += boxes - 1;
            continue;
        }
        gf_mask *mask = malloc(sizeof *mask);
        if (!mask) {
            gf_set_error("out of memory");
            return -1;
        }
        if (gf_mask_load(op->mask_name, mask) < 0) {
            free(mask);
            return -1;
        }
        op->mask = mask;
    }
    return 0;
}

int gf_pipeline_add_equalize(gf_pipeline *pipeline, gf_equalize_mode mode)
{
    return append(pipeline, (gf_op){.kind = GF_OP_EQUALIZE, .equalize = mode});
}

int gf_pipeline_add_stretch(gf_pipeline *pipeline, const gf_stretch *how)
{
    return append(pipeline, (gf_op){.kind = GF_OP_STRETCH, .stretch = *how});
}

int gf_pipeline_add_clahe(gf_pipeline *pipeline, const gf_clahe *how)
{
    return append(pipeline, (gf_op){.kind = GF_OP_CLAHE, .clahe = *how});
}

int gf_pipeline_add_diffuse(gf_pipeline *pipeline, const gf_diffuse *how)
{
    return append(pipeline, (gf_op){.kind = GF_OP_DIFFUSE, .diffuse = *how});
}

int gf_colour_channels(int channels)
{
    return channels >= 3 ? 3 : 1;
}

void gf_pipeline_free(gf_pipeline *pipeline)
{
    for (int i = 0; i < pipeline->count; i++)
        if (pipeline->ops[i].mask) {
            gf_mask_release(pipeline->ops[i].mask);
            free(pipeline->ops[i].mask);
        }
    free(pipeline->ops);
    pipeline->ops = NULL;
    pipeline->count = pipeline->capacity = 0;
}

int gf_pipeline_channels_filtered(const gf_pipeline *pipeline, int channels)
{
    int has_alpha = channels == 2 || channels == 4;
    return has_alpha && !pipeline->filter_alpha ? channels - 1 : channels;
}

int gf_pipeline_apply(const gf_pipeline *pipeline, gf_backend *backend, int channels,
                      gf_channel_stats *stats)
{
    const int filtered = gf_pipeline_channels_filtered(pipeline, channels);
    const int colour = gf_colour_channels(channels);
    for (int i = 0; i < pipeline->count; i++) {
        const gf_op *op = &pipeline->ops[i];
        int status = 0;
        switch (op->kind) {
        case GF_OP_CONVOLVE:
            status = backend->convolve(backend, op->mask, pipeline->border, filtered);
            break;
        case GF_OP_EQUALIZE:
            status = backend->equalize(backend, op->equalize, colour);
            break;
        case GF_OP_STRETCH:
            status = backend->stretch(backend, &op->stretch, colour);
            break;
        case GF_OP_CLAHE:
            status = backend->clahe ? backend->clahe(backend, &op->clahe)
                                    : backend->on_host(backend, gf_clahe_image, &op->clahe);
            break;
        case GF_OP_DIFFUSE: {
            gf_diffuse how = op->diffuse;  /* the job's border and alpha rule */
            how.border = pipeline->border;
            how.channels_filtered = filtered;
            status = backend->diffuse ? backend->diffuse(backend, &how)
                                      : backend->on_host(backend, gf_diffuse_image, &how);
            break;
        }
        }
        if (status < 0)
            return status;
    }
    if (stats && backend->statistics(backend, stats) < 0)
        return -1;
    return backend->finish(backend) < 0 ? -1 : 0;
}

int gf_pipeline_run(const gf_pipeline *pipeline, gf_backend *backend, gf_image *img,
                    gf_channel_stats *stats, int download, gf_pipeline_times *times)
{
    if (pipeline->count == 0 && !stats) {
        /* nothing to compute: the image stays as decoded, at any depth,
         * never copied to the backend and back */
        if (times)
            *times = (gf_pipeline_times){0, 0, 0};
        return 0;
    }
    double t0 = gf_now_ms();
    if (backend->upload(backend, img) < 0)
        return -1;
    double t1 = gf_now_ms();
    int status = gf_pipeline_apply(pipeline, backend, img->channels, stats);
    if (status < 0)
        return status;
    double t2 = gf_now_ms();
    if (download && backend->download(backend, img) < 0)
        return -1;
    double t3 = gf_now_ms();
    if (times)
        *times = (gf_pipeline_times){t1 - t0, t2 - t1, t3 - t2};
    return 0;
}
