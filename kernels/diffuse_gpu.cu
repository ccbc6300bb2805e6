/* diffuse_gpu.cu - --diffuse on the GPU (src/cuda_diffuse.c drives it): the
 * reference's explicit 4-neighbour scheme (src/diffuse.c) on float32
 * planes, one a filtered channel, in two buffers used in turn.
 *
 * The ladder:
 *   global    (v1) one launch an iteration, one thread a pixel, the four
 *             neighbours read from global memory through the border mode.
 *   shared    (v2) one launch an iteration on a shared tile with a 1-pixel
 *             halo: the tiled kernel below at k = 1.
 *   temporal  (v3) k iterations a launch (k = 1..8, templated): a block
 *             loads its tile with a k-pixel halo, runs k iterations in
 *             shared memory, the region it computes shrinking by one pixel
 *             a side each iteration, and writes the inner tile. Global
 *             traffic per iteration: ((T+2k)^2 + T^2) / k floats a T^2
 *             tile instead of 2 T^2; the price: the halo's redundant work.
 *
 * The border rule for tiles (exact, every mode, any k, tiles of 2x2 and
 * more). wrap: the tile and its halo load from wrapped coordinates and are
 * a piece of the torus, so every cell updates from its tile neighbours.
 * Other modes: a cell outside the image is never updated; an image cell's
 * neighbour outside the image reads 0 (constant), or the pixel the border
 * mode maps it to (nearest, reflect, mirror), which is the cell itself or
 * the one next to it across the row or column: inside the tile and inside
 * the region computed the iteration before, so it holds the current state
 * exactly as the reference reads it. Blocks whose tile and halo lie inside
 * the image (and every block in wrap) take the path without these checks.
 * By induction every cell computed at iteration s is the reference's
 * state (in float): its neighbours were computed at s - 1.
 *
 * Arithmetic: one device function for every version, rounded op by op
 * (__fadd_rn, __fmul_rn, one __fmaf_rn, never contracted otherwise), so
 * every version gives the same floats bit for bit: the flux g(|d|) d with
 * d = u_n - u, g = expf(-(d/K)^2) (the accurate expf, 2 ulp) or
 * 1 / (1 + (d/K)^2), d/K as d * (1/K); u' = fma(step, ((N + S) + W) + E, u),
 * the reference's order. The state is float32, so the result may differ
 * from the float64 reference by one where it lies near a half
 * (docs/diffuse.md gives the bound). */
#include <stdint.h>

#include "diffuse_gpu.h"

extern "C" {
#include "../src/border.h"
#include "../src/diffuse.h"
}

