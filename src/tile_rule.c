/* tile_rule.c - the tile rule of the conv2d kernels (gf_tile_choose: the
 * candidates that launch on a device, ranked by path, occupancy and halo,
 * or the tile measured faster for a path), a function of the device's
 * properties and the launch: the GPU backend, --tile sweep's "auto" row and
 * the bench all take their tiles from it. */
#include <math.h>

#include "backend.h"
#include "tile_rule.h"
#include "util.h"

/* -1 and the message of a failed CUDA call */
static int cuda_failed(cudaError_t err, const char *what)
{
    gf_set_error("CUDA error while %s: %s", what, cudaGetErrorString(err));
    return -1;
}

int gf_tile_occupancy(const struct cudaDeviceProp *d, const conv2d_launch_info *launch,
                      occupancy_info *info)
{
    cudaError_t err = conv2d_allow_shared(launch->entry, launch->shared);
    if (err != cudaSuccess)
        return cuda_failed(err, "raising the shared-memory limit");
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->blocks_per_sm, launch->entry,
                                                        launch->threads, launch->shared);
    if (err != cudaSuccess)
        return cuda_failed(err, "querying occupancy");
    int warps = (launch->threads + 31) / 32;
    info->occupancy = (double)(info->blocks_per_sm * warps) / (double)(d->maxThreadsPerMultiProcessor / 32);
    return 0;
}

/* gf_tile_fits for a launch whose plan says info. */
static int fits_with(const struct cudaDeviceProp *d, int version, const conv2d_launch *p,
                     const conv2d_launch_info *info)
{
    long threads = info->threads;
    if (version > GF_CONV_TILED && !info->supported) {
        gf_set_error("tile %dx%d does not suit the %s kernel with a %dx%d mask (see --tile "
                     "sweep for the tiles it runs)", p->tile_width, p->tile_height,
                     conv2d_version_name(version), p->mask_width, p->mask_height);
        return -2;
    }
    if (threads > d->maxThreadsPerBlock || p->tile_width > d->maxThreadsDim[0] ||
        p->tile_height > d->maxThreadsDim[1]) {
        gf_set_error("tile %dx%d cannot launch on %s: %ld threads; the limit is %d per block "
                     "(and %d x %d in x and y)", p->tile_width, p->tile_height, d->name, threads,
                     d->maxThreadsPerBlock, d->maxThreadsDim[0], d->maxThreadsDim[1]);
        return -2;
    }
    size_t shared = info->shared;
    if (shared > d->sharedMemPerBlockOptin) {
        gf_set_error("tile %dx%d with a %dx%d mask needs %zu bytes of shared memory; %s allows "
                     "%zu per block", p->tile_width, p->tile_height, p->mask_width,
                     p->mask_height, shared, d->name, d->sharedMemPerBlockOptin);
        return -2;
    }
    return 0;
}

int gf_tile_fits(const struct cudaDeviceProp *d, int version, const conv2d_launch *p,
                 const conv2d_launch_info *plan)
{
    conv2d_launch_info info;
    if (!plan) {
        conv2d_describe(version, p, &info);
        plan = &info;
    }
    return fits_with(d, version, p, plan);
}

/* Shared-memory bytes loaded per output pixel relative to a halo-free tile. */
static double halo_overhead(const conv2d_launch *p)
{
    return (double)(p->tile_width + p->mask_width - 1) * (p->tile_height + p->mask_height - 1) /
           ((double)p->tile_width * p->tile_height);
}

/* A candidate tile and what the occupancy API says of it. */
typedef struct {
    int width, height, threads, rank;
    double occupancy, overhead;
} tile_candidate;

/* Whether tile a beats tile b: for the direct version, the one whose
 * arithmetic path comes first (conv2d_path_rank: a tile that cannot run the
 * prefix sums gets another path, at another occupancy); then the higher
 * theoretical occupancy, then the less halo overhead, then the larger
 * tile. The direct version takes the
 * most threads per block first, among the tiles less than a fifth below
 * the best occupancy. Its kernels are built for blocks of 256 threads
 * (registers capped for 2 or 3 such blocks an SM), and one that needs
 * fewer registers than its cap reports a higher occupancy for smaller
 * blocks, which ran slower (gray gaussian3 with its 71 registers: 128x64,
 * 44%, 0.074 ms; 256x64, 38%, 0.065 ms). But where shared memory bounds the
 * blocks an SM, the larger blocks can fall a fifth behind or more, and ran
 * slower themselves (the RGBA box masks' running sums, whose rings take
 * 384 to 864 bytes a thread: box5, 256x64, 12.5%, 0.326 ms; 128x64, 19%,
 * 0.303 ms; box11, 256x64, 12.5%, 0.432 ms; 128x64, 15.6%, 0.384 ms). */
