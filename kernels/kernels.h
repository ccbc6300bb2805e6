/* kernels.h - plain C entry points of the CUDA kernels (the .cu files in kernels/).
 *
 * Host code includes this header only; it sees no templates and no CUDA
 * syntax. Launchers enqueue on 'stream', check the launch with
 * cudaGetLastError() and return its result; they never synchronise. */
#ifndef GF_KERNELS_H
#define GF_KERNELS_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- conv2d.cu, conv2d_query.cu --------------------------------------------- */

#define CONV2D_VERSIONS 5  /* 0 naive, 1 tiled, 2 blocked, 3 separable, 4 direct (conv2d.cu) */

struct conv2d_mask_facts;

/* One convolution: every matrix of the mask over every channel. */
typedef struct {
    const unsigned char *src;  /* device, width * height * channels, interleaved */
    unsigned char *dst;        /* device, same shape; must not alias src */
    int width, height;
    int channels;              /* 1..4 */
    int channels_filtered;     /* channels >= this one are copied (alpha) */
    int border;                /* gf_border */
    int mask_width, mask_height;
    int mask_count;            /* 1..GF_MASK_MAX_MATRICES */
    int combine;               /* gf_combine */
    const float *weights;      /* device, mask_count * mask_width * mask_height, row-major */
    float scale[4];
    float offset[4];
    /* The tile, in output pixels:
     *   versions 0, 1: the block shape, one thread per output pixel.
     *   version 2: the output pixels one block computes per step (a block
     *     walks down a column of such tiles). Each thread computes P x Q
     *     pixels (P rows, Q columns; P and Q depend on the mask, see
     *     conv2d_block_threads): tile_width must be a multiple of 8, and
     *     tile_height a multiple of 4; at most 256 threads per block.
     *   version 3: the same, with P = Q = 8: tile_width and tile_height
     *     multiples of 8, tile_width * tile_height / 8 <= 256 threads.
     *   version 4: one tile per block (or several, walked down), each
     *     thread R rows x Q columns, R and Q set by the arithmetic path the
     *     plan picks for the mask (kernels/conv2d_paths.cu's table, printed
     *     by `gpufilter --list-paths`: which masks, sizes and layouts each
     *     path runs) and by the channels; the tile must be a multiple of
     *     both, at most 256 threads per block (the row streams: up to
     *     1024; the tensor cores: 256 threads over 16 to 256 bytes by 16 to
     *     128 rows; the prefix sums: whole warps, each a column of output
     *     pixels). A tile a path cannot run gets the next path that can.
     * conv2d_supports() returns 0 for a tile the version cannot run. */
    int tile_width, tile_height;
    /* separable versions: the one matrix is column[y] * row[x] */
    const float *row_weights;     /* device, mask_width floats */
    const float *column_weights;  /* device, mask_height floats */
    void *scratch;                /* device, conv2d_scratch_bytes(); NULL if that is 0 */
    /* Optional host copies of the weights (same layouts as the device arrays
     * above; NULL when absent), read by the launcher of versions 2, 3 and 4 only,
     * never kept after conv2d_gpu() returns (what a plan reads of them is
     * in 'facts' below). With them the
     * weights travel by value in the kernel parameters (the constant bank:
     * free FFMA operands),
     * scales that are powers of two are folded into the weights, and version 3
     * derives integer factors from integer 2-D weights (exact sums, so its
     * output equals version 1's). Without them versions 2 and 3 read the
     * device arrays into shared memory: correct, but slower. */
    const float *host_weights;         /* mask_count * mask_width * mask_height */
    const float *host_row_weights;     /* mask_width */
    const float *host_column_weights;  /* mask_height */
    /* What the planner reads of host_weights (conv2d_mask_facts_make), for
     * a caller that plans one mask many times (the tile rule's candidates,
     * then the launch): made once after the weights are set, remade when
     * they change. NULL: each plan makes its own. */
    const struct conv2d_mask_facts *facts;
} conv2d_launch;

/* What the planner asks of a mask's host weights, each a scan of every
 * weight (at 31x31 ~10 us of host time): which integer paths they suit,
 * their factors, whether scales fold into them and outputs stay in range. */
typedef struct conv2d_mask_facts {
    const float *host_weights;  /* the launch's, for which they were made */
    int mask_count, mask_width, mask_height;
    int short_weights;  /* 16-bit integers, every matrix */
    int byte_weights;   /* -128..127, every matrix */
    int factors;        /* matrix 0 is column[] times row[], integers */
    int prescalable;    /* every scale folds into its weights exactly */
    int in_range;       /* matrix 0's outputs stay in 0..255 */
    int div_range[4];   /* per matrix: its sums may be divided by the scale */
    float row[31], column[31];
} conv2d_mask_facts;

/* f made for p's host weights, scales and mask size (p->host_weights set). */
void conv2d_mask_facts_make(const conv2d_launch *p, conv2d_mask_facts *f);

/* Short name of a version ("naive", "tiled", "blocked", "separable",
 * "direct"), NULL past the ladder. */
