/* clahe_gpu.cu - OpenCV's CLAHE (src/clahe.c, the host's, is the reference) on
 * the device, in three stages that read the image itself:
 *   histograms  the padded image (BORDER_REFLECT_101, clahe.c's index maps)
 *               as rows of tiles, split evenly over resident blocks; each
 *               block counts its rows in shared memory and adds its counts
 *               to the tile's histogram once a tile. 256 bins: 32 copies,
 *               one per lane (bank = lane, no conflicts). 65536 bins: two
 *               16-bit counts a word (128 KiB); a count reaching 0x8000 hands
 *               0x8000 to the global bin at once, and a barrier after every
 *               32768 increments keeps each count below 0x10000 (devices
 *               without 128 KiB a block: warp-aggregated global atomics).
 *   luts        one block a tile: clip and redistribute, the inclusive CDF
 *               (each warp a span of bins, scanned with shuffles) and the
 *               table, in clahe.c's integers and its one float multiply,
 *               into the cells: per cell between four tile centres and per
 *               value, the four tables' entries side by side (8 bits: one
 *               word, 16 bits: two), so that a pixel reads one. 16 bits:
 *               the tables over the histograms, then a second launch
 *               gathers the cells in whole entries.
 *   interpolate each thread 16 bytes a channel (a chunk of whole pixels) at
 *               a time: the bilinear blend in clahe.c's float operation
 *               order, then the channel or, for the luma, tone.h's YCrCb
 *               round trip with the new Y. 8 bits: the cells a block needs
 *               staged in shared memory where they fit.
 * Every float operation whose rounding matters is an _rn intrinsic: nvcc
 * contracts a * b + c into FMA by default, clahe.c never does. Exact tricks:
 * a sample s < 2^23 is the float bits 0x4b000000 | s less 2^23, and v + 1.5 *
 * 2^23 rounds 0 <= v < 2^22 to the nearest integer, ties to even (lrintf). */
#include <limits.h>
#include <stdint.h>

#include "clahe_gpu.h"

extern "C" {
#include "../src/tone.h"
}

namespace {

/* OpenCV's borderInterpolate for BORDER_REFLECT_101, p >= 0 (clahe.c's). */
__device__ __forceinline__ int reflect_101(int p, int len)
{
    if (len == 1)
        return 0;
    while (p >= len || p < 0)
        p = p < 0 ? -p : 2 * (len - 1) - p;
    return p;
}

template <typename T>
struct Depth {
    static constexpr int kBins = sizeof(T) == 1 ? 256 : 65536;
    static constexpr int kMax = kBins - 1;
};

/* A chunk: P = 16 / sizeof(T) whole pixels, 16 bytes a channel, as words.
 * Sample indices are constants after unrolling, so the words stay in
 * registers. */
template <typename T, int C>
struct Chunk {
    static constexpr int P = 16 / (int)sizeof(T);
    static constexpr int kWords = 4 * C;
    uint32_t w[kWords];

