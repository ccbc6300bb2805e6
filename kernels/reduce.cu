/* reduce.cu - min, max, sum and sum of squares of every channel, one pass.
 *
 * Version ladder (the reference is gf_statistics_cpu in backend_cpu.c)
 *   1 one pass: each thread folds a grid-stride run of pixels into
 *     registers (64-bit sums), warps combine with __shfl_down_sync, warp
 *     leaders meet in shared memory, and one thread per block merges into
 *     the global result with atomics (atomicMin / atomicMax / 64-bit
 *     atomicAdd). No second launch and no host round trip: the result
 *     stays on the device for the kernels that use it (auto-level's LUT).
 *     One byte load and ~10 integer operations (two of them 64-bit adds)
 *     per byte: issue-bound at a fraction of the copy bandwidth.
 *   2 from the histogram: for 8-bit data the 256-bin histogram of a
 *     channel holds all four statistics exactly (min and max are its first
 *     and last non-empty bins, sum = sum of v * h[v], sum of squares = sum
 *     of v^2 * h[v]). So the pass over the pixels is histogram.cu's version
 *     2 (16-byte loads, one shared atomic per byte) into the result's own
 *     scratch, and a second launch of one block per channel folds the 256
 *     bins: 8 KB read instead of the image. Bound by shared-memory atomic
 *     throughput on RGBA (one atomic per byte, ~7.7 per clock per SM).
 *   3 registers, 4 bytes at a time: 16-byte loads (two in flight), RGBA
 *     words transposed with PRMT into one word per channel (4 pixels of
 *     it), then per channel word one DP4A for the sum, one for the sum of
 *     squares (x . x), and for min and max the even and odd bytes as u16x2
 *     lanes folded with Hopper's three-way VIMNMX (__vimin3_u16x2): ~2
 *     instructions per byte instead of ~10, no atomics until the end. 32-bit
 *     partial sums are flushed into 64-bit ones every 4096 vectors (255^2 *
 *     4 * 4096 < 2^32). 1, 2 and 4 channels; 3 channels run version 2.
 *   4 version 3's arithmetic over block tiles: each block reads tiles of
 *     8 x 256 contiguous 16-byte vectors (8 loads in flight per thread,
 *     128 bytes), tile t going to block t mod grid; the loads skip L1 and
 *     ask L2 for 256-byte fetches (ld.global.nc.L1::no_allocate.L2::256B);
 *     the grid is one wave (the blocks the SMs hold at once, from the
 *     occupancy API); and no memset launches come before it: blocks merge
 *     into accumulators kept in the result, which start and end at zero
 *     (min kept as 255 - min, so that zero is its identity too), and the
 *     last block to finish moves them into the result and zeroes them.
 *     Measured side by side (bench/RESULTS.md), RGBA, % of the copy
 *     bandwidth: version 3 76-78, one wave and four loads 81-82, tiles
 *     80-83, tiles and the L2 hint 84-86 (CUB's DeviceReduce sum: the
 *     same); with the hint, 2, 4 or 8 loads are within 1 point on RGBA,
 *     and 8 is the best of them on gray.
 *
 * Roofline budget: C bytes read per pixel, 4 * C numbers written per block;
 * memory-bound: at ~3.0 TB/s (H100) an 8192x8192 RGBA image (256 MiB)
 * needs ~90 us. Sums are exact: 64-bit integers hold 255^2 * 2^44. */
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

extern "C" {
#include "../src/tone.h"
}

#define REDUCE_THREADS 256
#define FULL_MASK 0xffffffffu

/* The block's totals of every thread's lo, hi, sum and squares per
 * channel: warp shuffles, then warp leaders in shared memory. Returns true
 * in thread c < C, which then holds channel c's totals; the other threads
 * return false and have nothing more to do. */