static int tile_beats(int version, const tile_candidate *a, const tile_candidate *b,
                      double best_occupancy)
{
    if (a->rank != b->rank)  /* the direct version's most specific path first */
        return a->rank < b->rank;
    if (version == GF_CONV_DIRECT && a->threads != b->threads) {
        const double floor = 0.8 * best_occupancy + 1e-9;  /* a fifth below the best: out */
        if ((a->occupancy > floor) != (b->occupancy > floor))
            return a->occupancy > floor;
        return a->threads > b->threads;
    }
    if (fabs(a->occupancy - b->occupancy) > 1e-9)
        return a->occupancy > b->occupancy;
    if (fabs(a->overhead - b->overhead) > 1e-9)
        return a->overhead < b->overhead;
    return a->width * a->height > b->width * b->height;
}

/* p's tile becomes the one conv2d_preferred_tile names for its path, where
 * there is one that launches here with blocks resident. */
static int prefer_measured_tile(const struct cudaDeviceProp *d, int version, conv2d_launch *p)
{
    conv2d_launch c = *p;
    if (!conv2d_preferred_tile(version, p, &c.tile_width, &c.tile_height) || gf_tile_fits(d, version, &c, NULL) < 0)
        return 0;
    conv2d_launch_info launch;
    conv2d_describe(version, &c, &launch);
    occupancy_info info;
    if (gf_tile_occupancy(d, &launch, &info) < 0)
        return -1;
    if (info.blocks_per_sm > 0)
        *p = c;
    return 0;
}

/* Default tile: the best of the tiles that launch (tile_beats), or the
 * tile measured faster for its path (prefer_measured_tile). Widths are
 * multiples of 16 so that a row of the tile is read with coalesced
 * accesses. */
int gf_tile_choose(const struct cudaDeviceProp *d, int version, conv2d_launch *p)
{
    static const int widths[] = {8, 16, 32, 64, 128, 256};
    static const int heights[] = {1, 2, 4, 8, 16, 32, 64};
    tile_candidate cand[sizeof widths / sizeof widths[0] * (sizeof heights / sizeof heights[0])];
    size_t n = 0;
    double best_occupancy = 0.0;
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        for (size_t j = 0; j < sizeof heights / sizeof heights[0]; j++) {
            conv2d_launch c = *p;
            c.tile_width = widths[i];
            c.tile_height = heights[j];
            conv2d_launch_info launch;  /* one plan a candidate */
            conv2d_describe(version, &c, &launch);
            if (version > GF_CONV_TILED && !launch.supported)
                continue;
            if (launch.threads < 64 || fits_with(d, version, &c, &launch) < 0)
                continue;
            occupancy_info info;
            if (gf_tile_occupancy(d, &launch, &info) < 0)
                return -1;
            if (info.blocks_per_sm == 0)
                continue;
            cand[n++] = (tile_candidate){c.tile_width, c.tile_height, launch.threads, launch.rank,
                                         info.occupancy, halo_overhead(&c)};
        }
    if (n == 0) {
        gf_set_error("no tile of the %s kernel fits a %dx%d mask on %s",
                     conv2d_version_name(version), p->mask_width, p->mask_height, d->name);
        return -2;
    }
    /* the best occupancy among the tiles of the most specific path */
    int rank = cand[0].rank;
    for (size_t k = 1; k < n; k++)
        rank = cand[k].rank < rank ? cand[k].rank : rank;
    for (size_t k = 0; k < n; k++)
        if (cand[k].rank == rank)
            best_occupancy = fmax(best_occupancy, cand[k].occupancy);
    size_t best = 0;
    for (size_t k = 1; k < n; k++)
        if (tile_beats(version, &cand[k], &cand[best], best_occupancy))
            best = k;
    p->tile_width = cand[best].width;
    p->tile_height = cand[best].height;
    return prefer_measured_tile(d, version, p);
}
