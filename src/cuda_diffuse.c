/* cuda_diffuse.c - --diffuse on the GPU backend (kernels/diffuse_gpu.cu),
 * and its --tile sweep.
 *
 * The image's filtered channels go to float32 planes on the device, the
 * iterations run there, one rounding writes them back in place. K from the
 * percentile is the reference's (diffuse_k.c) on a download of the image,
 * so it is the same K. The version: --kernel
 * global|shared|temporal[:K]|stream[:K], by default stream: it computes
 * the temporal kernel's cells without its shared-memory traffic and
 * barriers and moves fewer floats for the same k. Its k, strip width and
 * chunk height: plan_stream's measured default. The temporal kernel's k
 * (--kernel temporal) is the one of least modelled cost, in floats of
 * global traffic an output and iteration: the floats moved and the cells
 * computed at a weight for the conductance's arithmetic (estimates, not
 * measurements); --tile sweep shows the trade.
 * In strip mode, or where the planes do not fit the device, the host
 * reference runs instead (on_host). */
#include <math.h>
#include <stdlib.h>

#include "../kernels/diffuse_gpu.h"
#include "cuda_backend.h"
#include "diffuse_k.h"

#define DEFAULT_TILE_W 64
#define DEFAULT_TILE_H 32

typedef struct {
    int version, k, tile_w, tile_h, blocks_per_sm;  /* stream: tile_w x tile_h = strip x chunk */
    int planes, kind;  /* stream: the planes a launch filters, the gf_diffuse_kind */
} diffuse_plan;

static const char *const version_names[] = {"", "global", "shared", "temporal", "stream"};

/* Cells computed per output and iteration over k iterations of a tile. */
static double work_per_output(int k, int tw, int th)
{
    double cells = 0.0;
    for (int s = 1; s <= k; s++)
        cells += (double)(tw + 2 * (k - s)) * (double)(th + 2 * (k - s));
    return cells / ((double)k * tw * th);
}

/* The stream kernel's cells computed per output and iteration, which are
 * also its floats read per output and launch: every strip of sw columns
 * streams the image's rows and 2k more an item of its layout. */
static double stream_cells(const cuda_backend *b, const diffuse_plan *plan)
{
    diffuse_stream_layout l;
    long long resident = 0;
    if (diffuse_stream_wave(plan->kind, plan->k, plan->tile_w, &resident) != cudaSuccess ||
        diffuse_stream_layout_for(b->width, b->height, plan->planes, plan->k, plan->tile_w, plan->tile_h,
                                  resident, &l) != 0)
        return NAN;
    return (double)plan->tile_w * ((double)l.strips * b->height * l.planes + l.items * 2.0 * plan->k) /
           ((double)b->width * b->height * l.planes);
}

static double redundant_percent(const cuda_backend *b, const diffuse_plan *plan)
{
    if (plan->version == DIFFUSE_GLOBAL)
        return 0.0;
    if (plan->version == DIFFUSE_STREAM)
        return 100.0 * (stream_cells(b, plan) - 1.0);
    return 100.0 * (work_per_output(plan->k, plan->tile_w, plan->tile_h) - 1.0);
}

static double conductance_weight(const gf_diffuse *how)
{
    return how->kind == GF_DIFFUSE_HEAT ? 0.1 : how->kind == GF_DIFFUSE_PM_EXP ? 0.6 : 0.4;
}

/* The modelled cost of an iteration in floats of global traffic an output. */
static double model_cost(const cuda_backend *b, const gf_diffuse *how, int k, int tw, int th,
                         int blocks)
{
    const double moved = ((double)(tw + 2 * k) * (th + 2 * k) + (double)tw * th) / ((double)k * tw * th);
    const double occupancy = (double)blocks * DIFFUSE_THREADS_X * DIFFUSE_THREADS_Y /
                             (double)b->prop.maxThreadsPerMultiProcessor;
    return moved / (occupancy >= 0.5 ? 1.0 : occupancy / 0.5) +
           conductance_weight(how) * work_per_output(k, tw, th);
}

