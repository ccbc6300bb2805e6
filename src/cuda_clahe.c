/* cuda_clahe.c - the GPU backend's CLAHE (kernels/clahe_gpu.cu), in place on
 * the current image: per plane (the luma of RGB, or each colour channel)
 * the tiles' histograms, their tables and the interpolation, read from the
 * image itself, the scratch in stream-ordered allocations. The grid's
 * numbers come from clahe.c (gf_clahe_grid_of), so both paths compute the
 * same bytes.
 *
 * The host path (on_host with gf_clahe_image) runs instead in strip mode
 * (the image is in host memory), where the histograms and cells would pass
 * kMaxTableBytes (16 bits, many tiles: 65536 bins a tile, 512 KiB a cell)
 * or where the scratch cannot be allocated. */
#include "../kernels/clahe_gpu.h"
#include "cuda_backend.h"

/* histograms and cells together; beyond, the host's two tile rows */
static const size_t kMaxTableBytes = (size_t)1 << 30;

typedef struct {
    void *hist, *cells;
} clahe_scratch;

static void free_scratch(const cuda_backend *b, clahe_scratch *s)
{
    if (s->hist)
        cudaFreeAsync(s->hist, b->stream);
    if (s->cells)
        cudaFreeAsync(s->cells, b->stream);
}

/* 0, or -1 (the error cleared) when the device cannot hold it. */
static int alloc_scratch(const cuda_backend *b, const clahe_params *p, clahe_scratch *s)
{
    size_t hist, cells;
    clahe_scratch_bytes(p, &hist, &cells);
    if (hist + cells > kMaxTableBytes)
        return -1;
    if (cudaMallocAsync(&s->hist, hist, b->stream) != cudaSuccess ||
        cudaMallocAsync(&s->cells, cells, b->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        free_scratch(b, s);
        return -1;
    }
    return 0;
}

static void fill_params(const cuda_backend *b, const gf_clahe *how, clahe_params *p)
{
    gf_clahe_grid g;
    gf_clahe_grid_of(how, b->width, b->height, b->depth == 16 ? 65536 : 256, &g);
    *p = (clahe_params){
        .pixels = b->buffer[b->current], .width = b->width, .height = b->height,
        .channels = b->channels, .depth = b->depth, .channel = -1,
        .tiles_x = how->tiles_x, .tiles_y = how->tiles_y,
        .tile_w = g.tile_w, .tile_h = g.tile_h, .clip_limit = g.clip_limit,
        .lut_scale = g.lut_scale, .inv_tw = g.inv_tw, .inv_th = g.inv_th,
    };
}

int gf_cuda_clahe(gf_backend *self, const gf_clahe *how)
{
    cuda_backend *b = (cuda_backend *)self;
    if (b->strips)
        return self->on_host(self, gf_clahe_image, how);
    clahe_params p;
    fill_params(b, how, &p);
    clahe_scratch s = {NULL, NULL};
    if (alloc_scratch(b, &p, &s) < 0)
        return self->on_host(self, gf_clahe_image, how);
    p.hist = s.hist;
    p.cells = s.cells;
    cudaError_t err = cudaSuccess;
    if (b->channels >= 3 && !how->per_channel) {
        err = clahe_run(&p, b->stream);
    } else {
        const int colour = b->channels >= 3 ? 3 : 1;
        for (int c = 0; err == cudaSuccess && c < colour; c++) {
            p.channel = c;
            err = clahe_run(&p, b->stream);
        }
    }
    free_scratch(b, &s);
    CUDA_CHECK(err, "running CLAHE");
    return 0;
}