    __device__ __forceinline__ int get(int i) const
    {
        if (sizeof(T) == 1)
            return (int)((w[i >> 2] >> (8 * (i & 3))) & 0xffu);
        return (int)((w[i >> 1] >> (16 * (i & 1))) & 0xffffu);
    }
    __device__ __forceinline__ void set(int i, int v)
    {
        if (sizeof(T) == 1) {
            const int s = 8 * (i & 3);
            w[i >> 2] = (w[i >> 2] & ~(0xffu << s)) | ((uint32_t)v << s);
        } else {
            const int s = 16 * (i & 1);
            w[i >> 1] = (w[i >> 1] & ~(0xffffu << s)) | ((uint32_t)v << s);
        }
    }
    __device__ __forceinline__ void clear()
    {
#pragma unroll
        for (int i = 0; i < kWords; i++)
            w[i] = 0;
    }
    /* Pixel j's value: its channel, or gf_luma of RGB (channel < 0). */
    __device__ __forceinline__ int value(int j, int channel) const
    {
        if (C >= 3 && channel < 0)
            return gf_luma(get(j * C), get(j * C + 1), get(j * C + 2));
        int v = get(j * C);
#pragma unroll
        for (int q = 1; q < C; q++)
            if (q == channel)
                v = get(j * C + q);
        return v;
    }
    /* Pixels [lo, hi) of those from pixel index 'at' (a multiple of P);
     * whole, in C 16-byte loads, where 'vector'. */
    __device__ __forceinline__ void load(const T *px, size_t at, int lo, int hi, bool vector)
    {
        if (vector) {
            const uint4 *v = reinterpret_cast<const uint4 *>(px + at * C);
#pragma unroll
            for (int q = 0; q < C; q++) {
                const uint4 u = v[q];
                w[4 * q] = u.x;
                w[4 * q + 1] = u.y;
                w[4 * q + 2] = u.z;
                w[4 * q + 3] = u.w;
            }
            return;
        }
        clear();
#pragma unroll
        for (int j = 0; j < P; j++)
            if (j >= lo && j < hi) {
#pragma unroll
                for (int q = 0; q < C; q++)
                    set(j * C + q, px[(at + j) * C + q]);
            }
    }
    /* Pixels [0, n) of row 'row' (its first pixel index), columns c0 + j
     * reflected into the image. */
    __device__ __forceinline__ void load_reflected(const T *px, size_t row, int c0, int n, int width)
    {
        clear();
#pragma unroll
        for (int j = 0; j < P; j++)
            if (j < n) {
                const size_t at = row + (size_t)reflect_101(c0 + j, width);
#pragma unroll
                for (int q = 0; q < C; q++)
                    set(j * C + q, px[at * C + q]);
            }
    }
    __device__ __forceinline__ void store(T *px, size_t at, int n, bool vector) const
    {
        if (vector) {
            uint4 *v = reinterpret_cast<uint4 *>(px + at * C);
#pragma unroll
            for (int q = 0; q < C; q++)
                v[q] = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
            return;
        }
#pragma unroll
        for (int j = 0; j < P; j++)
            if (j < n) {
#pragma unroll
                for (int q = 0; q < C; q++)
                    px[(at + j) * C + q] = (T)get(j * C + q);
            }
    }
    /* Pixel j's result 'out': the channel, or the luma y of RGB replaced
     * by out (tone.h's gf_map_luma / gf_map_luma16 with lut[y] = out). */
    __device__ __forceinline__ void put(int j, int channel, int out, int y)
    {
        if (C >= 3 && channel < 0) {
            constexpr int kCentre = sizeof(T) == 1 ? 128 : 32768, kMax = Depth<T>::kMax;
            const int r = get(j * C), g = get(j * C + 1), b = get(j * C + 2);
            int cr = ((r - y) * 11682 + (kCentre << GF_YUV_SHIFT) + GF_YUV_HALF) >> GF_YUV_SHIFT;
            int cb = ((b - y) * 9241 + (kCentre << GF_YUV_SHIFT) + GF_YUV_HALF) >> GF_YUV_SHIFT;
            cr = min(max(cr, 0), kMax) - kCentre;
            cb = min(max(cb, 0), kMax) - kCentre;
            const int r2 = out + ((cr * 22987 + GF_YUV_HALF) >> GF_YUV_SHIFT);
            const int g2 = out + ((cb * -5636 + cr * -11698 + GF_YUV_HALF) >> GF_YUV_SHIFT);
            const int b2 = out + ((cb * 29049 + GF_YUV_HALF) >> GF_YUV_SHIFT);
            set(j * C, min(max(r2, 0), kMax));
            set(j * C + 1, min(max(g2, 0), kMax));
            set(j * C + 2, min(max(b2, 0), kMax));
            return;
        }
#pragma unroll
        for (int q = 0; q < C; q++)
            if (q == (C == 1 ? 0 : channel))
                set(j * C + q, out);
    }
};

/* ---- histograms ---------------------------------------------------------- */

enum { kShared8, kShared16, kGlobal16 };

template <int MODE>
struct HistShape {
    static constexpr int kThreads = MODE == kShared8 ? 512 : MODE == kShared16 ? 1024 : 256;
    static constexpr int kWords = MODE == kShared8 ? 256 * 32 : MODE == kShared16 ? 32768 : 0;
};

/* Chunks a thread loads before counting: registers allowing; for
 * kShared16 a round (THREADS * U * P increments) stays at most 32768. */
template <int C, int MODE>
__host__ __device__ constexpr int hist_unroll()
{
    return MODE == kShared16 ? (C == 1 ? 4 : C == 2 ? 2 : 1) : (C == 1 ? 2 : 1);
}

/* What every kernel reads of the image and the grid. */
struct PlaneArgs {
    void *pixels;
    size_t count;               /* width * height */
    int width, height, channel;
    int tiles_x;
    int vector;                 /* pixels 16-byte aligned */
};

struct HistArgs : PlaneArgs {
    long long rows;             /* tiles * tile_h: the work, a tile's row each */
    int tile_w, tile_h;
    int *hist;
};

template <int MODE>
__device__ __forceinline__ void count(uint32_t *s, int *gh, int v, bool valid)
{
    if (MODE == kShared8) {
        if (valid)
            atomicAdd(&s[v * 32 + (threadIdx.x & 31)], 1u);
    } else if (MODE == kShared16) {
        if (valid) {
            const int shift = (v & 1) * 16;
            const uint32_t old = atomicAdd(&s[v >> 1], 1u << shift);
            if (((old >> shift) & 0xffffu) == 0x7fffu) {
                atomicAdd(gh + v, 0x8000);
                atomicSub(&s[v >> 1], 0x8000u << shift);
            }
        }
    } else {
        const int key = valid ? v : -1;
        const unsigned same = __match_any_sync(0xffffffffu, key);
        if (valid && (int)(threadIdx.x & 31) == __ffs(same) - 1)
            atomicAdd(gh + v, __popc(same));
    }
}

/* The block's counts into gh, and zeroed. */
template <int MODE>
__device__ __forceinline__ void flush(uint32_t *s, int *gh)
{
    constexpr int THREADS = HistShape<MODE>::kThreads;
    if (MODE == kShared8) {
        for (int b = threadIdx.x; b < 256; b += THREADS) {
            uint32_t sum = 0;
            for (int i = 0; i < 32; i++) {
                const int at = b * 32 + ((i + b) & 31);
                sum += s[at];
                s[at] = 0;
            }
            if (sum != 0)
                atomicAdd(gh + b, (int)sum);
        }
    } else if (MODE == kShared16) {
        uint4 *s4 = reinterpret_cast<uint4 *>(s);
        for (int i = threadIdx.x; i < 32768 / 4; i += THREADS) {
            const uint4 q = s4[i];
            s4[i] = make_uint4(0, 0, 0, 0);
            const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                if (w[k] & 0xffffu)
                    atomicAdd(gh + 8 * i + 2 * k, (int)(w[k] & 0xffffu));
                if (w[k] >> 16)
                    atomicAdd(gh + 8 * i + 2 * k + 1, (int)(w[k] >> 16));
            }
        }
    }
}