template <int C>
__device__ __forceinline__ bool reduce_block_totals(unsigned int (&lo)[C], unsigned int (&hi)[C],
                                                   unsigned long long (&sum)[C],
                                                   unsigned long long (&squares)[C], unsigned int &l,
                                                   unsigned int &h, unsigned long long &s,
                                                   unsigned long long &q)
{
#pragma unroll
    for (int c = 0; c < C; c++)
        for (int offset = 16; offset > 0; offset >>= 1) {
            lo[c] = min(lo[c], __shfl_down_sync(FULL_MASK, lo[c], offset));
            hi[c] = max(hi[c], __shfl_down_sync(FULL_MASK, hi[c], offset));
            sum[c] += __shfl_down_sync(FULL_MASK, sum[c], offset);
            squares[c] += __shfl_down_sync(FULL_MASK, squares[c], offset);
        }
    __shared__ unsigned int warp_lo[REDUCE_THREADS / 32][C], warp_hi[REDUCE_THREADS / 32][C];
    __shared__ unsigned long long warp_sum[REDUCE_THREADS / 32][C], warp_squares[REDUCE_THREADS / 32][C];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
#pragma unroll
        for (int c = 0; c < C; c++) {
            warp_lo[warp][c] = lo[c];
            warp_hi[warp][c] = hi[c];
            warp_sum[warp][c] = sum[c];
            warp_squares[warp][c] = squares[c];
        }
    __syncthreads();
    if (threadIdx.x >= C)
        return false;
    /* thread c merges channel c across the block's warps */
    const int c = threadIdx.x;
    l = 255, h = 0, s = 0, q = 0;
    for (int w = 0; w < (int)(blockDim.x + 31) / 32; w++) {
        l = min(l, warp_lo[w][c]);
        h = max(h, warp_hi[w][c]);
        s += warp_sum[w][c];
        q += warp_squares[w][c];
    }
    return true;
}

/* The block's totals merged into the global result with atomics (versions
 * 1 and 3: out was set to min 255, the rest 0, before the launch). */
template <int C>
__device__ __forceinline__ void reduce_block(unsigned int (&lo)[C], unsigned int (&hi)[C],
                                             unsigned long long (&sum)[C],
                                             unsigned long long (&squares)[C], reduce_result *out)
{
    unsigned int l, h;
    unsigned long long s, q;
    if (!reduce_block_totals<C>(lo, hi, sum, squares, l, h, s, q))
        return;
    const int c = threadIdx.x;
    atomicMin(&out->min[c], l);
    atomicMax(&out->max[c], h);
    atomicAdd(&out->sum[c], s);
    atomicAdd(&out->sum_squares[c], q);
}

template <int C>
__global__ void reduce_kernel1(const unsigned char *src, size_t pixels, reduce_result *out)
{
    unsigned int lo[C], hi[C];
    unsigned long long sum[C], squares[C];
#pragma unroll
    for (int c = 0; c < C; c++) {
        lo[c] = 255;
        hi[c] = 0;
        sum[c] = squares[c] = 0;
    }
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < pixels; i += stride) {
#pragma unroll
        for (int c = 0; c < C; c++) {
            unsigned int v = src[i * C + c];
            lo[c] = min(lo[c], v);
            hi[c] = max(hi[c], v);
            sum[c] += v;
            squares[c] += v * v;
        }
    }
    reduce_block<C>(lo, hi, sum, squares, out);
}

/* Version 2's fold: block c turns channel c's histogram into its
 * statistics, thread v taking bin v. */
__global__ void __launch_bounds__(GF_BINS) reduce_from_histogram(reduce_result *out)
{
    const int c = blockIdx.x, v = threadIdx.x;
    const unsigned long long h = out->hist[c * GF_BINS + v];
    unsigned int lo = h ? v : 255, hi = h ? v : 0;
    unsigned long long sum = h * v, squares = h * (unsigned long long)(v * v);
    for (int offset = 16; offset > 0; offset >>= 1) {
        lo = min(lo, __shfl_down_sync(FULL_MASK, lo, offset));
        hi = max(hi, __shfl_down_sync(FULL_MASK, hi, offset));
        sum += __shfl_down_sync(FULL_MASK, sum, offset);
        squares += __shfl_down_sync(FULL_MASK, squares, offset);
    }
    __shared__ unsigned int warp_lo[GF_BINS / 32], warp_hi[GF_BINS / 32];
    __shared__ unsigned long long warp_sum[GF_BINS / 32], warp_squares[GF_BINS / 32];
    const int warp = v / 32;
    if (v % 32 == 0) {
        warp_lo[warp] = lo;
        warp_hi[warp] = hi;
        warp_sum[warp] = sum;
        warp_squares[warp] = squares;
    }
    __syncthreads();
    if (v != 0)
        return;
    for (int w = 1; w < GF_BINS / 32; w++) {
        lo = min(lo, warp_lo[w]);
        hi = max(hi, warp_hi[w]);
        sum += warp_sum[w];
        squares += warp_squares[w];
    }
    out->min[c] = lo;
    out->max[c] = hi;
    out->sum[c] = sum;
    out->sum_squares[c] = squares;
}