namespace {

constexpr int kTx = DIFFUSE_THREADS_X, kTy = DIFFUSE_THREADS_Y;

__device__ __forceinline__ float flux(const diffuse_params &p, float d)
{
    if (p.kind == GF_DIFFUSE_HEAT)
        return d;
    const float r = __fmul_rn(d, p.inv_k), r2 = __fmul_rn(r, r);
    if (p.kind == GF_DIFFUSE_PM_EXP)
        return __fmul_rn(expf(-r2), d);
    return __fdiv_rn(d, __fadd_rn(1.0f, r2));
}

__device__ __forceinline__ float update(const diffuse_params &p, float u, float n, float s, float w,
                                        float e)
{
    const float ns = __fadd_rn(flux(p, __fsub_rn(n, u)), flux(p, __fsub_rn(s, u)));
    const float total = __fadd_rn(__fadd_rn(ns, flux(p, __fsub_rn(w, u))), flux(p, __fsub_rn(e, u)));
    return __fmaf_rn(p.step, total, u);
}

__device__ __forceinline__ size_t plane_offset(const diffuse_params &p)
{
    return (size_t)p.width * (size_t)p.height * blockIdx.y;
}

/* v1: blocks of 32 x 8 pixels, numbered along grid.x; grid.y: the plane. */
__global__ void step_global(diffuse_params p, const float *cur, float *next, int tiles_x)
{
    const int x = (int)(blockIdx.x % tiles_x) * kTx + threadIdx.x;
    const int y = (int)(blockIdx.x / tiles_x) * kTy + threadIdx.y;
    if (x >= p.width || y >= p.height)
        return;
    const float *u = cur + plane_offset(p);
    const gf_border border = (gf_border)p.border;
    auto at = [&](int xx, int yy) -> float {
        const int bx = gf_border_index(xx, p.width, border), by = gf_border_index(yy, p.height, border);
        return bx < 0 || by < 0 ? 0.0f : u[(size_t)by * p.width + bx];
    };
    const size_t i = (size_t)y * p.width + x;
    next[plane_offset(p) + i] = update(p, u[i], at(x, y - 1), at(x, y + 1), at(x - 1, y), at(x + 1, y));
}

/* v2 (K = 1) and v3: see the opening comment. Tile cell (0, 0) is image
 * pixel (ox, oy); the tile is lw x lh with the halo. */
template <int K>
__global__ void __launch_bounds__(kTx * kTy)
    steps_tiled(diffuse_params p, const float *cur, float *next, int tile_w, int tile_h, int tiles_x)
{
    extern __shared__ float shared[];
    const int lw = tile_w + 2 * K, lh = tile_h + 2 * K;
    float *a = shared, *b = shared + lw * lh;
    const int x0 = (int)(blockIdx.x % tiles_x) * tile_w, y0 = (int)(blockIdx.x / tiles_x) * tile_h;
    const int ox = x0 - K, oy = y0 - K, w = p.width, h = p.height;
    const gf_border border = (gf_border)p.border;
    const bool wrap = border == GF_BORDER_WRAP;
    const bool fast = wrap || (ox >= 0 && oy >= 0 && ox + lw <= w && oy + lh <= h);
    const float *u = cur + plane_offset(p);

    for (int ty = threadIdx.y; ty < lh; ty += kTy) {
        const int gy = oy + ty, my = gf_border_index(gy, h, border);
        for (int tx = threadIdx.x; tx < lw; tx += kTx) {
            const int gx = ox + tx;
            const bool load = wrap || (gx >= 0 && gx < w && gy >= 0 && gy < h);
            a[ty * lw + tx] = load ? u[(size_t)my * w + gf_border_index(gx, w, border)] : 0.0f;
        }
    }
    __syncthreads();

    /* a neighbour (gx, gy) of an image cell, at tile cell (tx, ty): off the
     * image, the constant's 0 or the mapped pixel, one cell away at most */
    auto near = [&](const float *t, int tx, int ty, int gx, int gy) -> float {
        if (gx >= 0 && gx < w && gy >= 0 && gy < h)
            return t[ty * lw + tx];
        const int mx = gf_border_index(gx, w, border), my = gf_border_index(gy, h, border);
        return mx < 0 || my < 0 ? 0.0f : t[(my - oy) * lw + (mx - ox)];
    };
#pragma unroll 1
    for (int s = 1; s <= K; s++) {
        for (int ty = s + threadIdx.y; ty < lh - s; ty += kTy)
            for (int tx = s + threadIdx.x; tx < lw - s; tx += kTx) {
                const int i = ty * lw + tx;
                if (fast) {
                    b[i] = update(p, a[i], a[i - lw], a[i + lw], a[i - 1], a[i + 1]);
                    continue;
                }
                const int gx = ox + tx, gy = oy + ty;
                if (gx < 0 || gx >= w || gy < 0 || gy >= h)
                    continue;
                b[i] = update(p, a[i], near(a, tx, ty - 1, gx, gy - 1), near(a, tx, ty + 1, gx, gy + 1),
                              near(a, tx - 1, ty, gx - 1, gy), near(a, tx + 1, ty, gx + 1, gy));
            }
        __syncthreads();
        float *t = a;
        a = b;
        b = t;
    }

    float *out = next + plane_offset(p);
    for (int ty = threadIdx.y; ty < tile_h; ty += kTy) {
        const int gy = y0 + ty;
        if (gy >= h)
            break;
        for (int tx = threadIdx.x; tx < tile_w && x0 + tx < w; tx += kTx)
            out[(size_t)gy * w + x0 + tx] = a[(ty + K) * lw + tx + K];
    }
}

template <typename T>
__global__ void load_planes(const T *image, int channels, size_t n, int planes, float *out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        for (int c = 0; c < planes; c++)
            out[(size_t)c * n + i] = (float)image[i * channels + c];
}

template <typename T>
__global__ void store_planes(const float *in, int channels, size_t n, int planes, float top, T *image)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        for (int c = 0; c < planes; c++) {
            const float v = rintf(in[(size_t)c * n + i]);  /* half to even */
            image[i * channels + c] = (T)(v > 0.0f ? (v < top ? v : top) : 0.0f);
        }
}

unsigned grid_for(size_t n)
{
    const size_t blocks = (n + 255) / 256;
    return (unsigned)(blocks < 65536 ? (blocks ? blocks : 1) : 65536);
}

int tiles(int n, int t)
{
    return (n + t - 1) / t;
}

template <int K>
const void *tiled_kernel()
{
    return (const void *)steps_tiled<K>;
}

const void *tiled_for(int k)
{
    switch (k) {
    case 1: return tiled_kernel<1>();
    case 2: return tiled_kernel<2>();
    case 3: return tiled_kernel<3>();
    case 4: return tiled_kernel<4>();
    case 5: return tiled_kernel<5>();
    case 6: return tiled_kernel<6>();
    case 7: return tiled_kernel<7>();
    case 8: return tiled_kernel<8>();
    default: return nullptr;
    }
}

/* Shared memory past 48 KiB is opt-in, per kernel. */
cudaError_t allow_shared(const void *kernel, size_t bytes)
{
    if (bytes <= 48 * 1024)
        return cudaSuccess;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

}  // namespace