/* Block b: rows [rows * b / grid, rows * (b + 1) / grid) of the tiles'
 * rows (tile-major), a segment of one tile at a time. A segment's rows are
 * slots of P pixels: the in-image columns in P-aligned chunks (one more
 * than their width needs, for the alignment), then the padded columns
 * reflected. Every thread runs the same number of slot iterations, so the
 * barriers and __match_any_sync meet whole warps and blocks. */
template <typename T, int C, int MODE>
__global__ void __launch_bounds__(HistShape<MODE>::kThreads) hist_kernel(HistArgs a)
{
    constexpr int THREADS = HistShape<MODE>::kThreads, kWords = HistShape<MODE>::kWords;
    constexpr int P = Chunk<T, C>::P, U = hist_unroll<C, MODE>();
    static_assert(MODE != kShared16 || THREADS * U * P <= 32768, "a round's increments");
    extern __shared__ uint4 smem[];
    uint32_t *s = reinterpret_cast<uint32_t *>(smem);
    const T *px = static_cast<const T *>(a.pixels);
    const long long first = a.rows * blockIdx.x / gridDim.x;
    const long long last = a.rows * (blockIdx.x + 1) / gridDim.x;
    for (int i = threadIdx.x; i < kWords; i += THREADS)
        s[i] = 0;
    __syncthreads();
    for (long long item = first; item < last;) {
        const int tile = (int)(item / a.tile_h);
        const int r0 = (int)(item - (long long)tile * a.tile_h);
        const int rows = (int)min((long long)(a.tile_h - r0), last - item);
        item += rows;
        int *gh = a.hist + (size_t)tile * Depth<T>::kBins;
        const int tx = tile % a.tiles_x, ty = tile / a.tiles_x;
        const int x0 = tx * a.tile_w, x1 = x0 + a.tile_w;
        const int xa = min(x0, a.width), in_len = min(x1, a.width) - xa;
        const int pad0 = max(x0, a.width), pad_len = max(x1 - pad0, 0);
        const int in_cpr = in_len > 0 ? (in_len + P - 1) / P + 1 : 0;
        const int cpr = in_cpr + (pad_len + P - 1) / P;
        const int slots = rows * cpr;
        const int y0 = ty * a.tile_h + r0;
        for (int base = 0; base < slots; base += THREADS * U) {
            Chunk<T, C> ch[U];
            int lo[U], hi[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int slot = base + u * THREADS + (int)threadIdx.x;
                lo[u] = hi[u] = 0;
                if (slot < slots) {
                    const int r = slot / cpr, k = slot - r * cpr;
                    const size_t row = (size_t)reflect_101(y0 + r, a.height) * (size_t)a.width;
                    if (k < in_cpr) {
                        const size_t g0 = row + (size_t)xa;
                        const size_t at = g0 - g0 % P + (size_t)k * P;
                        lo[u] = g0 > at ? (int)(g0 - at) : 0;
                        hi[u] = (int)min((long long)P, (long long)(g0 + in_len) - (long long)at);
                        if (hi[u] > lo[u])
                            ch[u].load(px, at, lo[u], hi[u], a.vector && at + P <= a.count);
                    } else {
                        const int c0 = pad0 + (k - in_cpr) * P;
                        hi[u] = min(P, x1 - c0);
                        ch[u].load_reflected(px, row, c0, hi[u], a.width);
                    }
                }
                if (hi[u] <= lo[u])
                    ch[u].clear();
            }
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int j = 0; j < P; j++)
                    count<MODE>(s, gh, ch[u].value(j, a.channel), j >= lo[u] && j < hi[u]);
            if (MODE == kShared16)
                __syncthreads();
        }
        if (MODE != kGlobal16) {
            __syncthreads();
            flush<MODE>(s, gh);
            __syncthreads();
        }
    }
}

