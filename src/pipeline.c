/* pipeline.c - run a job's operations in command-line order on one backend. */
#include "pipeline.h"

#include <stdlib.h>
#include <time.h>

#include "util.h"

int gf_pipeline_add_mask(gf_pipeline *pipeline, const char *name_or_path)
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
    gf_mask *mask = malloc(sizeof *mask);
    if (!mask) {
        gf_set_error("out of memory");
        return -1;
    }
    if (gf_mask_load(name_or_path, mask) < 0) {
        free(mask);
        return -1;
    }
    pipeline->ops[pipeline->count++] = (gf_op){GF_OP_CONVOLVE, mask};
    return 0;
}

void gf_pipeline_free(gf_pipeline *pipeline)
{
    for (int i = 0; i < pipeline->count; i++)
        free(pipeline->ops[i].mask);
    free(pipeline->ops);
    pipeline->ops = NULL;
    pipeline->count = pipeline->capacity = 0;
}

int gf_pipeline_channels_filtered(const gf_pipeline *pipeline, int channels)
{
    int has_alpha = channels == 2 || channels == 4;
    return has_alpha && !pipeline->filter_alpha ? channels - 1 : channels;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int gf_pipeline_run(const gf_pipeline *pipeline, gf_backend *backend, gf_image *img,
                    gf_pipeline_times *times)
{
    double t0 = now_ms();
    if (backend->upload(backend, img) < 0)
        return -1;
    double t1 = now_ms();
    const int filtered = gf_pipeline_channels_filtered(pipeline, img->channels);
    for (int i = 0; i < pipeline->count; i++) {
        const gf_op *op = &pipeline->ops[i];
        int status = 0;
        switch (op->kind) {
        case GF_OP_CONVOLVE:
            status = backend->convolve(backend, op->mask, pipeline->border, filtered);
            break;
        }
        if (status < 0)
            return status;
    }
    if (backend->finish(backend) < 0)
        return -1;
    double t2 = now_ms();
    if (backend->download(backend, img) < 0)
        return -1;
    double t3 = now_ms();
    if (times)
        *times = (gf_pipeline_times){t1 - t0, t2 - t1, t3 - t2};
    return 0;
}