const char *conv2d_version_name(int version);
/* Whether a version can run this launch: 1 or 0. Version 2 needs a tile it
 * can use (see tile_width above) and the weights (device, or host copies);
 * version 3 also needs mask_count == 1 and the factors (row_weights and
 * column_weights, or their host copies, or integer host_weights it can
 * factor itself); version 4 needs host_weights and a mask it runs (see
 * tile_width above). */
int conv2d_supports(int version, const conv2d_launch *p);
/* Which integer path version 4 runs this launch on (conv2d_paths.cu's
 * table): CONV2D_DP4A for weights of -128..127, CONV2D_DP2A for 16-bit
 * weights, CONV2D_SEPARABLE_INTEGER for an integer column times a row
 * (every separable, box, tensor-core and row-stream path),
 * CONV2D_GRADIENT_LANES for the RGBA gradient pairs; 0 for its float path
 * or a launch it cannot run. */
enum { CONV2D_DP4A = 1, CONV2D_DP2A = 2, CONV2D_SEPARABLE_INTEGER = 3, CONV2D_GRADIENT_LANES = 4 };
int conv2d_direct_integer(const conv2d_launch *p);
/* The arithmetic path the direct version runs this launch on, for -v
 * (conv2d_paths4's name, "no clamp" added for the kernels of masks whose
 * outputs stay in 0..255) into name; 0 and "" when it cannot run it. */
int conv2d_direct_path(const conv2d_launch *p, char *name, size_t size);
/* Path i of the direct version for --list-paths: 0 the gradient pairs in
 * lanes, then the others in the order it tries them; sizes[4 (C - 1) +
 * (CF - 1)]: bit m for the m x m masks it has kernels for on C channels
 * of which the first CF are filtered. 0 past the last. Needs no GPU. */
typedef struct {
    const char *name, *weights;
    unsigned sizes[16];
} conv2d_path_info;
int conv2d_path_describe(int i, conv2d_path_info *info);
/* Where the arithmetic path of this launch (a tile of version 4) comes in
 * the order the direct version tries them, 0 the first (the gradient
 * pairs' lanes) and the most specific; 0 for the other versions. A tile
 * that cannot run a path (the prefix sums need blocks of whole warps) gets
 * a later one, so the automatic tile keeps to the lowest rank. */
int conv2d_path_rank(int version, const conv2d_launch *p);
/* A tile measured faster than the automatic rule's for the path this
 * launch runs on (version 4's RGBA row streams: 512x8; RGBA on the tensor
 * cores: the tallest tile of the launch's width, up to 128 rows, that holds
 * two blocks an SM): 1 and the tile, which runs the same kernel, or 0 where
 * the rule stands. The caller checks that the tile launches on its device. */
int conv2d_preferred_tile(int version, const conv2d_launch *p, int *width, int *height);
/* Device scratch a launch of this version needs (intermediate of a
 * two-pass version), 0 for none (every version today). */
size_t conv2d_scratch_bytes(int version, const conv2d_launch *p);

/* What one plan says of a launch of this version at its tile, in one
 * call (the tile rule asks this of every candidate): the answers of
 * conv2d_supports(), conv2d_path_rank(), conv2d_block_threads(),
 * conv2d_shared_bytes() and conv2d_kernel_for(), which read them from
 * here. */
typedef struct {
    int supported;
    int rank;
    int threads;
    size_t shared;
    const void *entry;
} conv2d_launch_info;
void conv2d_describe(int version, const conv2d_launch *p, conv2d_launch_info *info);

/* Dynamic shared memory a launch of this version needs (0 for naive; the
 * direct version's is each thread's ring of rows): exact, for tile_width x
 * tile_height and this mask and channel count. */
size_t conv2d_shared_bytes(int version, const conv2d_launch *p);
/* Threads per block of a launch of this version with this tile:
 * tile_width * tile_height for versions 0 and 1, (tile_width / Q) *
 * (tile_height / P) for versions 2 and 4 (version 4: P = 8), tile_width *
 * tile_height / 8 for version 3; 0 when conv2d_supports() is 0. */
int conv2d_block_threads(int version, const conv2d_launch *p);
/* The __global__ function a launch would use, for the occupancy API.
 * Versions 2 to 4 have one instantiation per mask size class, matrix count
 * and channel layout: conv2d_kernel_for() names the one this launch runs;
 * conv2d_kernel_entry() the generic one for 'channels' (all channels
 * filtered, one matrix, weights as parameters; version 4: its 3x3 one). */
const void *conv2d_kernel_entry(int version, int channels);
const void *conv2d_kernel_for(int version, const conv2d_launch *p);
/* Lets a kernel of this file launch with 'shared' bytes of dynamic shared
 * memory: above 48 KB, its limit is raised to the most a block of the
 * current device may opt in to (always that value, so that host threads
 * planning and launching at once never lower it under another's launch). */