/* ---- tables -------------------------------------------------------------- */

template <typename T>
struct LutShape {
    static constexpr int kThreads = sizeof(T) == 1 ? 256 : 1024;
};

__device__ __forceinline__ int warp_sum(int v)
{
#pragma unroll
    for (int d = 16; d > 0; d /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}

__device__ __forceinline__ int warp_inclusive_scan(int v, int lane)
{
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const int n = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d)
            v += n;
    }
    return v;
}

__device__ __forceinline__ int saturate(float v, int max)
{
    const int r = __float2int_rn(v);  /* lrintf: half to even */
    return r < 0 ? 0 : r > max ? max : r;
}

/* One block a tile; warp w owns bins [w * SPAN, (w + 1) * SPAN), lane l
 * of them l, l + 32, ... clahe.c's clip_histogram and tile_lut: the bins
 * that get one of the residual are i = k * step, k < residual, as its loop
 * visits them. Cell (cy, cx), cy in [0, tiles_y], holds tile rows
 * ty1 = max(cy - 1, 0) and ty2 = min(cy, tiles_y - 1) (columns alike) as
 * entries {ty1 tx1, ty1 tx2, ty2 tx1, ty2 tx2}. 8 bits: this tile writes
 * every place it has there. 16 bits: the table replaces the histogram
 * (each bin read before it is written, by the same thread) and
 * cells_kernel gathers the cells from there in whole entries. */
template <typename T>
__global__ void __launch_bounds__(LutShape<T>::kThreads)
    lut_kernel(int *hist, int clip_limit, float lut_scale, int tiles_x, int tiles_y, T *cells)
{
    constexpr int BINS = Depth<T>::kBins, THREADS = LutShape<T>::kThreads;
    constexpr int WARPS = THREADS / 32, SPAN = BINS / WARPS, J = SPAN / 32;
    __shared__ int part[2][WARPS];
    __shared__ int offset[WARPS];
    const int tile = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int *h = hist + (size_t)tile * BINS + warp * SPAN + lane;
    const int limit = clip_limit > 0 ? clip_limit : INT_MAX;
    int clipped = 0, kept = 0;
#pragma unroll 8
    for (int j = 0; j < J; j++) {
        const int v = h[j * 32];
        clipped += v > limit ? v - limit : 0;
        kept += min(v, limit);
    }
    clipped = warp_sum(clipped);
    kept = warp_sum(kept);
    if (lane == 0) {
        part[0][warp] = clipped;
        part[1][warp] = kept;
    }
    __syncthreads();
    int total = 0;
    for (int w = 0; w < WARPS; w++)
        total += part[0][w];
    const int batch = total / BINS, residual = total - batch * BINS;
    const int step = residual == 0 ? 1 : max(BINS / residual, 1);
    if (threadIdx.x == 0) {
        int sum = 0;
        for (int w = 0; w < WARPS; w++) {
            offset[w] = sum;
            /* the k < residual with k * step in the warp's span */
            const int k0 = (w * SPAN + step - 1) / step, k1 = ((w + 1) * SPAN + step - 1) / step;
            sum += part[1][w] + batch * SPAN + max(0, min(residual, k1) - k0);
        }
    }
    __syncthreads();

    const int tx = tile % tiles_x, ty = tile / tiles_x;
    int run = offset[warp];
#pragma unroll 4
    for (int j = 0; j < J; j++) {
        const int bin = warp * SPAN + j * 32 + lane;
        const int extra = residual != 0 && bin % step == 0 && bin / step < residual ? 1 : 0;
        const int v = min(h[j * 32], limit) + batch + extra;
        const int scan = warp_inclusive_scan(v, lane);
        const int sum = run + scan;
        run += __shfl_sync(0xffffffffu, scan, 31);
        const int entry = saturate(__fmul_rn(__int2float_rn(sum), lut_scale), BINS - 1);
        if constexpr (sizeof(T) == 2) {
            h[j * 32] = entry;
        } else {
            /* places 0, 1: (t + 1, slot 0), (t, slot 1); 2: (0, 0) if t == 0;
             * 3: (tiles, 1) if t == tiles - 1 */
#pragma unroll
            for (int r = 0; r < 4; r++) {
                if ((r == 2 && ty != 0) || (r == 3 && ty != tiles_y - 1))
                    continue;
                const int cy = r == 0 ? ty + 1 : r == 1 ? ty : r == 2 ? 0 : tiles_y;
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    if ((c == 2 && tx != 0) || (c == 3 && tx != tiles_x - 1))
                        continue;
                    const int cx = c == 0 ? tx + 1 : c == 1 ? tx : c == 2 ? 0 : tiles_x;
                    const size_t cell = (size_t)cy * (size_t)(tiles_x + 1) + (size_t)cx;
                    cells[(cell * BINS + (size_t)bin) * 4 + (size_t)((r & 1) * 2 + (c & 1))] = (T)entry;
                }
            }
        }
    }
}