extern "C" {

cudaError_t diffuse_load(const void *image, int depth, int channels, const diffuse_params *p,
                         float *planes, cudaStream_t stream)
{
    const size_t n = (size_t)p->width * (size_t)p->height;
    if (depth == 16)
        load_planes<<<grid_for(n), 256, 0, stream>>>((const uint16_t *)image, channels, n, p->planes, planes);
    else
        load_planes<<<grid_for(n), 256, 0, stream>>>((const uint8_t *)image, channels, n, p->planes, planes);
    return cudaGetLastError();
}

cudaError_t diffuse_store(const float *planes, void *image, int depth, int channels,
                          const diffuse_params *p, cudaStream_t stream)
{
    const size_t n = (size_t)p->width * (size_t)p->height;
    if (depth == 16)
        store_planes<<<grid_for(n), 256, 0, stream>>>(planes, channels, n, p->planes, 65535.0f,
                                                      (uint16_t *)image);
    else
        store_planes<<<grid_for(n), 256, 0, stream>>>(planes, channels, n, p->planes, 255.0f,
                                                      (uint8_t *)image);
    return cudaGetLastError();
}

cudaError_t diffuse_step_global(const diffuse_params *p, const float *cur, float *next,
                                cudaStream_t stream)
{
    const int tx = tiles(p->width, kTx);
    const dim3 grid((unsigned)tx * (unsigned)tiles(p->height, kTy), (unsigned)p->planes);
    step_global<<<grid, dim3(kTx, kTy), 0, stream>>>(*p, cur, next, tx);
    return cudaGetLastError();
}

size_t diffuse_shared_bytes(int k, int tile_w, int tile_h)
{
    return 2 * sizeof(float) * (size_t)(tile_w + 2 * k) * (size_t)(tile_h + 2 * k);
}

cudaError_t diffuse_blocks_per_sm(int k, int tile_w, int tile_h, int *blocks)
{
    const void *kernel = tiled_for(k);
    const size_t bytes = diffuse_shared_bytes(k, tile_w, tile_h);
    *blocks = 0;
    if (!kernel)
        return cudaErrorInvalidValue;
    cudaError_t err = allow_shared(kernel, bytes);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();  /* over the device's opt-in limit: it cannot launch */
        return cudaSuccess;
    }
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, kTx * kTy, bytes);
}

cudaError_t diffuse_steps_tiled(const diffuse_params *p, const float *cur, float *next, int k,
                                int tile_w, int tile_h, cudaStream_t stream)
{
    const void *kernel = tiled_for(k);
    if (!kernel || tile_w < 2 || tile_h < 2)
        return cudaErrorInvalidValue;
    const size_t bytes = diffuse_shared_bytes(k, tile_w, tile_h);
    cudaError_t err = allow_shared(kernel, bytes);
    if (err != cudaSuccess)
        return err;
    const int tx = tiles(p->width, tile_w);
    const dim3 grid((unsigned)tx * (unsigned)tiles(p->height, tile_h), (unsigned)p->planes);
    const dim3 block(kTx, kTy);
    switch (k) {
    case 1: steps_tiled<1><<<grid, block, bytes, stream>>>(*p, cur, next, tile_w, tile_h, tx); break;
    case 2: steps_tiled<2><<<grid, block, bytes, stream>>>(*p, cur, next, tile_w, tile_h, tx); break;
    case 3: steps_tiled<3><<<grid, block, bytes, stream>>>(*p, cur, next, tile_w, tile_h, tx); break;
    case 4: steps_tiled<4><<<grid, block, bytes, stream>>>(*p, cur, next, tile_w, tile_h, tx); break;
    case 5: steps_tiled<5><<<grid, block, bytes, stream>>>(*p, cur, next, tile_w, tile_h, tx); break;
    case 6: steps_tiled<6><<<grid, block, bytes, stream>>>(*p, cur, next, tile_w, tile_h, tx); break;
    case 7: steps_tiled<7><<<grid, block, bytes, stream>>>(*p, cur, next, tile_w, tile_h, tx); break;
    default: steps_tiled<8><<<grid, block, bytes, stream>>>(*p, cur, next, tile_w, tile_h, tx); break;
    }
    return cudaGetLastError();
}

cudaError_t diffuse_run(const diffuse_params *p, float *planes[2], int iterations, int version,
                        int k, int tile_w, int tile_h, int *result, cudaStream_t stream)
{
    int cur = 0;
    for (int done = 0; done < iterations;) {
        const int steps = version == DIFFUSE_TEMPORAL ? (iterations - done < k ? iterations - done : k) : 1;
        const cudaError_t err =
            version == DIFFUSE_GLOBAL
                ? diffuse_step_global(p, planes[cur], planes[!cur], stream)
                : diffuse_steps_tiled(p, planes[cur], planes[!cur], steps, tile_w, tile_h, stream);
        if (err != cudaSuccess)
            return err;
        cur = !cur;
        done += steps;
    }
    *result = cur;
    return cudaSuccess;
}

}  /* extern "C" */
