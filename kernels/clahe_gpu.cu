/* clahe_gpu.cu - OpenCV's CLAHE (src/clahe.c, the host's, is the reference) on
 * the device, in four launches over one plane:
 *   plane      the channel's samples, or gf_luma of RGB, as uint16_t.
 *   histograms each tile of the padded image (BORDER_REFLECT_101 read
 *              through reflect_101, as clahe.c's index maps) split into
 *              row slices, one block a slice; 256 bins counted in shared
 *              memory then added to the tile's, 65536 bins (256 KiB, more
 *              than a block's shared memory) in global memory with
 *              warp-aggregated atomics.
 *   luts       one block a tile: clip and redistribute, inclusive CDF
 *              (a block scan) and the table, in clahe.c's integers and its
 *              one float multiply, rounded half to even.
 *   interpolate one thread a pixel: the bilinear blend of its four tiles'
 *              tables in clahe.c's float operation order, then the channel
 *              or, for the luma, tone.h's YCrCb round trip with the new Y.
 * Every float operation whose rounding matters is an _rn intrinsic: nvcc
 * contracts a * b + c into FMA by default, clahe.c never does. */
#include <stdint.h>

#include "clahe_gpu.h"

extern "C" {
#include "../src/tone.h"
}

namespace {

constexpr int kSlicePixels = 16384;  /* a histogram block's share of a tile */
constexpr int kHistThreads = 256;

/* OpenCV's borderInterpolate for BORDER_REFLECT_101, p >= 0 (clahe.c's). */
__device__ __forceinline__ int reflect_101(int p, int len)
{
    if (len == 1)
        return 0;
    while (p >= len || p < 0)
        p = p < 0 ? -p : 2 * (len - 1) - p;
    return p;
}

__device__ __forceinline__ int saturate(float v, int max)
{
    const int r = __float2int_rn(v);  /* lrintf: half to even */
    return r < 0 ? 0 : r > max ? max : r;
}

template <typename T>
__global__ void plane_kernel(const T *px, size_t pixels, int channels, int channel, uint16_t *plane)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < pixels;
         i += (size_t)gridDim.x * blockDim.x) {
        const T *p = px + i * channels;
        plane[i] = (uint16_t)(channel >= 0 ? p[channel] : gf_luma(p[0], p[1], p[2]));
    }
}

/* Block (tile, slice): rows [slice * rows, ...) of the tile. The loop's
 * trip count is the same for every thread, so whole warps meet at
 * __match_any_sync. */
template <int BINS>
__global__ void hist_kernel(const uint16_t *plane, int width, int height, int tiles_x, int tile_w,
                            int tile_h, int slice_rows, int *hist)
{
    __shared__ int local[BINS == 256 ? 256 : 1];
    const int tile = blockIdx.x, tx = tile % tiles_x, ty = tile / tiles_x;
    const int r0 = blockIdx.y * slice_rows;
    const int rows = min(slice_rows, tile_h - r0);
    int *out = hist + (size_t)tile * BINS;
    if (BINS == 256) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x)
            local[b] = 0;
        __syncthreads();
    }
    const int n = rows > 0 ? rows * tile_w : 0;
    for (int base = 0; base < n; base += blockDim.x) {
        const int i = base + threadIdx.x;
        int v = -1;
        if (i < n) {
            const int r = i / tile_w, c = i - r * tile_w;
            const int y = reflect_101(ty * tile_h + r0 + r, height);
            const int x = reflect_101(tx * tile_w + c, width);
            v = plane[(size_t)y * width + x];
        }
        if (BINS == 256) {
            if (v >= 0)
                atomicAdd(&local[v], 1);
        } else {
            const unsigned same = __match_any_sync(0xffffffffu, v);
            if (v >= 0 && (threadIdx.x & 31) == (unsigned)(__ffs(same) - 1))
                atomicAdd(out + v, __popc(same));
        }
    }
    if (BINS == 256) {
        __syncthreads();
        for (int b = threadIdx.x; b < 256; b += blockDim.x)
            if (local[b] != 0)
                atomicAdd(out + b, local[b]);
    }
}

/* The block's sum of v (every thread gets it). */
template <int THREADS>
__device__ int block_sum(int v, int *scratch)
{
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            scratch[threadIdx.x] += scratch[threadIdx.x + half];
        __syncthreads();
    }
    const int total = scratch[0];
    __syncthreads();
    return total;
}

/* The block's exclusive prefix sum of v (Hillis-Steele). */
template <int THREADS>
__device__ int block_exclusive_scan(int v, int *scratch)
{
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int d = 1; d < THREADS; d *= 2) {
        const int add = (int)threadIdx.x >= d ? scratch[threadIdx.x - d] : 0;
        __syncthreads();
        scratch[threadIdx.x] += add;
        __syncthreads();
    }
    const int inclusive = scratch[threadIdx.x];
    __syncthreads();
    return inclusive - v;
}

/* One block a tile; thread t owns bins [t * K, (t + 1) * K). clahe.c's
 * clip_histogram and tile_lut: the bins that get one of the residual are
 * those i = k * step with k < residual, as its loop visits them. */