/* 16 bits: block b of cell b / 256 (see lut_kernel), values
 * (b % 256) * 256 + thread, from the tables in 'luts'. */
__global__ void __launch_bounds__(256) cells_kernel(const int *luts, int tiles_x, int tiles_y, uint2 *cells)
{
    const int cell = (int)(blockIdx.x >> 8), v = (int)((blockIdx.x & 255u) << 8 | threadIdx.x);
    const int cy = cell / (tiles_x + 1), cx = cell % (tiles_x + 1);
    const int ty1 = max(cy - 1, 0), ty2 = min(cy, tiles_y - 1);
    const int tx1 = max(cx - 1, 0), tx2 = min(cx, tiles_x - 1);
    const int *row1 = luts + (size_t)ty1 * (size_t)tiles_x * 65536 + v;
    const int *row2 = luts + (size_t)ty2 * (size_t)tiles_x * 65536 + v;
    const uint32_t l11 = (uint32_t)row1[tx1 * 65536], l12 = (uint32_t)row1[tx2 * 65536];
    const uint32_t l21 = (uint32_t)row2[tx1 * 65536], l22 = (uint32_t)row2[tx2 * 65536];
    cells[(size_t)cell * 65536 + v] = make_uint2(l11 | l12 << 16, l21 | l22 << 16);
}

/* ---- interpolation ------------------------------------------------------- */

constexpr int kInterpThreads = 256;
constexpr int kStageEntries = 6144;  /* 8 bits: 24 cells of 256 words */

template <typename T>
struct Cell {
    typedef uint32_t entry;  /* four 8-bit entries */
};
template <>
struct Cell<uint16_t> {
    typedef uint2 entry;     /* four 16-bit entries */
};

struct InterpArgs : PlaneArgs {
    long long chunks;           /* ceil(count / P) */
    int tiles_y;
    float inv_tw, inv_th;
    const void *cells;
};

/* tf = at * inv - 0.5 and floor(tf), as clahe.c's column_weights and
 * clahe_row compute them. */
__device__ __forceinline__ float tile_tf(float at, float inv)
{
    return __fsub_rn(__fmul_rn(at, inv), 0.5f);
}

/* The cell of floor(tf) (clamped: clahe.c's tables hold it there). */
__device__ __forceinline__ int cell_of(float lo, int tiles)
{
    return min(max((int)lo + 1, 0), tiles);
}

__device__ __forceinline__ float sample_float(uint32_t word, unsigned sel)
{
    return __fsub_rn(__int_as_float((int)__byte_perm(word, 0x4b000000u, sel)), 8388608.0f);
}

/* ((l11 * xa1 + l12 * xa) * ya1 + (l21 * xa1 + l22 * xa) * ya), rounded
 * half to even and saturated. */
template <typename T>
__device__ __forceinline__ int blend(typename Cell<T>::entry e, float xa, float xa1, float ya, float ya1)
{
    float l11, l12, l21, l22;
    if constexpr (sizeof(T) == 1) {
        l11 = sample_float(e, 0x7440);
        l12 = sample_float(e, 0x7441);
        l21 = sample_float(e, 0x7442);
        l22 = sample_float(e, 0x7443);
    } else {
        l11 = sample_float(e.x, 0x7410);
        l12 = sample_float(e.x, 0x7432);
        l21 = sample_float(e.y, 0x7410);
        l22 = sample_float(e.y, 0x7432);
    }
    const float top = __fmul_rn(__fadd_rn(__fmul_rn(l11, xa1), __fmul_rn(l12, xa)), ya1);
    const float bottom = __fmul_rn(__fadd_rn(__fmul_rn(l21, xa1), __fmul_rn(l22, xa)), ya);
    const int r = __float_as_int(__fadd_rn(__fadd_rn(top, bottom), 12582912.0f)) - 0x4b400000;
    return min(r, Depth<T>::kMax);
}

template <typename T, bool SHARED>
__device__ __forceinline__ typename Cell<T>::entry fetch(const typename Cell<T>::entry *at)
{
    if constexpr (SHARED)
        return *at;
    else
        return __ldg(at);
}

/* The table a block reads: cells [cy0, ...) x [cx0, cx0 + ncx), BINS
 * entries each, row-major. */
template <typename T>
struct Table {
    const typename Cell<T>::entry *base;
    int cy0, cx0, ncx;
};