/* ---- version 3 ---------------------------------------------------------------- */

#define REDUCE_FLUSH 4096  /* vectors between flushes of the 32-bit partial sums */

struct reduce_lanes {
    unsigned lo, hi;          /* u16x2: min and max of the even and the odd bytes */
    unsigned sum, squares;    /* since the last flush */
    unsigned long long sum64, squares64;
};

/* Four bytes of one channel. */
__device__ __forceinline__ void reduce_word(reduce_lanes &l, unsigned x)
{
    const unsigned even = x & 0x00FF00FFu, odd = (x >> 8) & 0x00FF00FFu;
    l.lo = __vimin3_u16x2(l.lo, even, odd);
    l.hi = __vimax3_u16x2(l.hi, even, odd);
    l.sum = __dp4a(x, 0x01010101u, l.sum);
    l.squares = __dp4a(x, x, l.squares);
}

/* One 16-byte vector: 16 pixels of 1 channel, 8 of 2 or 4 of 4, as one
 * word per channel and group of 4 pixels. */
template <int C>
__device__ __forceinline__ void reduce_vector(reduce_lanes (&l)[C], uint4 v)
{
    if constexpr (C == 1) {
        reduce_word(l[0], v.x);
        reduce_word(l[0], v.y);
        reduce_word(l[0], v.z);
        reduce_word(l[0], v.w);
    } else if constexpr (C == 2) {  /* words: c0 c1 c0 c1 */
        reduce_word(l[0], __byte_perm(v.x, v.y, 0x6420));
        reduce_word(l[1], __byte_perm(v.x, v.y, 0x7531));
        reduce_word(l[0], __byte_perm(v.z, v.w, 0x6420));
        reduce_word(l[1], __byte_perm(v.z, v.w, 0x7531));
    } else {  /* a 4x4 byte transpose: pixel words in, channel words out */
        const unsigned ab01 = __byte_perm(v.x, v.y, 0x5140), cd01 = __byte_perm(v.z, v.w, 0x5140);
        const unsigned ab23 = __byte_perm(v.x, v.y, 0x7362), cd23 = __byte_perm(v.z, v.w, 0x7362);
        reduce_word(l[0], __byte_perm(ab01, cd01, 0x5410));
        reduce_word(l[1], __byte_perm(ab01, cd01, 0x7632));
        reduce_word(l[2], __byte_perm(ab23, cd23, 0x5410));
        reduce_word(l[3], __byte_perm(ab23, cd23, 0x7632));
    }
}

template <int C>
__device__ __forceinline__ void reduce_flush(reduce_lanes (&l)[C])
{
#pragma unroll
    for (int c = 0; c < C; c++) {
        l[c].sum64 += l[c].sum;
        l[c].squares64 += l[c].squares;
        l[c].sum = l[c].squares = 0;
    }
}

/* A thread's lanes as plain totals, plus (block 0) the bytes after the
 * last whole vector: byte t is channel t mod C. */
template <int C>
__device__ __forceinline__ void reduce_thread_totals(reduce_lanes (&l)[C], const unsigned char *src,
                                                     size_t bytes, unsigned (&lo)[C], unsigned (&hi)[C],
                                                     unsigned long long (&sum)[C],
                                                     unsigned long long (&squares)[C])
{
    reduce_flush<C>(l);
#pragma unroll
    for (int c = 0; c < C; c++) {
        lo[c] = min(l[c].lo & 0xFFFF, l[c].lo >> 16);
        hi[c] = max(l[c].hi & 0xFFFF, l[c].hi >> 16);
        sum[c] = l[c].sum64;
        squares[c] = l[c].squares64;
    }
    if (blockIdx.x == 0)
        for (size_t t = bytes / 16 * 16 + threadIdx.x; t < bytes; t += blockDim.x) {
            const unsigned x = src[t];
#pragma unroll
            for (int c = 0; c < C; c++)
                if ((int)(t % C) == c) {
                    lo[c] = min(lo[c], x);
                    hi[c] = max(hi[c], x);
                    sum[c] += x;
                    squares[c] += x * x;
                }
        }
}

