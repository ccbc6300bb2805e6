/* route.c - see route.h. */
#include "route.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_model.h"
#include "decode_ahead.h"
#include "exif.h"
#include "orientation.h"
#include "stream.h"
#include "util.h"

struct gf_route {
    const gf_job *job;
    pthread_t thread;
    int starting;              /* the thread runs or has run, not yet joined */
    gf_backend *gpu;           /* its result */
    char error[512];           /* its error when gpu is NULL */
    double began_ms, start_ms; /* when it began, how long it took */
    int decided, use_gpu;      /* --backend auto's choice */
    gf_cost_estimate estimate;
    unsigned char *stream_data; /* the input, when it streams (stream.h) or decodes ahead */
    int ahead;                 /* it decodes ahead (decode_ahead.h) rather than streams */
    size_t stream_size;
    gf_image_probe probe;
    int orientation;           /* the input's EXIF orientation, applied on the host */
    const char *name;          /* the input's, for messages */
};

static void *start_gpu(void *arg)
{
    gf_route *r = arg;
    r->gpu = gf_backend_cuda_new(&r->job->backend_options);
    if (!r->gpu)
        snprintf(r->error, sizeof r->error, "%s", gf_error() + strlen("gpufilter: "));
    r->start_ms = gf_now_ms() - r->began_ms;
    return NULL;
}

static void begin_gpu(gf_route *r)
{
    r->began_ms = gf_now_ms();
    if (pthread_create(&r->thread, NULL, start_gpu, r) == 0)
        r->starting = 1;
    else  /* no thread to spare: start it here, nothing hidden */
        start_gpu(r);
}

/* Joins the start; the milliseconds this thread waited for it. */
static double join_gpu(gf_route *r)
{
    if (!r->starting)
        return 0.0;
    const double t0 = gf_now_ms();
    pthread_join(r->thread, NULL);
    r->starting = 0;
    return gf_now_ms() - t0;
}

gf_route *gf_route_begin(const gf_job *job)
{
    gf_route *r = calloc(1, sizeof *r);
    if (!r) {
        gf_set_error("out of memory");
        return NULL;
    }
    r->job = job;
    if (job->backend == GF_BACKEND_CUDA)
        begin_gpu(r);
    return r;
}

/* How a call on this backend takes the input instead of decoding it
 * first: streamed (stream.h), decoded ahead of its filter
 * (decode_ahead.h), or neither (TAKEN_NOT). */
enum { TAKEN_NOT, TAKEN_STREAMED, TAKEN_AHEAD };
static int taken_as(const gf_job *job, gf_backend_kind backend, const gf_image_probe *probe,
                    const unsigned char *data, size_t size)
{
    if (gf_stream_wanted(job, backend, probe, data, size))
        return TAKEN_STREAMED;
    return gf_decode_ahead_wanted(job, backend, probe, data, size) ? TAKEN_AHEAD : TAKEN_NOT;
}

/* Keep the input's bytes for a streamed call, when it streams on the
 * backend the call takes; 1 when they were taken. */
static int take_for_stream(gf_route *r, const gf_image_probe *probe, unsigned char *data,
                           size_t size)
{
    r->orientation = probe->orientation;
    gf_backend_kind backend = r->job->backend;
    if (backend == GF_BACKEND_AUTO)
        backend = r->use_gpu ? GF_BACKEND_CUDA : GF_BACKEND_CPU;
    const int taken = taken_as(r->job, backend, probe, data, size);
    if (taken == TAKEN_NOT)
        return 0;
    r->ahead = taken == TAKEN_AHEAD;
    r->stream_data = data;
    r->stream_size = size;
    r->probe = *probe;
    return 1;
}

static int probed_for_stream(const gf_image_probe *probe, unsigned char *data, size_t size,
                             void *user)
{
    return take_for_stream(user, probe, data, size);
}