/* Pixel j of ch, with tf of its column, that tf's floor and its cell row. */
template <typename T, int C, bool SHARED>
__device__ __forceinline__ void blend_pixel(Chunk<T, C> &ch, int j, int channel, float tf, float lo,
                                            const typename Cell<T>::entry *row, const Table<T> &t,
                                            int tiles_x, float ya, float ya1)
{
    const float xa = __fsub_rn(tf, lo), xa1 = __fsub_rn(1.0f, xa);
    const int cx = cell_of(lo, tiles_x) - t.cx0;
    const int v = ch.value(j, channel);
    const typename Cell<T>::entry e = fetch<T, SHARED>(row + (size_t)cx * Depth<T>::kBins + v);
    ch.put(j, channel, blend<T>(e, xa, xa1, ya, ya1), v);
}

template <typename T>
__device__ __forceinline__ const typename Cell<T>::entry *cell_row(const Table<T> &t, float ylo, int tiles_y,
                                                                   float *ya, float *ya1, float tfy)
{
    *ya = __fsub_rn(tfy, ylo);
    *ya1 = __fsub_rn(1.0f, *ya);
    return t.base + (size_t)(cell_of(ylo, tiles_y) - t.cy0) * (size_t)t.ncx * Depth<T>::kBins;
}

/* Chunk ch from pixel index at, n of its pixels in the image. Fast path:
 * one row, a width below 2^24 (column floats exact, so x0's plus j is
 * x's), one cell column for all P pixels (floor(tf) equal at both ends, tf
 * monotonic). Otherwise pixel by pixel. */