template <int C>
__global__ void __launch_bounds__(REDUCE_THREADS) reduce_kernel3(const unsigned char *src, size_t pixels,
                                                                reduce_result *out)
{
    reduce_lanes l[C];
#pragma unroll
    for (int c = 0; c < C; c++)
        l[c] = {0x00FF00FFu, 0u, 0u, 0u, 0ull, 0ull};
    const size_t bytes = pixels * C, vectors = bytes / 16;
    const uint4 *v = reinterpret_cast<const uint4 *>(src);
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int since_flush = 0;
    for (; i + stride < vectors; i += 2 * stride) {
        const uint4 a = __ldg(v + i), b = __ldg(v + i + stride);
        reduce_vector<C>(l, a);
        reduce_vector<C>(l, b);
        if (++since_flush == REDUCE_FLUSH / 2) {
            reduce_flush<C>(l);
            since_flush = 0;
        }
    }
    if (i < vectors)
        reduce_vector<C>(l, __ldg(v + i));
    unsigned lo[C], hi[C];
    unsigned long long sum[C], squares[C];
    reduce_thread_totals<C>(l, src, bytes, lo, hi, sum, squares);
    reduce_block<C>(lo, hi, sum, squares, out);
}

#define REDUCE_LOADS 8  /* version 4's 16-byte loads in flight per thread */

/* A streamed 16-byte load: not kept in L1, and L2 fetches the 256 bytes
 * around it from memory at once (sm_80 and up). */
__device__ __forceinline__ uint4 reduce_load(const uint4 *p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
#else
    return __ldg(p);
#endif
}

/* Version 4: version 3's arithmetic over block tiles of REDUCE_LOADS x 256
 * vectors (all of a thread's loads of a tile in flight at once), in a grid
 * of one wave, with no memset before the launch: blocks merge into the
 * accumulators, which start at zero (min as 255 - min, so that zero is its
 * identity too), and the last block to finish moves them into the result
 * and zeroes them. */
template <int C>
__global__ void __launch_bounds__(REDUCE_THREADS) reduce_kernel4(const unsigned char *src, size_t pixels,
                                                                reduce_result *out)
{
    reduce_lanes l[C];
#pragma unroll
    for (int c = 0; c < C; c++)
        l[c] = {0x00FF00FFu, 0u, 0u, 0u, 0ull, 0ull};
    const size_t bytes = pixels * C, vectors = bytes / 16;
    const uint4 *v = reinterpret_cast<const uint4 *>(src);
    /* block tiles of REDUCE_LOADS x 256 vectors, tile t to block t mod grid */
    const size_t tile = REDUCE_LOADS * REDUCE_THREADS, tiles = vectors / tile;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    int since_flush = 0;
    for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        const uint4 *p = v + t * tile + threadIdx.x;
        uint4 x[REDUCE_LOADS];
#pragma unroll
        for (int k = 0; k < REDUCE_LOADS; k++)
            x[k] = reduce_load(p + k * REDUCE_THREADS);
#pragma unroll
        for (int k = 0; k < REDUCE_LOADS; k++)
            reduce_vector<C>(l, x[k]);
        if (++since_flush == REDUCE_FLUSH / REDUCE_LOADS) {
            reduce_flush<C>(l);
            since_flush = 0;
        }
    }
    /* less than a tile left, spread over the grid: fewer than REDUCE_LOADS
     * vectors a thread, so still under REDUCE_FLUSH since the last flush */
    size_t i = tiles * tile + (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < vectors; i += stride)
        reduce_vector<C>(l, __ldg(v + i));
    unsigned lo[C], hi[C];
    unsigned long long sum[C], squares[C];
    reduce_thread_totals<C>(l, src, bytes, lo, hi, sum, squares);
    unsigned int bl, bh;
    unsigned long long bs, bq;
    if (!reduce_block_totals<C>(lo, hi, sum, squares, bl, bh, bs, bq))
        return;
    /* lanes 0..C-1 of warp 0 */
    const int c = threadIdx.x;
    const unsigned lanes = (1u << C) - 1;
    atomicMax(&out->acc_lo_inverted[c], 255 - bl);
    atomicMax(&out->acc_hi[c], bh);
    atomicAdd(&out->acc_sum[c], bs);
    atomicAdd(&out->acc_squares[c], bq);
    __threadfence();  /* this block's merge is seen before its count */
    __syncwarp(lanes);
    unsigned ticket = 0;
    if (c == 0)
        ticket = atomicAdd(&out->blocks_done, 1u);
    ticket = __shfl_sync(lanes, ticket, 0);
    if (ticket != gridDim.x - 1)
        return;
    /* the last block: every other block's atomics are done */
    out->min[c] = 255 - atomicExch(&out->acc_lo_inverted[c], 0u);
    out->max[c] = atomicExch(&out->acc_hi[c], 0u);
    out->sum[c] = atomicExch(&out->acc_sum[c], 0ull);
    out->sum_squares[c] = atomicExch(&out->acc_squares[c], 0ull);
    if (c == 0) {
        for (int unused = C; unused < 4; unused++) {  /* as versions 1 and 3 leave them */
            out->min[unused] = 255;
            out->max[unused] = 0;
            out->sum[unused] = out->sum_squares[unused] = 0;
        }
        out->blocks_done = 0;
    }
}