template <int BINS, int THREADS>
__global__ void lut_kernel(int *hist, int clip_limit, float lut_scale, uint16_t *luts)
{
    constexpr int K = BINS / THREADS;
    __shared__ int scratch[THREADS];
    int *h = hist + (size_t)blockIdx.x * BINS + threadIdx.x * K;
    uint16_t *lut = luts + (size_t)blockIdx.x * BINS + threadIdx.x * K;
    const int first = threadIdx.x * K;
    if (clip_limit > 0) {
        int clipped = 0;
        for (int k = 0; k < K; k++)
            if (h[k] > clip_limit) {
                clipped += h[k] - clip_limit;
                h[k] = clip_limit;
            }
        clipped = block_sum<THREADS>(clipped, scratch);
        const int batch = clipped / BINS;
        const int residual = clipped - batch * BINS;
        const int step = residual == 0 ? 1 : BINS / residual > 1 ? BINS / residual : 1;
        for (int k = 0; k < K; k++) {
            const int i = first + k;
            h[k] += batch + (residual != 0 && i % step == 0 && i / step < residual ? 1 : 0);
        }
    }
    int mine = 0;
    for (int k = 0; k < K; k++)
        mine += h[k];
    int sum = block_exclusive_scan<THREADS>(mine, scratch);
    for (int k = 0; k < K; k++) {
        sum += h[k];
        lut[k] = (uint16_t)saturate(__fmul_rn(__int2float_rn(sum), lut_scale), BINS - 1);
    }
}

/* One coordinate's tiles and weights: clahe.c's column_weights and the
 * head of clahe_row, operation for operation. */
__device__ __forceinline__ void tile_pair(int at, float inv, int tiles, int *t1, int *t2, float *a,
                                          float *a1)
{
    const float tf = __fsub_rn(__fmul_rn(__int2float_rn(at), inv), 0.5f);
    const int lo = (int)floorf(tf);
    *a = __fsub_rn(tf, __int2float_rn(lo));
    *a1 = __fsub_rn(1.0f, *a);
    *t1 = lo > 0 ? lo : 0;
    *t2 = lo + 1 < tiles - 1 ? lo + 1 : tiles - 1;
}

/* tone.h's gf_map_luma(16) with lut[Y] = y2: chroma from the pixel as it
 * is, the new luma y2. */
template <typename T, int CENTRE, int MAX>
__device__ __forceinline__ void set_luma(T *rgb, int y2)
{
    const int r = rgb[0], g = rgb[1], b = rgb[2];
    const int y = gf_luma(r, g, b);
    int cr = ((r - y) * 11682 + (CENTRE << GF_YUV_SHIFT) + GF_YUV_HALF) >> GF_YUV_SHIFT;
    int cb = ((b - y) * 9241 + (CENTRE << GF_YUV_SHIFT) + GF_YUV_HALF) >> GF_YUV_SHIFT;
    cr = min(max(cr, 0), MAX) - CENTRE;
    cb = min(max(cb, 0), MAX) - CENTRE;
    const int r2 = y2 + ((cr * 22987 + GF_YUV_HALF) >> GF_YUV_SHIFT);
    const int g2 = y2 + ((cb * -5636 + cr * -11698 + GF_YUV_HALF) >> GF_YUV_SHIFT);
    const int b2 = y2 + ((cb * 29049 + GF_YUV_HALF) >> GF_YUV_SHIFT);
    rgb[0] = (T)min(max(r2, 0), MAX);
    rgb[1] = (T)min(max(g2, 0), MAX);
    rgb[2] = (T)min(max(b2, 0), MAX);
}

/* Pixel (x, y): its four tiles' blend, stored. */
template <typename T>
__device__ __forceinline__ void interpolate_pixel(const clahe_params &p, int x, int y)
{
    constexpr int kBins = sizeof(T) == 1 ? 256 : 65536;
    int tx1, tx2, ty1, ty2;
    float xa, xa1, ya, ya1;
    tile_pair(x, p.inv_tw, p.tiles_x, &tx1, &tx2, &xa, &xa1);
    tile_pair(y, p.inv_th, p.tiles_y, &ty1, &ty2, &ya, &ya1);
    const size_t pixel = (size_t)y * p.width + x;
    const int v = p.plane[pixel];
    const uint16_t *lut1 = p.luts + (size_t)ty1 * p.tiles_x * kBins;
    const uint16_t *lut2 = p.luts + (size_t)ty2 * p.tiles_x * kBins;
    const int i1 = tx1 * kBins + v, i2 = tx2 * kBins + v;
    /* ((l1[i1] * xa1 + l1[i2] * xa) * ya1 + (l2[i1] * xa1 + l2[i2] * xa) * ya) */
    const float top = __fmul_rn(__fadd_rn(__fmul_rn((float)__ldg(lut1 + i1), xa1),
                                          __fmul_rn((float)__ldg(lut1 + i2), xa)), ya1);
    const float bottom = __fmul_rn(__fadd_rn(__fmul_rn((float)__ldg(lut2 + i1), xa1),
                                             __fmul_rn((float)__ldg(lut2 + i2), xa)), ya);
    const int out = saturate(__fadd_rn(top, bottom), kBins - 1);
    T *px = (T *)p.pixels + pixel * p.channels;
    if (p.channel >= 0)
        px[p.channel] = (T)out;
    else if (sizeof(T) == 1)
        set_luma<T, 128, 255>(px, out);
    else
        set_luma<T, 32768, 65535>(px, out);
}