template <typename T, int C, bool SHARED>
__device__ __forceinline__ void blend_chunk(const InterpArgs &a, const Table<T> &t, Chunk<T, C> &ch,
                                            size_t at, int n)
{
    constexpr int P = Chunk<T, C>::P;
    const size_t width = (size_t)a.width;
    const size_t y = a.count <= 0xffffffffu ? (size_t)((uint32_t)at / (uint32_t)a.width) : at / width;
    const int x0 = (int)(at - y * width);
    if (n == P && x0 + P <= a.width && a.width < (1 << 24)) {
        const float tfy = tile_tf(__int2float_rn((int)y), a.inv_th);
        float ya, ya1;
        const auto *row = cell_row(t, floorf(tfy), a.tiles_y, &ya, &ya1, tfy);
        const float fx0 = __int2float_rn(x0);
        const float lo = floorf(tile_tf(fx0, a.inv_tw));
        if (lo == floorf(tile_tf(__fadd_rn(fx0, (float)(P - 1)), a.inv_tw))) {
#pragma unroll
            for (int j = 0; j < P; j++)
                blend_pixel<T, C, SHARED>(ch, j, a.channel, tile_tf(__fadd_rn(fx0, (float)j), a.inv_tw), lo,
                                          row, t, a.tiles_x, ya, ya1);
        } else {
#pragma unroll
            for (int j = 0; j < P; j++) {
                const float tf = tile_tf(__fadd_rn(fx0, (float)j), a.inv_tw);
                blend_pixel<T, C, SHARED>(ch, j, a.channel, tf, floorf(tf), row, t, a.tiles_x, ya, ya1);
            }
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < P; j++)
        if (j < n) {
            const size_t p = at + (size_t)j, py = p / width;
            const int x = (int)(p - py * width);
            const float tfy = tile_tf(__int2float_rn((int)py), a.inv_th);
            float ya, ya1;
            const auto *row = cell_row(t, floorf(tfy), a.tiles_y, &ya, &ya1, tfy);
            const float tf = tile_tf(__int2float_rn(x), a.inv_tw);
            blend_pixel<T, C, SHARED>(ch, j, a.channel, tf, floorf(tf), row, t, a.tiles_x, ya, ya1);
        }
}

template <typename T, int C, bool SHARED>
__device__ __forceinline__ void interpolate_range(const InterpArgs &a, const Table<T> &t, long long first,
                                                  long long last)
{
    constexpr int P = Chunk<T, C>::P, U = C == 1 ? 2 : 1;
    T *px = static_cast<T *>(a.pixels);
    for (long long c = first + threadIdx.x; c < last; c += (long long)kInterpThreads * U) {
        Chunk<T, C> ch[U];
        int n[U];
        bool vec[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long long cu = c + (long long)u * kInterpThreads;
            const size_t at = (size_t)cu * P;
            n[u] = cu < last ? (int)min((size_t)P, a.count - at) : 0;
            vec[u] = a.vector && n[u] == P;
            if (n[u] > 0)
                ch[u].load(px, at, 0, n[u], vec[u]);
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            if (n[u] > 0) {
                const size_t at = (size_t)(c + (long long)u * kInterpThreads) * P;
                blend_chunk<T, C, SHARED>(a, t, ch[u], at, n[u]);
                ch[u].store(px, at, n[u], vec[u]);
            }
    }
}

/* Block b: chunks [chunks * b / grid, chunks * (b + 1) / grid). 8 bits:
 * the cells its rows and columns reach (cell_of is monotonic) staged in
 * shared memory when they fit, else read from global memory as at 16. */
template <typename T, int C>
__global__ void __launch_bounds__(kInterpThreads) interpolate_kernel(InterpArgs a)
{
    constexpr int P = Chunk<T, C>::P;
    typedef typename Cell<T>::entry E;
    const long long first = a.chunks * blockIdx.x / gridDim.x;
    const long long last = a.chunks * (blockIdx.x + 1) / gridDim.x;
    if (first >= last)
        return;
    if constexpr (sizeof(T) == 1) {
        __shared__ uint32_t stage[kStageEntries];
        const size_t width = (size_t)a.width;
        const size_t p0 = (size_t)first * P, p1 = min((size_t)last * P, a.count) - 1;
        const size_t y0 = p0 / width, y1 = p1 / width;
        const int cy0 = cell_of(floorf(tile_tf(__int2float_rn((int)y0), a.inv_th)), a.tiles_y);
        const int cy1 = cell_of(floorf(tile_tf(__int2float_rn((int)y1), a.inv_th)), a.tiles_y);
        int cx0 = 0, cx1 = a.tiles_x;
        if (y0 == y1) {
            cx0 = cell_of(floorf(tile_tf(__int2float_rn((int)(p0 - y0 * width)), a.inv_tw)), a.tiles_x);
            cx1 = cell_of(floorf(tile_tf(__int2float_rn((int)(p1 - y1 * width)), a.inv_tw)), a.tiles_x);
        }
        const int ncx = cx1 - cx0 + 1, entries = (cy1 - cy0 + 1) * ncx * 256;
        if (entries <= kStageEntries) {
            const uint32_t *cells = static_cast<const uint32_t *>(a.cells);
            for (int i = threadIdx.x; i < entries; i += kInterpThreads) {
                const int cell = i >> 8, cy = cy0 + cell / ncx, cx = cx0 + cell % ncx;
                stage[i] = __ldg(cells + ((size_t)cy * (size_t)(a.tiles_x + 1) + (size_t)cx) * 256 + (i & 255));
            }
            __syncthreads();
            const Table<T> t = {stage, cy0, cx0, ncx};
            interpolate_range<T, C, true>(a, t, first, last);
            return;
        }
    }
    const Table<T> t = {static_cast<const E *>(a.cells), 0, 0, a.tiles_x + 1};
    interpolate_range<T, C, false>(a, t, first, last);
}

/* ---- launchers ----------------------------------------------------------- */

int bins_of(const clahe_params *p)
{
    return p->depth == 16 ? 65536 : 256;
}

/* An attribute of the current device. */
cudaError_t device_attribute(cudaDeviceAttr what, int *value)
{
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    return err == cudaSuccess ? cudaDeviceGetAttribute(value, what, dev) : err;
}

/* Blocks for a grid that splits 'work' evenly over what is resident at
 * once: at most 'work'. */
template <typename K>
cudaError_t resident_grid(K kernel, int threads, size_t smem, long long work, unsigned *blocks)
{
    int sms = 0, per_sm = 0;
    cudaError_t err = device_attribute(cudaDevAttrMultiProcessorCount, &sms);
    if (err == cudaSuccess)
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem);
    if (err != cudaSuccess)
        return err;
    const long long most = (long long)sms * (per_sm > 0 ? per_sm : 1);
    *blocks = (unsigned)(work < most ? (work > 0 ? work : 1) : most);
    return cudaSuccess;
}

bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

template <int C>
PlaneArgs plane_args(const clahe_params *p)
{
    PlaneArgs a;
    a.pixels = p->pixels;
    a.count = (size_t)p->width * (size_t)p->height;
    a.width = p->width;
    a.height = p->height;
    a.channel = C == 1 ? 0 : p->channel;
    a.tiles_x = p->tiles_x;
    a.vector = aligned16(p->pixels);
    return a;
}

template <typename T, int C, int MODE>
cudaError_t launch_hist(const clahe_params *p, cudaStream_t stream)
{
    constexpr int THREADS = HistShape<MODE>::kThreads;
    const size_t smem = (size_t)HistShape<MODE>::kWords * sizeof(uint32_t);
    auto kernel = hist_kernel<T, C, MODE>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    HistArgs a;
    static_cast<PlaneArgs &>(a) = plane_args<C>(p);
    a.rows = (long long)p->tiles_x * p->tiles_y * p->tile_h;
    a.tile_w = p->tile_w;
    a.tile_h = p->tile_h;
    a.hist = p->hist;
    unsigned blocks = 1;
    if (err == cudaSuccess)
        err = resident_grid(kernel, THREADS, smem, a.rows, &blocks);
    if (err != cudaSuccess)
        return err;
    kernel<<<blocks, THREADS, smem, stream>>>(a);
    return cudaGetLastError();
}

template <typename T, int MODE>
cudaError_t hist_channels(const clahe_params *p, cudaStream_t stream)
{
    switch (p->channels) {
    case 1: return launch_hist<T, 1, MODE>(p, stream);
    case 2: return launch_hist<T, 2, MODE>(p, stream);
    case 3: return launch_hist<T, 3, MODE>(p, stream);
    case 4: return launch_hist<T, 4, MODE>(p, stream);
    default: return cudaErrorInvalidValue;
    }
}

template <typename T, int C>
cudaError_t launch_interpolate(const clahe_params *p, cudaStream_t stream)
{
    constexpr int P = Chunk<T, C>::P;
    auto kernel = interpolate_kernel<T, C>;
    cudaError_t err = cudaSuccess;
    if (sizeof(T) == 2)  /* the cells through L1: as much of it as there is */
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 0);
    InterpArgs a;
    static_cast<PlaneArgs &>(a) = plane_args<C>(p);
    a.chunks = (long long)((a.count + P - 1) / P);
    a.tiles_y = p->tiles_y;
    a.inv_tw = p->inv_tw;
    a.inv_th = p->inv_th;
    a.cells = p->cells;
    unsigned blocks = 1;
    if (err == cudaSuccess)
        err = resident_grid(kernel, kInterpThreads, 0, (a.chunks + kInterpThreads - 1) / kInterpThreads, &blocks);
    if (err != cudaSuccess)
        return err;
    kernel<<<blocks, kInterpThreads, 0, stream>>>(a);
    return cudaGetLastError();
}