/* The stream plan: k, strip width and chunk height each given (not 0) or
 * the measured default (docs/diffuse.md): the most iterations a launch up
 * to 8, strips of 64 columns, chunks of 64 rows halved down to 16 while
 * the warps would fill fewer than two waves on the device. 0, or -1 on a
 * device failure or when no such kernel fits. */
static int plan_stream(const cuda_backend *b, const gf_diffuse *how, int given_k, int given_w,
                       int given_h, diffuse_plan *plan)
{
    const int k = given_k ? given_k : how->iterations < DIFFUSE_MAX_STEPS ? how->iterations
                                                                        : DIFFUSE_MAX_STEPS;
    const int sw = given_w ? given_w : 64;
    int blocks = 0;
    CUDA_CHECK(diffuse_stream_blocks_per_sm(how->kind, k, sw, &blocks), "querying occupancy");
    if (blocks == 0) {
        gf_set_error("--diffuse stream: no kernel fits on the device");
        return -1;
    }
    int chunk = given_h ? given_h : 64;
    const long long slots = (long long)blocks * DIFFUSE_STREAM_WARPS * b->prop.multiProcessorCount;
    const long long across = (long long)diffuse_stream_strips(b->width, k, sw) * how->channels_filtered;
    while (!given_h && chunk > 16 && across * ((b->height + chunk - 1) / chunk) < 2 * slots)
        chunk /= 2;
    *plan = (diffuse_plan){DIFFUSE_STREAM, k, sw, chunk < b->height ? chunk : b->height, blocks,
                           how->channels_filtered, (int)how->kind};
    return 0;
}

/* The version, k and tile for this run; -2 (a usage error) for a tile
 * that cannot launch, -1 on a device failure. */
static int plan_diffuse(const cuda_backend *b, const gf_diffuse *how, diffuse_plan *plan)
{
    const gf_backend_options *o = &b->options;
    *plan = (diffuse_plan){o->diffuse_version ? o->diffuse_version : DIFFUSE_STREAM, 1,
                           o->tile_width ? o->tile_width : DEFAULT_TILE_W,
                           o->tile_height ? o->tile_height : DEFAULT_TILE_H, 0, 0, 0};
    if (plan->version == DIFFUSE_GLOBAL)
        return 0;
    if (plan->version == DIFFUSE_STREAM) {
        if (o->tile_width && o->tile_width != 64 && o->tile_width != 128) {
            gf_set_error("tile %dx%d cannot launch for --diffuse stream: its width is a warp's strip, "
                         "64 or 128 columns (2 or 4 a lane), its height the rows a warp streams; "
                         "--kernel temporal takes tiles of any size",
                         o->tile_width, o->tile_height);
            return -2;
        }
        return plan_stream(b, how, o->diffuse_steps, o->tile_width, o->tile_height, plan);
    }
    const int first = plan->version == DIFFUSE_SHARED ? 1 : o->diffuse_steps ? o->diffuse_steps : 1;
    const int last = plan->version == DIFFUSE_SHARED ? 1 : o->diffuse_steps ? o->diffuse_steps : DIFFUSE_MAX_STEPS;
    double best = INFINITY;
    for (int k = first; k <= last; k++) {
        int blocks = 0;
        CUDA_CHECK(diffuse_blocks_per_sm(k, plan->tile_w, plan->tile_h, &blocks), "querying occupancy");
        const double cost = blocks > 0 ? model_cost(b, how, k, plan->tile_w, plan->tile_h, blocks) : INFINITY;
        if (cost < best) {
            best = cost;
            plan->k = k;
            plan->blocks_per_sm = blocks;
        }
    }
    if (best == INFINITY) {
        gf_set_error("tile %dx%d cannot launch for --diffuse: its shared tile (%zu bytes at k = %d) "
                     "is over the device's limit", plan->tile_w, plan->tile_h,
                     diffuse_shared_bytes(first, plan->tile_w, plan->tile_h), first);
        return -2;
    }
    return 0;
}