cudaError_t conv2d_allow_shared(const void *entry, size_t shared);
/* Tests only: make every device query of the planner fail, so that each
 * plan takes its device-independent choice (one tile a block). */
void conv2d_fail_queries(int fail);
/* What the plan of one launch says, for -v: the answers of conv2d_describe;
 * the grid (0 x 0 when it cannot run) and the tiles each of its blocks
 * walks down (steps): 1 for versions 0 and 1; versions 2 and 3 walk ~256
 * rows; version 4 walks strips (gray, and RGBA masks from 5x5 on, rows
 * aligned for its fast path) where one tile per block would run past the
 * blocks the device holds at once, and then its edge blocks, the first rows
 * of the grid, take the image's edge columns a tile at a time; its prefix
 * sums of box masks count groups of 8 rows that each warp walks down,
 * whatever the tile; and for the direct version conv2d_direct_path's name
 * (else ""). */
typedef struct {
    conv2d_launch_info info;
    unsigned grid_x, grid_y;
    int steps;
    char path[96];
} conv2d_launch_report;
/* The report of a launch (all 0 when the version cannot run it). */
void conv2d_report(int version, const conv2d_launch *p, conv2d_launch_report *report);
/* Launch version 0..CONV2D_VERSIONS-1; where report is not NULL, it is
 * filled from the plan the launch runs (as conv2d_report would). */
cudaError_t conv2d_gpu(int version, const conv2d_launch *p, cudaStream_t stream, conv2d_launch_report *report);

/* ---- histogram.cu ---------------------------------------------------------- */

#define HISTOGRAM_VERSIONS 3  /* 0 global atomics, 1 shared-memory privatized, 2 vector */

/* 256-bin histograms of every channel (hist[c * 256 + v]), or with luma set
 * one histogram of the BT.601 luma of channels 0..2. hist is device memory
 * of (luma ? 1 : channels) * 256 counters; the launcher zeroes it first. */
cudaError_t histogram_gpu(int version, const unsigned char *src, size_t pixels, int channels,
                          int luma, unsigned long long *hist, cudaStream_t stream);

/* ---- reduce.cu ------------------------------------------------------------- */

#define REDUCE_VERSIONS 5  /* 1 one pass (there is no 0), 2 from the histogram, 3 DP4A,
                              4 DP4A over block tiles, one wave, no memset */

/* min, max, sum and sum of squares of every channel. */
typedef struct {
    unsigned int min[4], max[4];
    unsigned long long sum[4], sum_squares[4];
    unsigned long long hist[4 * 256];  /* version 2's scratch: the histograms */
    /* Version 4's accumulators: 255 - min, max, the sums and the count of
     * blocks done. Zero between launches: each launch's last block reads
     * them into the fields above and zeroes them again, so they must be
     * zero once, when the result is allocated (cudaMemset the whole). */
    unsigned int acc_lo_inverted[4], acc_hi[4];
    unsigned long long acc_sum[4], acc_squares[4];
    unsigned int blocks_done;
} reduce_result;

/* Version 1 to 4 (see reduce.cu); out is device memory, zeroed once when it
 * was allocated (version 4's accumulators). */
cudaError_t reduce_gpu(int version, const unsigned char *src, size_t pixels, int channels,
                       reduce_result *out, cudaStream_t stream);

/* ---- scan.cu --------------------------------------------------------------- */

#define SCAN_VERSIONS 2  /* 0 one thread per histogram, 1 work-efficient (Blelloch) */

/* Inclusive prefix sums of 'histograms' consecutive 256-bin histograms. */
cudaError_t scan_gpu(int version, const unsigned long long *in, unsigned long long *out,
                     int histograms, cudaStream_t stream);

/* ---- lut.cu ---------------------------------------------------------------- */

/* Build look-up tables on the device (256 bytes each), from histograms and
 * their prefix sums, from percentiles, or from a reduction. */
cudaError_t lut_equalize_gpu(const unsigned long long *hist, const unsigned long long *cdf,
                             int histograms, unsigned char *lut, cudaStream_t stream);
cudaError_t lut_normalize_gpu(const unsigned long long *cdf, double black, double white,
                              unsigned char *lut, cudaStream_t stream);
cudaError_t lut_auto_level_gpu(const reduce_result *range, int colour, unsigned char *lut,
                               cudaStream_t stream);

/* Apply LUTs to channels 0..colour-1 in place; the others are untouched.
 * per_channel: channel c uses lut + 256 * c, otherwise all use lut. */
cudaError_t lut_apply_gpu(unsigned char *pixels, size_t count, int channels, int colour,
                          const unsigned char *lut, int per_channel, cudaStream_t stream);
/* Map the luma of RGB pixels through one LUT, keeping their chroma. */
cudaError_t lut_apply_luma_gpu(unsigned char *pixels, size_t count, int channels,
                               const unsigned char *lut, cudaStream_t stream);

/* Blocks for a grid-stride loop over 'items': enough to fill the device. */
int gf_grid_for(size_t items, int threads);

#ifdef __cplusplus
}
#endif

#endif