template <typename T>
cudaError_t interpolate_channels(const clahe_params *p, cudaStream_t stream)
{
    switch (p->channels) {
    case 1: return launch_interpolate<T, 1>(p, stream);
    case 2: return launch_interpolate<T, 2>(p, stream);
    case 3: return launch_interpolate<T, 3>(p, stream);
    case 4: return launch_interpolate<T, 4>(p, stream);
    default: return cudaErrorInvalidValue;
    }
}

}  // namespace

extern "C" void clahe_scratch_bytes(const clahe_params *p, size_t *hist, size_t *cells)
{
    const size_t bins = (size_t)bins_of(p);
    const size_t tiles = (size_t)p->tiles_x * (size_t)p->tiles_y;
    const size_t cell_count = (size_t)(p->tiles_x + 1) * (size_t)(p->tiles_y + 1);
    *hist = tiles * bins * sizeof(int);
    *cells = cell_count * bins * 4 * (size_t)(p->depth == 16 ? 2 : 1);
}

extern "C" cudaError_t clahe_histograms(const clahe_params *p, cudaStream_t stream)
{
    size_t hist_bytes, cell_bytes;
    clahe_scratch_bytes(p, &hist_bytes, &cell_bytes);
    cudaError_t err = cudaMemsetAsync(p->hist, 0, hist_bytes, stream);
    if (err != cudaSuccess)
        return err;
    if (p->depth != 16)
        return hist_channels<unsigned char, kShared8>(p, stream);
    int optin = 0;
    err = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, &optin);
    if (err != cudaSuccess)
        return err;
    if (p->hist_global || (size_t)optin < (size_t)HistShape<kShared16>::kWords * sizeof(uint32_t))
        return hist_channels<uint16_t, kGlobal16>(p, stream);
    return hist_channels<uint16_t, kShared16>(p, stream);
}

extern "C" cudaError_t clahe_tile_luts(const clahe_params *p, cudaStream_t stream)
{
    const unsigned tiles = (unsigned)(p->tiles_x * p->tiles_y);
    if (p->depth == 16) {
        lut_kernel<uint16_t><<<tiles, LutShape<uint16_t>::kThreads, 0, stream>>>(
            p->hist, p->clip_limit, p->lut_scale, p->tiles_x, p->tiles_y, static_cast<uint16_t *>(p->cells));
        const unsigned cells = (unsigned)((p->tiles_x + 1) * (p->tiles_y + 1));
        cells_kernel<<<cells * 256, 256, 0, stream>>>(p->hist, p->tiles_x, p->tiles_y, static_cast<uint2 *>(p->cells));
    } else
        lut_kernel<unsigned char><<<tiles, LutShape<unsigned char>::kThreads, 0, stream>>>(
            p->hist, p->clip_limit, p->lut_scale, p->tiles_x, p->tiles_y, static_cast<unsigned char *>(p->cells));
    return cudaGetLastError();
}

extern "C" cudaError_t clahe_interpolate(const clahe_params *p, cudaStream_t stream)
{
    if (p->depth == 16)
        return interpolate_channels<uint16_t>(p, stream);
    return interpolate_channels<unsigned char>(p, stream);
}

extern "C" cudaError_t clahe_run(const clahe_params *p, cudaStream_t stream)
{
    cudaError_t err = clahe_histograms(p, stream);
    if (err == cudaSuccess)
        err = clahe_tile_luts(p, stream);
    if (err == cudaSuccess)
        err = clahe_interpolate(p, stream);
    return err;
}
