/* conv2d_query.cu - kernels.h's conv2d_* functions: what a version can run
 * and how (path, tile, block, shared bytes, grid), and the launch. Each
 * answer comes from the planner (conv2d_plan.cu); versions 0 and 1 launch
 * with the tile as block and need no plan. Host only. */
#include <stdio.h>

#include "conv2d_tiled.cuh"
#include "conv2d_direct.cuh"
#include "conv2d_scan.cuh"
#include "conv2d_mma.cuh"
#include "conv2d_stream.cuh"
#include "conv2d_planner.h"

extern "C" const char *conv2d_version_name(int version)
{
    static const char *const names[CONV2D_VERSIONS] = {"naive", "tiled", "blocked", "separable",
                                                       "direct"};
    return version >= 0 && version < CONV2D_VERSIONS ? names[version] : NULL;
}

/* The answers of a plan of versions 2 to 4 (conv2d_describe, conv2d_report). */
static conv2d_launch_info conv2d_info_of_plan(const conv2d_plan &pl)
{
    return {1, pl.path, (int)(pl.block.x * pl.block.y), pl.shared, pl.v->entry};
}

/* One plan's answers; every query below about a launch at its tile reads
 * them from here. */
extern "C" void conv2d_describe(int version, const conv2d_launch *p, conv2d_launch_info *info)
{
    memset(info, 0, sizeof *info);
    if (version == 0 || version == 1) {
        info->supported = p->channels >= 1 && p->channels <= 4;
        info->threads = p->tile_width * p->tile_height;
        if (version == 1)  /* the weights, then the tile with its halo */
            info->shared = conv2d_weight_bytes(*p) + (size_t)(p->tile_width + p->mask_width - 1) *
                                                         (size_t)(p->tile_height + p->mask_height - 1) *
                                                         (size_t)p->channels;
        info->entry = (const void *)conv2d_entry_for(version, p->channels);
        return;
    }
    conv2d_plan pl;
    if (conv2d_make_plan(version, p, &pl, false))
        *info = conv2d_info_of_plan(pl);
}

static conv2d_launch_info info_of(int version, const conv2d_launch *p)
{
    conv2d_launch_info info;
    conv2d_describe(version, p, &info);
    return info;
}

extern "C" int conv2d_supports(int version, const conv2d_launch *p)
{
    return info_of(version, p).supported;
}

extern "C" int conv2d_path_rank(int version, const conv2d_launch *p)
{
    return info_of(version, p).rank;
}

extern "C" size_t conv2d_shared_bytes(int version, const conv2d_launch *p)
{
    return info_of(version, p).shared;
}

extern "C" int conv2d_block_threads(int version, const conv2d_launch *p)
{
    return info_of(version, p).threads;
}

extern "C" const void *conv2d_kernel_for(int version, const conv2d_launch *p)
{
    return info_of(version, p).entry;
}

extern "C" int conv2d_direct_integer(const conv2d_launch *p)
{
    conv2d_plan pl;
    if (!conv2d_make_plan(4, p, &pl, false))
        return 0;
    return conv2d_separable4(pl.v->ws) || pl.v->ws == kRunning4 || pl.v->ws == kBoxScan4 ||
                   pl.v->ws == kMma4 || conv2d_stream4(pl.v->ws)
               ? CONV2D_SEPARABLE_INTEGER
           : conv2d_gradient4(pl.v->ws) ? CONV2D_GRADIENT_LANES
                                        : pl.v->ws;
}

extern "C" int conv2d_direct_path(const conv2d_launch *p, char *name, size_t size)
{
    conv2d_plan pl;
    if (!conv2d_make_plan(4, p, &pl, false)) {
        snprintf(name, size, "%s", "");
        return 0;
    }
    conv2d_path_name(pl, name, size);
    return 1;
}

/* The tensor-core path on RGBA: the tallest tile of the rule's width, up to
 * 128 rows, that still holds two blocks an SM, whose row pass then sums
 * fewer halo rows, (TH + M - 1) / TH rounded up to 16 rows (one block an
 * SM is much slower). RGBA's interleaved row pass takes 3 to 5 products a
 * step against gray's 2, so its halo rows cost the most: on gray no taller
 * tile was steadily faster (bench/RESULTS.md). From 27x27 on, the row pass
 * on planes holds two blocks an SM at any tile, so the rule's tile stays.
 * Returns the height, or 0. */
static int conv2d_mma_preferred_height(int version, const conv2d_launch *p, const conv2d_plan &pl)
{
    int dev = 0, sms = 0;
    if (!conv2d_device_sms(&dev, &sms))
        return 0;
    for (int th = 128; th > p->tile_height; th -= 16) {
        conv2d_launch q = *p;
        q.tile_height = th;
        conv2d_plan taller;
        if (conv2d_make_plan(version, &q, &taller, false) && taller.v == pl.v &&
            conv2d_resident_blocks(taller, (int)(taller.block.x * taller.block.y)) >= 2LL * sms)
            return th;
    }
    return 0;
}