/* K for this run: given, or the reference's percentile of a download. */
static int diffusion_k(cuda_backend *b, const gf_diffuse *how, double *k)
{
    *k = how->k;
    if (how->kind == GF_DIFFUSE_HEAT || how->k > 0.0)
        return 0;
    gf_image *img = gf_image_new_depth(b->width, b->height, b->channels, b->depth);
    int status = img ? b->base.download(&b->base, img) : -1;
    if (status == 0)
        status = gf_diffuse_percentile_k(img, how, k);
    gf_image_free(img);
    return status;
}

static diffuse_params params_for(const cuda_backend *b, const gf_diffuse *how, double k)
{
    return (diffuse_params){b->width, b->height, how->channels_filtered, (int)how->border,
                            (int)how->kind, (float)how->step,
                            how->kind == GF_DIFFUSE_HEAT ? 0.0f : (float)(1.0 / k)};
}

/* Two plane buffers, or 0 (cleared error) where the device has no room. */
static int alloc_planes(const diffuse_params *p, float *planes[2])
{
    const size_t bytes = (size_t)p->width * (size_t)p->height * (size_t)p->planes * sizeof(float);
    planes[0] = planes[1] = NULL;
    if (cudaMalloc((void **)&planes[0], bytes) == cudaSuccess &&
        cudaMalloc((void **)&planes[1], bytes) == cudaSuccess)
        return 1;
    (void)cudaGetLastError();
    cudaFree(planes[0]);
    planes[0] = NULL;
    return 0;
}

static size_t plan_shared_bytes(const diffuse_plan *plan)
{
    return plan->version == DIFFUSE_SHARED || plan->version == DIFFUSE_TEMPORAL
               ? diffuse_shared_bytes(plan->k, plan->tile_w, plan->tile_h) : 0;
}

static void report_plan(const cuda_backend *b, const diffuse_plan *plan, float ms)
{
    fprintf(b->options.log, "gpufilter: diffuse on %s (device %d): %s", b->prop.name,
            b->options.device, version_names[plan->version]);
    if (plan->version == DIFFUSE_STREAM)
        fprintf(b->options.log, ", k %d, strip %d columns (%d a lane) x chunk %d rows, %d blocks/SM "
                "(%d warps), redundant work %.1f%%", plan->k, plan->tile_w, plan->tile_w / 32,
                plan->tile_h, plan->blocks_per_sm, plan->blocks_per_sm * DIFFUSE_STREAM_WARPS,
                redundant_percent(b, plan));
    else if (plan->version != DIFFUSE_GLOBAL)
        fprintf(b->options.log, ", k %d, tile %dx%d, %d blocks/SM, shared %zu B, redundant work %.1f%%",
                plan->k, plan->tile_w, plan->tile_h, plan->blocks_per_sm, plan_shared_bytes(plan),
                redundant_percent(b, plan));
    fprintf(b->options.log, ", %.3f ms\n", ms);
}

/* Load, iterate, store in place; the planes freed. */
static int run_on_device(cuda_backend *b, const gf_diffuse *how, const diffuse_params *p,
                         const diffuse_plan *plan, float *planes[2])
{
    unsigned char *image = b->buffer[b->current];
    int result = 0;
    CUDA_CHECK(cudaEventRecord(b->start, b->stream), "timing the diffusion");
    CUDA_CHECK(diffuse_load(image, b->depth, b->channels, p, planes[0], b->stream), "launching diffuse_load");
    CUDA_CHECK(diffuse_run(p, planes, how->iterations, plan->version, plan->k, plan->tile_w,
                           plan->tile_h, &result, b->stream), "launching diffusion");
    CUDA_CHECK(diffuse_store(planes[result], image, b->depth, b->channels, p, b->stream),
               "launching diffuse_store");
    CUDA_CHECK(cudaEventRecord(b->stop, b->stream), "timing the diffusion");
    CUDA_CHECK(cudaStreamSynchronize(b->stream), "running the diffusion");
    if (b->options.log) {
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, b->start, b->stop), "timing the diffusion");
        report_plan(b, plan, ms);
    }
    return 0;
}

