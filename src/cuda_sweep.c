/* cuda_sweep.c - --tile sweep: every tile of a conv2d version timed on
 * the image, with what the occupancy API says of it, the tile the tile
 * rule (tile_rule.c) takes marked. */
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"

/* Each tile's time: the median of SWEEP_REPS runs, taken in SWEEP_ROUNDS
 * rounds over all the tiles (a warm-up run, then SWEEP_REPS / SWEEP_ROUNDS
 * timed runs a tile in each round), so that a stretch of lower clocks or a
 * busier machine falls on every tile alike rather than on the tiles timed
 * during it: timed one after another, gray box9's tiles of one grid moved
 * by a third between passes of the same sweep. */
#define SWEEP_REPS 20
#define SWEEP_ROUNDS 4
#define SWEEP_WIDTHS 7
#define SWEEP_HEIGHTS 7

static const char *const border_names[] = {"nearest", "constant", "reflect", "mirror", "wrap"};

static int compare_floats(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int gf_cuda_time_runs(cuda_backend *b, gf_cuda_timed_work what, const void *arg, int warm, int n,
                      float *ms)
{
    for (int i = -warm; i < n; i++) {
        CUDA_CHECK(cudaEventRecord(b->start, b->stream), "recording an event");
        CUDA_CHECK(what(b, arg), "running the timed work");
        CUDA_CHECK(cudaEventRecord(b->stop, b->stream), "recording an event");
        CUDA_CHECK(cudaEventSynchronize(b->stop), "running the timed work");
        if (i >= 0)
            CUDA_CHECK(cudaEventElapsedTime(&ms[i], b->start, b->stop), "reading an event");
    }
    return 0;
}

float gf_cuda_median(float *ms, int n)
{
    qsort(ms, (size_t)n, sizeof ms[0], compare_floats);
    return ms[n / 2];
}

static cudaError_t copy_image(cuda_backend *b, const void *arg)
{
    (void)arg;
    return cudaMemcpyAsync(b->buffer[1], b->buffer[0], (size_t)b->height * gf_cuda_row_bytes(b),
                           cudaMemcpyDeviceToDevice, b->stream);
}

typedef struct {
    int version;
    const conv2d_launch *launch;
} sweep_launch;

static cudaError_t launch_once(cuda_backend *b, const void *arg)
{
    const sweep_launch *s = arg;
    return conv2d_gpu(s->version, s->launch, b->stream, NULL);
}

/* One row of the sweep: a tile and what the occupancy API says of it, or
 * why it cannot launch, and its timed runs. */
typedef struct {
    conv2d_launch launch;
    int threads, is_auto;
    occupancy_info info;
    char why[256];  /* empty: it launches */
    float ms[SWEEP_REPS];
} sweep_row;

/* Tile w x h of the sweep into *r: what the occupancy API says of it, or
 * why it cannot launch. Returns 1 for a row, 0 for a tile that is no
 * candidate, -1 on a CUDA failure. */
static int sweep_row_of(cuda_backend *b, int version, const conv2d_launch *base, int w, int h,
                        sweep_row *r)
{
    memset(r, 0, sizeof *r);
    r->launch = *base;
    r->launch.tile_width = w;
    r->launch.tile_height = h;
    r->is_auto = w == base->tile_width && h == base->tile_height;
    conv2d_launch_info launch;  /* one plan a tile */
    conv2d_describe(version, &r->launch, &launch);
    r->threads = launch.threads;
    const char *why = NULL;
    if (!launch.supported) {
        if (w * h < 64 || w * h > 8192)
            return 0;  /* far outside what this version runs: not a candidate */
        why = "cannot launch: not a tile shape this kernel version runs";
    } else if (r->threads < 32) {
        return 0;
    } else if (gf_tile_fits(&b->prop, version, &r->launch, &launch) < 0) {
        why = gf_error() + strlen("gpufilter: ");
    } else if (gf_tile_occupancy(&b->prop, &launch, &r->info) < 0) {
        return -1;
    } else if (r->info.blocks_per_sm == 0) {
        why = "cannot launch: no block fits on a multiprocessor";
    }
    if (why)
        snprintf(r->why, sizeof r->why, "%s", why);
    return 1;
}

/* The candidate tiles of the sweep into rows[], in the order printed, the
 * automatic tile last where the grid lacks it (a tile measured faster for
 * its path, taller than the grid's rows: conv2d_preferred_tile); returns
 * their number, or -1 on a CUDA failure. */
static int sweep_rows(cuda_backend *b, int version, const conv2d_launch *base, sweep_row *rows)
{
    static const int widths[SWEEP_WIDTHS] = {8, 16, 32, 64, 128, 256, 512};
    static const int heights[SWEEP_HEIGHTS] = {1, 2, 4, 8, 16, 32, 64};
    int n = 0, has_auto = 0;
    for (int i = 0; i < SWEEP_WIDTHS; i++)
        for (int j = 0; j < SWEEP_HEIGHTS; j++) {
            const int row = sweep_row_of(b, version, base, widths[i], heights[j], &rows[n]);
            if (row < 0)
                return -1;
            has_auto |= row && rows[n].is_auto;
            n += row;
        }
    if (!has_auto) {
        const int row = sweep_row_of(b, version, base, base->tile_width, base->tile_height, &rows[n]);
        if (row < 0)
            return -1;
        n += row;
    }
    return n;
}

static void print_sweep_row(FILE *out, int csv, int version, const sweep_row *r, float ms,
                            double bytes, double pixels, double copy_gbs)
{
    const conv2d_launch *c = &r->launch;
    if (r->why[0]) {
        if (csv)
            fprintf(out, "%d,%d,%d,,,,,,,,,%d,\"%s\"\n", c->tile_width, c->tile_height, r->threads,
                    r->is_auto, r->why);
        else
            fprintf(out, "%4dx%-4d %7d  %s\n", c->tile_width, c->tile_height, r->threads, r->why);
        return;
    }
    const double gbs = bytes / (ms * 1e6);
    const size_t shared = conv2d_shared_bytes(version, c);
    if (csv)
        fprintf(out, "%d,%d,%d,%d,%d,%.4f,%zu,%.4f,%.2f,%.1f,%.1f,%d,\n", c->tile_width,
                c->tile_height, r->threads, (r->threads + 31) / 32, r->info.blocks_per_sm,
                r->info.occupancy, shared, ms, pixels / (ms * 1e6), gbs, 100.0 * gbs / copy_gbs,
                r->is_auto);
    else
        fprintf(out, "%4dx%-4d %7d %5d %8.0f%% %9zu %9.3f %8.1f %8.0f %8.1f%%%s\n", c->tile_width,
                c->tile_height, r->threads, (r->threads + 31) / 32, 100.0 * r->info.occupancy,
                shared, ms, pixels / (ms * 1e6), gbs, 100.0 * gbs / copy_gbs,
                r->is_auto ? "  <- auto" : "");
}

int gf_cuda_tile_sweep(gf_backend *self, const gf_image *img, const gf_mask *mask,
                       gf_border border, int channels_filtered, int csv, FILE *out)
{
    cuda_backend *b = (cuda_backend *)self;
    if (img->depth == 16) {
        gf_set_error("--tile sweep times the 8-bit kernels; convert the image first (gpufilter "
                     "--depth 8 IN OUT)");
        return -2;
    }
    b->options.tile_width = b->options.tile_height = 0;  /* the automatic choice first */
    if (gf_cuda_upload_copy(self, img) < 0)
        return -1;
    if (b->strips) {
        gf_set_error("--tile sweep needs the whole image in GPU memory; it is over the budget");
        return -1;
    }
    conv2d_launch base;
    int version;
    int status = gf_cuda_prepare_convolve(b, mask, border, channels_filtered, &base, &version);
    if (status < 0)
        return status;
    base.src = b->buffer[0];
    base.dst = b->buffer[1];
    const double bytes = 2.0 * (double)b->height * (double)gf_cuda_row_bytes(b);  /* read + write */
    const double pixels = (double)b->width * (double)b->height;
    float copy_runs[SWEEP_REPS];
    if (gf_cuda_time_runs(b, copy_image, NULL, 2, SWEEP_REPS, copy_runs) < 0)
        return -1;
    const float copy_ms = gf_cuda_median(copy_runs, SWEEP_REPS);
    const double copy_gbs = bytes / (copy_ms * 1e6);
    sweep_row *rows = calloc(SWEEP_WIDTHS * SWEEP_HEIGHTS + 1, sizeof *rows);  /* + the automatic tile */
    if (!rows) {
        gf_set_error("out of host memory for the tile sweep");
        return -1;
    }
    const int n = sweep_rows(b, version, &base, rows);
    if (n < 0) {  /* a CUDA failure while listing the tiles */
        free(rows);
        return -1;
    }
    const int per_round = SWEEP_REPS / SWEEP_ROUNDS;
    for (int round = 0; round < SWEEP_ROUNDS; round++)
        for (int k = 0; k < n; k++) {
            sweep_launch s = {version, &rows[k].launch};
            if (!rows[k].why[0] &&
                gf_cuda_time_runs(b, launch_once, &s, 1, per_round, rows[k].ms + round * per_round) < 0) {
                free(rows);
                return -1;
            }
        }
    if (csv)
        fprintf(out, "tile_width,tile_height,threads,warps,blocks_per_sm,occupancy,shared_bytes,"
                     "ms,gpx_per_s,gb_per_s,roofline_percent,auto,note\n");
    else
        fprintf(out, "conv2d %s, %s %dx%d on %dx%dx%d, %s border, %s; device copy %.3f ms "
                     "(%.0f GB/s), median of %d runs (%d rounds over the tiles)\n"
                     "%-9s %7s %5s %9s %9s %9s %8s %8s %9s\n",
                conv2d_version_name(version), mask->name, mask->width, mask->height, b->width,
                b->height, b->channels, border_names[border], b->prop.name, copy_ms, copy_gbs,
                SWEEP_REPS, SWEEP_ROUNDS, "tile", "threads", "warps", "occupancy", "shared B", "ms",
                "Gpx/s", "GB/s", "roofline");
    float best_ms = 0.0f, auto_ms = 0.0f;
    int best = -1, automatic = -1;
    for (int k = 0; k < n; k++) {
        const float ms = rows[k].why[0] ? 0.0f : gf_cuda_median(rows[k].ms, SWEEP_REPS);
        print_sweep_row(out, csv, version, &rows[k], ms, bytes, pixels, copy_gbs);
        if (rows[k].why[0])
            continue;
        if (best < 0 || ms < best_ms) {
            best_ms = ms;
            best = k;
        }
        if (rows[k].is_auto) {
            auto_ms = ms;
            automatic = k;
        }
    }
    if (!csv && best >= 0)
        fprintf(out, "auto %dx%d: %.3f ms; best %dx%d: %.3f ms; auto is %.1f%% slower than the best\n",
                base.tile_width, base.tile_height, auto_ms, rows[best].launch.tile_width,
                rows[best].launch.tile_height, best_ms,
                automatic >= 0 ? 100.0 * (auto_ms - best_ms) / best_ms : 0.0);
    free(rows);
    return 0;
}
