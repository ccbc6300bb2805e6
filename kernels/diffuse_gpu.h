/* diffuse_gpu.h - plain C entry points of diffuse_gpu.cu: --diffuse on the GPU in
 * float32 planes. Launchers enqueue on 'stream', check the launch and never
 * synchronise. */
#ifndef GF_DIFFUSE_KERNELS_H
#define GF_DIFFUSE_KERNELS_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ladder: one launch an iteration from global memory; one launch an
 * iteration on a shared tile with a 1-pixel halo; k iterations a launch on
 * a shared tile with a k-pixel halo; k iterations a launch streamed down
 * strips in registers, a warp a strip. */
enum { DIFFUSE_GLOBAL = 1, DIFFUSE_SHARED = 2, DIFFUSE_TEMPORAL = 3, DIFFUSE_STREAM = 4 };
#define DIFFUSE_MAX_STEPS 8   /* k of the temporal and stream kernels: 1..8 */
#define DIFFUSE_THREADS_X 32  /* every tiled launch: 32 x 8 threads */
#define DIFFUSE_THREADS_Y 8
#define DIFFUSE_STREAM_WARPS 2  /* a stream block: 2 warps, each its own strip and chunk */

typedef struct {
    int width, height, planes;  /* planes: the filtered channels, one plane each */
    int border;                 /* gf_border */
    int kind;                   /* gf_diffuse_kind */
    float step, inv_k;          /* the time step; 1 / K (Perona-Malik) */
} diffuse_params;

/* planes[c * width * height + i] = channel c of pixel i, for c < p->planes
 * (image: depth 8 or 16 bits, 'channels' interleaved). */
cudaError_t diffuse_load(const void *image, int depth, int channels, const diffuse_params *p,
                         float *planes, cudaStream_t stream);
/* The rounding (half to even, clamped to the depth's range) of each plane
 * into its channel of image, in place; the other channels untouched. */
cudaError_t diffuse_store(const float *planes, void *image, int depth, int channels,
                          const diffuse_params *p, cudaStream_t stream);

/* One iteration, cur to next (DIFFUSE_GLOBAL). */
cudaError_t diffuse_step_global(const diffuse_params *p, const float *cur, float *next,
                                cudaStream_t stream);
/* k iterations (1..DIFFUSE_MAX_STEPS), cur to next, on tiles of tile_w x
 * tile_h outputs; DIFFUSE_SHARED is k = 1. */
cudaError_t diffuse_steps_tiled(const diffuse_params *p, const float *cur, float *next, int k,
                                int tile_w, int tile_h, cudaStream_t stream);
/* Shared bytes of a tiled launch; its blocks per SM from the occupancy API. */
size_t diffuse_shared_bytes(int k, int tile_w, int tile_h);
cudaError_t diffuse_blocks_per_sm(int k, int tile_w, int tile_h, int *blocks);

/* A stream launch's work: one warp an item, an item a strip's rows of one
 * plane. The interior strips (all but the first and last) take long_n
 * chunks of long_h rows from row long_y on, and chunks of chunk_h rows
 * above and below them; the first and last strips chunks of chunk_h rows
 * throughout. Items run longest first (the long chunks fill about one
 * wave, the short ones then even out how the warps finish); long_n = 0:
 * every chunk is chunk_h rows. */
typedef struct {
    int strips, planes, chunk_h;
    int long_n, long_h, long_y;
    int items;
} diffuse_stream_layout;
/* The warps one wave of the stream kernel holds on the current device:
 * blocks per SM (the occupancy API) x DIFFUSE_STREAM_WARPS x SMs.
 * GPUFILTER_DIFFUSE_WAVE=N (for the tests) sets it, so that small images
 * take long chunks too. */
cudaError_t diffuse_stream_wave(int kind, int k, int strip_w, long long *warps);
/* The layout of a launch on a device whose wave holds 'resident' warps;
 * -1 when it has more items than an int holds. */
int diffuse_stream_layout_for(int width, int height, int planes, int k, int strip_w, int chunk_h,
                              long long resident, diffuse_stream_layout *layout);
/* k iterations (1..DIFFUSE_MAX_STEPS), cur to next, streamed: a warp a
 * strip of strip_w columns (64 or 128: 2 or 4 a lane; strip_w - 2k of them
 * written) down chunks of rows as diffuse_stream_layout_for lays them out
 * (chunk_h: the short chunks' height). */
cudaError_t diffuse_steps_stream(const diffuse_params *p, const float *cur, float *next, int k,
                                 int strip_w, int chunk_h, cudaStream_t stream);
/* The strips across 'width'; blocks per SM of the stream kernel of a
 * kind (gf_diffuse_kind) from the occupancy API. */
int diffuse_stream_strips(int width, int k, int strip_w);
cudaError_t diffuse_stream_blocks_per_sm(int kind, int k, int strip_w, int *blocks);

/* 'iterations' iterations from planes[0] with 'version' (k a launch for the
 * temporal and stream ones, the remainder in a last launch; tile_w x tile_h:
 * the tile, or for stream the strip width and chunk height); *result: the
 * index of the plane buffer that holds the result. */
cudaError_t diffuse_run(const diffuse_params *p, float *planes[2], int iterations, int version,
                        int k, int tile_w, int tile_h, int *result, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