int gf_cuda_diffuse(gf_backend *self, const gf_diffuse *how)
{
    cuda_backend *b = (cuda_backend *)self;
    if (b->strips)
        return self->on_host(self, gf_diffuse_image, how);
    if (gf_diffuse_check(how) < 0)
        return -1;
    diffuse_plan plan;
    int status = plan_diffuse(b, how, &plan);
    if (status < 0)
        return status;
    const double t0 = gf_now_ms();
    double k = 0.0;
    if (diffusion_k(b, how, &k) < 0)
        return -1;
    if (how->kind != GF_DIFFUSE_HEAT && k == 0.0) {  /* every conductance 0: nothing moves */
        if (how->log)
            gf_diffuse_report(how, k, gf_now_ms() - t0);
        return 0;
    }
    const diffuse_params p = params_for(b, how, k);
    float *planes[2];
    if (!alloc_planes(&p, planes))
        return self->on_host(self, gf_diffuse_image, how);
    status = run_on_device(b, how, &p, &plan, planes);
    cudaFree(planes[0]);
    cudaFree(planes[1]);
    if (status == 0 && how->log)
        gf_diffuse_report(how, k, gf_now_ms() - t0);
    return status;
}

/* ---- --tile sweep --------------------------------------------------------------- */

static const int sweep_tiles[][2] = {{32, 8}, {32, 16}, {32, 32}, {64, 16}, {64, 32},
                                     {64, 64}, {128, 32}, {128, 64}};

typedef struct {
    const diffuse_params *p;
    float **planes;
    int iterations;
    const diffuse_plan *plan;
} diffusion_run;

static cudaError_t run_diffusion(cuda_backend *b, const void *arg)
{
    const diffusion_run *r = arg;
    int result;
    return diffuse_run(r->p, r->planes, r->iterations, r->plan->version, r->plan->k, r->plan->tile_w,
                       r->plan->tile_h, &result, b->stream);
}

/* The median of 5 timed runs of the whole diffusion, ms an iteration. */
static int time_version(cuda_backend *b, const diffuse_params *p, float *planes[2], int iterations,
                        const diffuse_plan *plan, double *ms_per_iteration)
{
    const diffusion_run run = {p, planes, iterations, plan};
    float ms[5];
    if (gf_cuda_time_runs(b, run_diffusion, &run, 1, 5, ms) < 0)
        return -1;
    *ms_per_iteration = gf_cuda_median(ms, 5) / iterations;
    return 0;
}

typedef struct {
    float *dst;
    const float *src;
    size_t bytes;
} plane_copy;

static cudaError_t copy_planes(cuda_backend *b, const void *arg)
{
    const plane_copy *c = arg;
    return cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, b->stream);
}

/* One read and one write of every plane: the median of 5 device copies, ms. */
static int copy_ms(cuda_backend *b, const diffuse_params *p, float *planes[2], double *ms)
{
    const plane_copy copy = {planes[1], planes[0], (size_t)p->width * p->height * p->planes * sizeof(float)};
    float runs[5];
    if (gf_cuda_time_runs(b, copy_planes, &copy, 1, 5, runs) < 0)
        return -1;
    *ms = gf_cuda_median(runs, 5);
    return 0;
}