/* One thread a pixel; rows stride by the grid (grid.y is at most 65535). */
template <typename T>
__global__ void interpolate_kernel(clahe_params p)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= p.width)
        return;
    for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < p.height; y += gridDim.y * blockDim.y)
        interpolate_pixel<T>(p, x, y);
}

int bins_of(const clahe_params *p)
{
    return p->depth == 16 ? 65536 : 256;
}

}  // namespace

extern "C" void clahe_scratch_bytes(const clahe_params *p, size_t *plane, size_t *hist, size_t *luts)
{
    const size_t tiles = (size_t)p->tiles_x * (size_t)p->tiles_y * (size_t)bins_of(p);
    *plane = (size_t)p->width * (size_t)p->height * sizeof(uint16_t);
    *hist = tiles * sizeof(int);
    *luts = tiles * sizeof(uint16_t);
}

extern "C" cudaError_t clahe_fill_plane(const clahe_params *p, cudaStream_t stream)
{
    const size_t pixels = (size_t)p->width * (size_t)p->height;
    const size_t want = (pixels + 255) / 256;
    const unsigned blocks = (unsigned)(want < 65536 ? want : 65536);
    if (p->depth == 16)
        plane_kernel<uint16_t><<<blocks, 256, 0, stream>>>((const uint16_t *)p->pixels, pixels,
                                                           p->channels, p->channel, p->plane);
    else
        plane_kernel<unsigned char><<<blocks, 256, 0, stream>>>(
            (const unsigned char *)p->pixels, pixels, p->channels, p->channel, p->plane);
    return cudaGetLastError();
}

extern "C" cudaError_t clahe_histograms(const clahe_params *p, cudaStream_t stream)
{
    size_t plane_bytes, hist_bytes, lut_bytes;
    clahe_scratch_bytes(p, &plane_bytes, &hist_bytes, &lut_bytes);
    cudaError_t err = cudaMemsetAsync(p->hist, 0, hist_bytes, stream);
    if (err != cudaSuccess)
        return err;
    /* slices of about kSlicePixels, at most 65535 a tile (grid.y) */
    int slice_rows = kSlicePixels / p->tile_w > 1 ? kSlicePixels / p->tile_w : 1;
    if ((p->tile_h + slice_rows - 1) / slice_rows > 65535)
        slice_rows = (p->tile_h + 65534) / 65535;
    const dim3 grid((unsigned)(p->tiles_x * p->tiles_y), (unsigned)((p->tile_h + slice_rows - 1) / slice_rows));
    if (p->depth == 16)
        hist_kernel<65536><<<grid, kHistThreads, 0, stream>>>(p->plane, p->width, p->height, p->tiles_x,
                                                              p->tile_w, p->tile_h, slice_rows, p->hist);
    else
        hist_kernel<256><<<grid, kHistThreads, 0, stream>>>(p->plane, p->width, p->height, p->tiles_x,
                                                            p->tile_w, p->tile_h, slice_rows, p->hist);
    return cudaGetLastError();
}

extern "C" cudaError_t clahe_tile_luts(const clahe_params *p, cudaStream_t stream)
{
    const unsigned tiles = (unsigned)(p->tiles_x * p->tiles_y);
    if (p->depth == 16)
        lut_kernel<65536, 1024><<<tiles, 1024, 0, stream>>>(p->hist, p->clip_limit, p->lut_scale, p->luts);
    else
        lut_kernel<256, 256><<<tiles, 256, 0, stream>>>(p->hist, p->clip_limit, p->lut_scale, p->luts);
    return cudaGetLastError();
}

extern "C" cudaError_t clahe_interpolate(const clahe_params *p, cudaStream_t stream)
{
    const dim3 block(32, 8);
    const int rows = (p->height + 7) / 8;
    const dim3 grid((unsigned)((p->width + 31) / 32), (unsigned)(rows < 65535 ? rows : 65535));
    if (p->depth == 16)
        interpolate_kernel<uint16_t><<<grid, block, 0, stream>>>(*p);
    else
        interpolate_kernel<unsigned char><<<grid, block, 0, stream>>>(*p);
    return cudaGetLastError();
}

extern "C" cudaError_t clahe_run(const clahe_params *p, cudaStream_t stream)
{
    cudaError_t err = clahe_fill_plane(p, stream);
    if (err == cudaSuccess)
        err = clahe_histograms(p, stream);
    if (err == cudaSuccess)
        err = clahe_tile_luts(p, stream);
    if (err == cudaSuccess)
        err = clahe_interpolate(p, stream);
    return err;
}