typedef void (*reduce_entry)(const unsigned char *, size_t, reduce_result *);

/* One wave: as many blocks as the SMs hold at once, no memset. */
static cudaError_t reduce_launch4(const unsigned char *src, size_t pixels, int channels,
                                  reduce_result *out, cudaStream_t stream)
{
    reduce_entry entry = channels == 1 ? reduce_kernel4<1> : channels == 2 ? reduce_kernel4<2>
                                                                            : reduce_kernel4<4>;
    int device = 0, sms = 1, per_sm = 1;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess)
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, entry, REDUCE_THREADS, 0);
    if (err != cudaSuccess)
        return err;
    /* no more blocks than 64-vector runs, so that small images use few */
    const size_t runs = (pixels * channels / 16 + 63) / 64;
    const size_t wave = (size_t)sms * (size_t)(per_sm > 0 ? per_sm : 1);
    const size_t wanted = (runs + REDUCE_THREADS - 1) / REDUCE_THREADS;
    const int blocks = (int)(wanted < 1 ? 1 : wanted < wave ? wanted : wave);
    entry<<<blocks, REDUCE_THREADS, 0, stream>>>(src, pixels, out);
    return cudaGetLastError();
}

extern "C" cudaError_t reduce_gpu(int version, const unsigned char *src, size_t pixels,
                                  int channels, reduce_result *out, cudaStream_t stream)
{
    if (channels < 1 || channels > 4 || version < 1 || version >= REDUCE_VERSIONS)
        return cudaErrorInvalidValue;
    /* versions 3 and 4 run 1, 2 and 4 channels from a 16-byte aligned buffer */
    if (version >= 3 && (channels == 3 || ((uintptr_t)src & 15)))
        version = 2;
    if (version == 4)
        return reduce_launch4(src, pixels, channels, out, stream);
    if (version == 2) {
        cudaError_t err = histogram_gpu(2, src, pixels, channels, 0, out->hist, stream);
        if (err != cudaSuccess)
            return err;
        reduce_from_histogram<<<channels, GF_BINS, 0, stream>>>(out);
        return cudaGetLastError();
    }
    /* min starts at all ones, everything else at zero */
    cudaError_t err = cudaMemsetAsync(out, 0, offsetof(reduce_result, hist), stream);
    if (err == cudaSuccess)
        err = cudaMemsetAsync(out->min, 0xFF, sizeof out->min, stream);
    if (err != cudaSuccess)
        return err;
    const size_t items = version == 3 ? (pixels * channels + 31) / 32 : pixels;  /* 2 vectors a thread */
    reduce_entry entry = version == 3 ? (channels == 1 ? reduce_kernel3<1>
                                         : channels == 2 ? reduce_kernel3<2> : reduce_kernel3<4>)
                                      : (channels == 1 ? reduce_kernel1<1>
                                         : channels == 2 ? reduce_kernel1<2>
                                         : channels == 3 ? reduce_kernel1<3> : reduce_kernel1<4>);
    entry<<<gf_grid_for(items, REDUCE_THREADS), REDUCE_THREADS, 0, stream>>>(src, pixels, out);
    return cudaGetLastError();
}