static void sweep_row(FILE *out, int csv, const cuda_backend *b, const diffuse_plan *plan, double ms,
                      double v1_ms, double bound_ms, int chosen)
{
    const int threads = plan->version == DIFFUSE_STREAM ? 32 * DIFFUSE_STREAM_WARPS
                                                        : DIFFUSE_THREADS_X * DIFFUSE_THREADS_Y;
    const size_t shared = plan_shared_bytes(plan);
    const double redundant = redundant_percent(b, plan);
    if (csv)
        fprintf(out, "%s,%d,%dx%d,%d,%d,%zu,%.1f,%.4f,%.2f,%.1f,%d\n", version_names[plan->version],
                plan->k, plan->tile_w, plan->tile_h, threads, plan->blocks_per_sm, shared, redundant, ms,
                v1_ms / ms, 100.0 * bound_ms / ms, chosen);
    else
        fprintf(out, "%-9s %2d %4dx%-3d %7d %9d %9zu %9.1f %10.4f %7.2f %8.1f%s\n",
                version_names[plan->version], plan->k, plan->tile_w, plan->tile_h, threads,
                plan->blocks_per_sm, shared, redundant, ms, v1_ms / ms, 100.0 * bound_ms / ms,
                chosen ? "  *" : "");
}

static int same_plan(const diffuse_plan *a, const diffuse_plan *b)
{
    return a->version == b->version && a->k == b->k && a->tile_w == b->tile_w && a->tile_h == b->tile_h;
}

/* Chunk heights 32, 64, 128, 256 and the default's, each cut to the
 * image's height, each once; their count. */
static int sweep_chunks(int height, int default_chunk, int *heights)
{
    const int candidates[] = {32, 64, 128, 256, default_chunk};
    int n = 0;
    for (size_t c = 0; c < sizeof candidates / sizeof candidates[0]; c++) {
        const int h = candidates[c] < height ? candidates[c] : height;
        int seen = 0;
        for (int e = 0; e < n; e++)
            seen |= heights[e] == h;
        if (!seen)
            heights[n++] = h;
    }
    return n;
}

/* The stream kernel's rows: each strip width and k, at chunks of 32 to 256
 * rows and at the default chunk for them. */
static int sweep_stream(cuda_backend *b, const gf_diffuse *how, const diffuse_params *p,
                        float *planes[2], int csv, FILE *out, const diffuse_plan *chosen, double v1,
                        double bound)
{
    static const int widths[] = {64, 128};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        for (int k = 1; k <= DIFFUSE_MAX_STEPS; k++) {
            diffuse_plan default_plan;
            if (plan_stream(b, how, k, widths[i], 0, &default_plan) < 0)
                return -1;
            int heights[5];
            const int n = sweep_chunks(p->height, default_plan.tile_h, heights);
            for (int c = 0; c < n; c++) {
                diffuse_plan plan = {DIFFUSE_STREAM, k, widths[i], heights[c], default_plan.blocks_per_sm,
                                     default_plan.planes, default_plan.kind};
                double ms = 0.0;
                if (time_version(b, p, planes, how->iterations, &plan, &ms) < 0)
                    return -1;
                sweep_row(out, csv, b, &plan, ms, v1, bound, same_plan(&plan, chosen));
            }
        }
    return 0;
}

/* global, shared (64x32), every tile x k of the temporal kernel, then the
 * stream kernel's rows. */