/* RGBA row streams: one band of 128 lanes a block (512x8), a little faster
 * than 128x64 (32 lanes, 8 bands) from 4096 to 16384 rows, and than 256x64
 * (64 lanes, 8 bands, 512 threads), the occupancy rule's own tile
 * (bench/RESULTS.md); gray shows no steady difference between the shapes. The tensor cores on RGBA: taller tiles
 * (conv2d_mma_preferred_height). */
extern "C" int conv2d_preferred_tile(int version, const conv2d_launch *p, int *width, int *height)
{
    conv2d_plan pl, preferred;
    if (version != 4 || p->channels != 4 || !conv2d_make_plan(version, p, &pl, false) || !pl.v)
        return 0;
    if (pl.v->ws == kMma4) {
        const int th = conv2d_mma_preferred_height(version, p, pl);
        if (th == 0)
            return 0;
        *width = p->tile_width;
        *height = th;
        return 1;
    }
    if (!conv2d_stream4(pl.v->ws))
        return 0;
    conv2d_launch q = *p;
    q.tile_width = 512;  /* 128 lanes of 16 bytes */
    q.tile_height = kStreamRows4;
    if (!conv2d_make_plan(version, &q, &preferred, false) || preferred.v != pl.v)
        return 0;  /* not the same kernel at that tile */
    *width = q.tile_width;
    *height = q.tile_height;
    return 1;
}

extern "C" size_t conv2d_scratch_bytes(int version, const conv2d_launch *p)
{
    (void)version;
    (void)p;
    return 0;
}

extern "C" const void *conv2d_kernel_entry(int version, int channels)
{
    if (version >= 2) {
        const conv2d_variant *v = channels >= 1 && channels <= 4
                                      ? conv2d_find(version, channels, channels, 1,
                                                    version == 4 ? 3 : 0, 0)
                                      : NULL;
        return v ? v->entry : NULL;
    }
    return (const void *)conv2d_entry_for(version, channels);
}

/* The report of a full plan of versions 2 to 4. */
static void conv2d_report_plan(int version, const conv2d_plan &pl, conv2d_launch_report *r)
{
    r->info = conv2d_info_of_plan(pl);
    r->grid_x = pl.grid.x;
    r->grid_y = pl.grid.y;
    /* the prefix sums' h.steps counts rows */
    r->steps = version == 4 && pl.v->ws == kBoxScan4 ? pl.h.steps / kScanRows4 : pl.h.steps;
    if (version == 4)
        conv2d_path_name(pl, r->path, sizeof r->path);
}

/* Versions 0 and 1: the tile is the block, a tile a block. */
static void conv2d_report_tiles(int version, const conv2d_launch *p, conv2d_launch_report *r)
{
    conv2d_describe(version, p, &r->info);
    if (p->tile_width > 0 && p->tile_height > 0) {
        r->grid_x = (unsigned)((p->width + p->tile_width - 1) / p->tile_width);
        r->grid_y = (unsigned)((p->height + p->tile_height - 1) / p->tile_height);
        r->steps = 1;
    }
}

extern "C" void conv2d_report(int version, const conv2d_launch *p, conv2d_launch_report *report)
{
    memset(report, 0, sizeof *report);
    conv2d_plan pl;
    if (version < 2)
        conv2d_report_tiles(version, p, report);
    else if (conv2d_make_plan(version, p, &pl, true))
        conv2d_report_plan(version, pl, report);
}

extern "C" cudaError_t conv2d_gpu(int version, const conv2d_launch *p, cudaStream_t stream,
                                  conv2d_launch_report *report)
{
    if (version >= 2) {
        conv2d_plan pl;
        if (!conv2d_make_plan(version, p, &pl, true))
            return cudaErrorInvalidValue;
        if (report) {
            memset(report, 0, sizeof *report);
            conv2d_report_plan(version, pl, report);
        }
        return pl.v->run(pl, stream);
    }
    conv2d_entry entry = conv2d_entry_for(version, p->channels);
    if (!entry || p->mask_count < 1 || p->mask_count > CONV2D_MAX_MATRICES)
        return cudaErrorInvalidValue;
    if (report)
        conv2d_report(version, p, report);
    const dim3 block(p->tile_width, p->tile_height);
    const dim3 grid((p->width + p->tile_width - 1) / p->tile_width,
                    (p->height + p->tile_height - 1) / p->tile_height);
    return conv2d_start(entry, grid, block, conv2d_shared_bytes(version, p), stream, *p);
}