/* --backend auto: estimate both routes from the probe; start the GPU if it wins. */
static int decide(const gf_image_probe *probe, unsigned char *data, size_t size, void *user)
{
    gf_route *r = user;
    const int channels = r->job->gray && probe->channels >= 3 ? probe->channels - 2
                                                               : probe->channels;
    const double decode_ms = gf_cost_decode_ms(data, size, probe->width, probe->height,
                                               probe->channels);
    const int cpu_beside_decode = taken_as(r->job, GF_BACKEND_CPU, probe, data, size) != TAKEN_NOT;
    gf_cost_estimate_call(&r->job->pipeline, probe->width, probe->height, channels, decode_ms,
                          cpu_beside_decode, gf_image_threads(), &r->estimate);
    r->decided = 1;
    r->use_gpu = r->estimate.use_gpu;
    if (r->use_gpu)
        begin_gpu(r);
    return take_for_stream(r, probe, data, size);
}

/* --backend cuda: the probe only noted (the GPU's call never streams). */
static int probed_for_gpu(const gf_image_probe *probe, unsigned char *data, size_t size,
                          void *user)
{
    (void)data;
    (void)size;
    ((gf_route *)user)->orientation = probe->orientation;
    return 0;
}

gf_image *gf_route_load(gf_route *r, const gf_job *job, const char *path)
{
    r->name = strcmp(path, "-") == 0 ? "standard input" : path;
    if (job->backend == GF_BACKEND_AUTO)
        return gf_image_load_limited_hook(path, decide, r);
    if (job->backend == GF_BACKEND_CUDA)
        return gf_image_load_limited_hook(path, probed_for_gpu, r);
    return gf_image_load_limited_hook(path, probed_for_stream, r);
}

const unsigned char *gf_route_stream_input(const gf_route *r, size_t *size)
{
    *size = r->stream_size;
    return r->stream_data;
}

int gf_route_decodes_ahead(const gf_route *r)
{
    return r->ahead;
}

gf_decode_ahead *gf_route_decode_ahead(gf_route *r)
{
    return gf_decode_ahead_start(r->stream_data, r->stream_size, &r->probe, r->name);
}

gf_image *gf_route_decode_whole(gf_route *r)
{
    unsigned char *data = r->stream_data;
    r->stream_data = NULL;
    return gf_image_decode_limited(data, r->stream_size, r->name, &r->probe);
}

static gf_backend *cpu_backend(const gf_job *job)
{
    if (job->backend_options.tile_width > 0 && !job->quiet)
        fprintf(stderr, "gpufilter: note: --tile shapes CUDA launches; the CPU backend ignores it\n");
    return job->backend == GF_BACKEND_REFERENCE ? gf_backend_reference_new(&job->backend_options)
                                                : gf_backend_cpu_new(&job->backend_options);
}

/* A turned JPEG never streams and never reaches nvJPEG: the whole image
 * is decoded and turned on the host, then uploaded if the GPU filters. */
static void explain_orientation(FILE *log, const gf_route *r)
{
    if (r->orientation > GF_ORIENTATION_STORED)
        fprintf(log, "gpufilter: %s: EXIF orientation %d (%s): decoded whole and turned on the "
                "host before the operations\n", r->name, r->orientation,
                gf_orientation_describe(r->orientation));
}

gf_backend *gf_route_backend(gf_route *r, const gf_job *job)
{
    FILE *log = job->verbose ? stderr : NULL;
    if (log)
        explain_orientation(log, r);
    if (log && r->decided)
        gf_cost_explain(log, &r->estimate);
    if (job->backend != GF_BACKEND_CUDA && !(r->decided && r->use_gpu))
        return cpu_backend(job);
    const double waited = join_gpu(r);
    gf_backend *gpu = r->gpu;
    r->gpu = NULL;
    if (gpu) {
        if (log)
            fprintf(log, "gpufilter: cuda start %.1f ms: %.1f ms hidden behind the decode, "
                    "%.1f ms waited for\n", r->start_ms, r->start_ms - waited, waited);
        return gpu;
    }
    gf_set_error("%s", r->error);
    if (job->backend == GF_BACKEND_CUDA)
        return NULL;
    if (log)  /* auto: the CPU, without a word unless asked */
        fprintf(log, "gpufilter: %s; running on the CPU\n", r->error);
    return cpu_backend(job);
}

void gf_route_end(gf_route *r)
{
    if (!r)
        return;
    join_gpu(r);
    if (r->gpu)
        r->gpu->destroy(r->gpu);
    free(r->stream_data);
    free(r);
}