static int sweep_all(cuda_backend *b, const gf_diffuse *how, const diffuse_params *p,
                     float *planes[2], int csv, FILE *out)
{
    diffuse_plan chosen;
    gf_backend_options saved = b->options;
    b->options.diffuse_version = 0;
    b->options.diffuse_steps = 0;
    b->options.tile_width = b->options.tile_height = 0;
    int status = plan_diffuse(b, how, &chosen);
    b->options = saved;
    if (status < 0)
        return status;
    double bound = 0.0, v1 = 0.0, ms = 0.0;
    diffuse_plan plan = {DIFFUSE_GLOBAL, 1, DIFFUSE_THREADS_X, DIFFUSE_THREADS_Y, 0, 0, 0};
    if (copy_ms(b, p, planes, &bound) < 0 || time_version(b, p, planes, how->iterations, &plan, &v1) < 0)
        return -1;
    if (csv)
        fprintf(out, "version,k,tile,threads,blocks_per_sm,shared_bytes,redundant_pct,ms_per_iteration,"
                "x_global,pct_of_copy_bound,chosen\n");
    else
        fprintf(out, "%dx%d, %d plane%s, %d iterations; bound: a device copy of the planes, %.4f ms\n"
                "(stream: tile = strip columns x chunk rows)\n"
                "version    k     tile threads blocks/SM    shared redundant%%  ms/iter  x global  %% bound\n",
                p->width, p->height, p->planes, p->planes == 1 ? "" : "s", how->iterations, bound);
    sweep_row(out, csv, b, &plan, v1, v1, bound, 0);
    for (int v = DIFFUSE_SHARED; v <= DIFFUSE_TEMPORAL; v++)
        for (size_t t = 0; t < sizeof sweep_tiles / sizeof sweep_tiles[0]; t++)
            for (int k = 1; k <= (v == DIFFUSE_SHARED ? 1 : DIFFUSE_MAX_STEPS); k++) {
                plan = (diffuse_plan){v, k, sweep_tiles[t][0], sweep_tiles[t][1], 0, 0, 0};
                if (v == DIFFUSE_TEMPORAL && k == 1)
                    continue;  /* the shared row */
                CUDA_CHECK(diffuse_blocks_per_sm(k, plan.tile_w, plan.tile_h, &plan.blocks_per_sm),
                           "querying occupancy");
                const size_t shared = diffuse_shared_bytes(k, plan.tile_w, plan.tile_h);
                if (plan.blocks_per_sm == 0) {
                    fprintf(out, csv ? "%s,%d,%dx%d,,0,%zu,,,,,0\n" : "%-9s %2d %4dx%-3d cannot launch "
                            "(%zu bytes of shared memory)\n", v == DIFFUSE_SHARED ? "shared" : "temporal",
                            k, plan.tile_w, plan.tile_h, shared);
                    continue;
                }
                if (time_version(b, p, planes, how->iterations, &plan, &ms) < 0)
                    return -1;
                sweep_row(out, csv, b, &plan, ms, v1, bound, same_plan(&plan, &chosen));
            }
    return sweep_stream(b, how, p, planes, csv, out, &chosen, v1, bound);
}

int gf_cuda_diffuse_sweep(gf_backend *cuda, const gf_image *img, const gf_diffuse *how, int csv,
                          FILE *out)
{
    cuda_backend *b = (cuda_backend *)cuda;
    if (gf_diffuse_check(how) < 0 || gf_cuda_upload_copy(cuda, img) < 0)
        return -1;
    if (b->strips) {
        gf_set_error("--tile sweep: the image is over the GPU memory budget");
        return -1;
    }
    double k = 0.0;
    if (diffusion_k(b, how, &k) < 0)
        return -1;
    if (how->kind != GF_DIFFUSE_HEAT && k == 0.0)
        k = 1.0;  /* a flat percentile: time the scheme anyway */
    const diffuse_params p = params_for(b, how, k);
    float *planes[2];
    if (!alloc_planes(&p, planes)) {
        gf_set_error("--tile sweep: no room on the device for two float planes of the image");
        return -1;
    }
    const cudaError_t err = diffuse_load(b->buffer[b->current], b->depth, b->channels, &p, planes[0],
                                         b->stream);
    if (err != cudaSuccess)
        gf_set_error("CUDA error while launching diffuse_load: %s", cudaGetErrorString(err));
    const int status = err == cudaSuccess ? sweep_all(b, how, &p, planes, csv, out) : -1;
    cudaStreamSynchronize(b->stream);
    cudaFree(planes[0]);
    cudaFree(planes[1]);
    return status;
}
