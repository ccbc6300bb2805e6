/* conv2d_large.cu - masks of any size (past conv2d.cu's 31x31), and the
 * unsharp combine: sums in float, finished as the reference finishes.
 *
 * Methods (the caller picks; conv2d_large_method() says which runs a mask)
 *   direct     any mask, any matrices: a block of 16x16 outputs walks the
 *              mask in 24x24 chunks, each chunk's input tile (39x39 per
 *              channel) and weights staged in shared memory. taps x K
 *              FMAs per value: compute-bound (63x63 RGBA at ~4e3 FMA a
 *              value).
 *   separable  one matrix, column x row: a row pass (a block stages its
 *              row segment plus the halo in shared memory, planar per
 *              channel; a thread slides along 7 adjacent outputs) into
 *              float scratch, then a column pass (a thread slides down 8
 *              outputs of one column). Each step of a slide loads one
 *              weight and one value for 7 or 8 FMAs. width + height FMAs
 *              per value; the scratch is read and written once (8 B a
 *              value).
 *   box        one matrix of equal weights: running sums, exact in 32-bit
 *              unsigned integers (4095 x 4095 x 255 < 2^32), along rows
 *              (each thread a run of outputs) into scratch, then down
 *              columns; finished in double, so the bytes are the
 *              reference's. ~4 loads a value whatever the radius.
 *
 * The border is applied where a pass reads (gf_border_index), so the
 * column pass reads row-pass values at mapped rows: the border commutes
 * with a pass along the other axis. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "conv2d_large.h"

extern "C" {
#include "../src/border.h"
}

namespace {

constexpr int kChunk = 24;           /* mask chunk of the direct method */
constexpr int kDirectSide = 16;      /* direct: outputs per block side */
constexpr int kRowThreads = 128;     /* separable row pass: threads a block */
constexpr int kRowRun = 7;           /* adjacent outputs per thread (odd: see large_rows) */
constexpr int kColumnRun = 8;        /* separable column pass: outputs per thread */

/* The finished byte of one value from its matrix responses r[k]. */
__device__ unsigned char finish_value(const conv2d_large_launch &p, const float *r, float source)
{
    float v = 0.0f;
    for (int k = 0; k < p.mask_count; k++) {
        switch (p.combine) {
        case GF_COMBINE_MAGNITUDE: v += r[k] * r[k]; break;
        case GF_COMBINE_MAX: v = k == 0 ? r[k] : fmaxf(v, r[k]); break;
        case GF_COMBINE_MIN: v = k == 0 ? r[k] : fminf(v, r[k]); break;
        default: v += r[k]; break;
        }
    }
    if (p.combine == GF_COMBINE_MAGNITUDE)
        v = sqrtf(v);
    if (p.combine == GF_COMBINE_UNSHARP) {
        const float d = source - v;
        v = fabsf(d) >= p.threshold ? source + p.amount * d : source;
    }
    v = rintf(v);  /* half to even */
    return (unsigned char)(v > 0.0f ? (v < 255.0f ? v : 255.0f) : 0.0f);  /* NaN: 0 */
}

__device__ size_t pixel_at(const conv2d_large_launch &p, int x, int y)
{
    return ((size_t)y * p.width + x) * p.channels;
}

/* ---- direct ----------------------------------------------------------------- */

__global__ void large_direct(conv2d_large_launch p)
{
    constexpr int side = kDirectSide + kChunk - 1;
    __shared__ float tile[4][side][side + 1];
    __shared__ float weights[GF_MASK_MAX_MATRICES][kChunk][kChunk];
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * kDirectSide + tx;
    const int x0 = blockIdx.x * kDirectSide, y0 = blockIdx.y * kDirectSide;
    const int x = x0 + tx, y = y0 + ty, ax = p.mask_width / 2, ay = p.mask_height / 2;
    const gf_border border = (gf_border)p.border;
    float acc[GF_MASK_MAX_MATRICES][4] = {};  /* [matrix][channel] */
    for (int cy = 0; cy < p.mask_height; cy += kChunk)
        for (int cx = 0; cx < p.mask_width; cx += kChunk) {
            for (int i = t; i < side * side; i += kDirectSide * kDirectSide) {
                const int sy = gf_border_index(y0 - ay + cy + i / side, p.height, border);
                const int sx = gf_border_index(x0 - ax + cx + i % side, p.width, border);
                for (int c = 0; c < p.channels_filtered; c++)
                    tile[c][i / side][i % side] =
                        sx < 0 || sy < 0 ? 0.0f : p.src[pixel_at(p, sx, sy) + c];
            }
            for (int i = t; i < p.mask_count * kChunk * kChunk; i += kDirectSide * kDirectSide) {
                const int k = i / (kChunk * kChunk), my = i / kChunk % kChunk, mx = i % kChunk;
                const int wy = cy + my, wx = cx + mx;
                weights[k][my][mx] = wy < p.mask_height && wx < p.mask_width
                    ? p.weights[((size_t)k * p.mask_height + wy) * p.mask_width + wx] : 0.0f;
            }
            __syncthreads();
            const int rows = min(kChunk, p.mask_height - cy), cols = min(kChunk, p.mask_width - cx);
            for (int my = 0; my < rows; my++)
                for (int mx = 0; mx < cols; mx++)
                    for (int k = 0; k < p.mask_count; k++) {
                        const float w = weights[k][my][mx];
                        for (int c = 0; c < p.channels_filtered; c++)
                            acc[k][c] = fmaf(w, tile[c][ty + my][tx + mx], acc[k][c]);
                    }
            __syncthreads();
        }
    if (x >= p.width || y >= p.height)
        return;
    const size_t at = pixel_at(p, x, y);
    for (int c = 0; c < p.channels; c++) {
        if (c >= p.channels_filtered) {
            p.dst[at + c] = p.src[at + c];
            continue;
        }
        float r[GF_MASK_MAX_MATRICES];
        for (int k = 0; k < p.mask_count; k++)
            r[k] = acc[k][c] / p.scale[k] + p.offset[k];
        p.dst[at + c] = finish_value(p, r, p.src[at + c]);
    }
}

/* ---- separable ------------------------------------------------------------- */

/* acc[r] += w[m] * v[m + r] for m < taps (rounded up to a multiple of R,
 * w zero past taps), r < R: each step loads one weight and one value and
 * does R FMAs, the last R values kept in a ring whose indices the unrolled
 * loop fixes at compile time. v(i) reads value i. */
template <int R, class Read>
__device__ void sliding_sums(const float *w, int taps, Read v, float *acc)
{
    float ring[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        ring[r] = v(r);
        acc[r] = 0.0f;
    }
    for (int m0 = 0; m0 < taps; m0 += R) {
#pragma unroll
        for (int q = 0; q < R; q++) {
            const float weight = w[m0 + q];
#pragma unroll
            for (int r = 0; r < R; r++)
                acc[r] = fmaf(weight, ring[(q + r) % R], acc[r]);
            ring[q] = v(m0 + q + R);
        }
    }
}

/* Taps rounded up to a multiple of R, for sliding_sums's zero weights. */
__host__ __device__ constexpr int padded_taps(int taps, int r)
{
    return (taps + r - 1) / r * r;
}

/* scratch[(y * width + x) * channels + c] = sum over mx of row[mx] * source
 * (x + mx - ax, y). A block: one row segment of kRowThreads * kRowRun
 * outputs, staged with its halo in shared memory, planar per channel; a
 * thread: kRowRun adjacent outputs (odd, so that a warp's loads, kRowRun
 * words apart, fall in 32 different banks). */
__global__ void large_rows(conv2d_large_launch p)
{
    extern __shared__ float shared[];
    const int taps = padded_taps(p.mask_width, kRowRun);
    const int segment = kRowThreads * kRowRun, span = segment + taps + kRowRun;
    float *row = shared, *values = shared + taps;  /* values[c * span + i] */
    const int x0 = blockIdx.x * segment, y = blockIdx.y, ax = p.mask_width / 2;
    for (int i = threadIdx.x; i < taps; i += kRowThreads)
        row[i] = i < p.mask_width ? p.row[i] : 0.0f;
    for (int i = threadIdx.x; i < span; i += kRowThreads) {
        const int sx = gf_border_index(x0 - ax + i, p.width, (gf_border)p.border);
        for (int c = 0; c < p.channels_filtered; c++)
            values[c * span + i] = sx < 0 ? 0.0f : p.src[pixel_at(p, sx, y) + c];
    }
    __syncthreads();
    const int first = threadIdx.x * kRowRun;
    for (int c = 0; c < p.channels_filtered; c++) {
        const float *v = values + c * span + first;
        float acc[kRowRun];
        sliding_sums<kRowRun>(row, taps, [&](int i) { return v[i]; }, acc);
#pragma unroll
        for (int r = 0; r < kRowRun; r++)
            if (x0 + first + r < p.width)
                ((float *)p.scratch)[pixel_at(p, x0 + first + r, y) + c] = acc[r];
    }
}

/* Each thread: kColumnRun outputs of one column, every input read once. */
__global__ void large_columns(conv2d_large_launch p)
{
    extern __shared__ float column[];
    const int taps = padded_taps(p.mask_height, kColumnRun);
    const int t = threadIdx.y * blockDim.x + threadIdx.x, threads = blockDim.x * blockDim.y;
    for (int i = t; i < taps; i += threads)
        column[i] = i < p.mask_height ? p.column[i] : 0.0f;
    __syncthreads();
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * kColumnRun;
    if (x >= p.width || y0 >= p.height)
        return;
    const int ay = p.mask_height / 2;
    const float *scratch = (const float *)p.scratch;
    for (int c = 0; c < p.channels_filtered; c++) {
        float acc[kColumnRun];
        sliding_sums<kColumnRun>(column, taps, [&](int i) {
            const int sy = gf_border_index(y0 - ay + i, p.height, (gf_border)p.border);
            return sy < 0 ? 0.0f : scratch[pixel_at(p, x, sy) + c];
        }, acc);
        for (int r = 0; r < kColumnRun && y0 + r < p.height; r++) {
            const size_t at = pixel_at(p, x, y0 + r) + c;
            const float response = acc[r] / p.scale[0] + p.offset[0];
            p.dst[at] = finish_value(p, &response, p.src[at]);
        }
    }
    for (int r = 0; r < kColumnRun && y0 + r < p.height; r++)
        for (int c = p.channels_filtered; c < p.channels; c++)
            p.dst[pixel_at(p, x, y0 + r) + c] = p.src[pixel_at(p, x, y0 + r) + c];
}

/* ---- box ----------------------------------------------------------------------- */

/* Outputs a thread walks: enough that the window's first sum is a small
 * share of the run. */
__host__ __device__ int box_run(int taps)
{
    return taps < 32 ? 64 : (taps > 512 ? 1024 : 2 * taps);
}

/* sums[(y * width + x) * channels + c] = the sum of the mask_width source
 * values from x - ax on, a thread a run of box_run() outputs of one row. */
__global__ void box_rows(conv2d_large_launch p)
{
    const int run = box_run(p.mask_width), runs = (p.width + run - 1) / run;
    const long long id = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (long long)runs * p.height)
        return;
    const int y = (int)(id / runs), x0 = (int)(id % runs) * run, ax = p.mask_width / 2;
    const int x1 = min(p.width, x0 + run);
    unsigned *sums = (unsigned *)p.scratch;
    const gf_border border = (gf_border)p.border;
    for (int c = 0; c < p.channels_filtered; c++) {
        unsigned sum = 0;
        for (int mx = 0; mx < p.mask_width; mx++) {
            const int sx = gf_border_index(x0 - ax + mx, p.width, border);
            sum += sx < 0 ? 0u : p.src[pixel_at(p, sx, y) + c];
        }
        sums[pixel_at(p, x0, y) + c] = sum;
        for (int x = x0 + 1; x < x1; x++) {
            const int in = gf_border_index(x - ax + p.mask_width - 1, p.width, border);
            const int out = gf_border_index(x - ax - 1, p.width, border);
            sum += (in < 0 ? 0u : p.src[pixel_at(p, in, y) + c]) -
                   (out < 0 ? 0u : p.src[pixel_at(p, out, y) + c]);
            sums[pixel_at(p, x, y) + c] = sum;
        }
    }
}

/* The column sums of the row sums, a thread a run of one column, finished
 * in double: sum * weight / scale + offset, as the reference's exact sum. */
__global__ void box_columns(conv2d_large_launch p)
{
    const int run = box_run(p.mask_height), x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y0 = blockIdx.y * run, ay = p.mask_height / 2;
    if (x >= p.width || y0 >= p.height)
        return;
    const int y1 = min(p.height, y0 + run);
    const unsigned *sums = (const unsigned *)p.scratch;
    const gf_border border = (gf_border)p.border;
    for (int c = 0; c < p.channels; c++) {
        if (c >= p.channels_filtered) {
            for (int y = y0; y < y1; y++)
                p.dst[pixel_at(p, x, y) + c] = p.src[pixel_at(p, x, y) + c];
            continue;
        }
        unsigned sum = 0;
        for (int my = 0; my < p.mask_height; my++) {
            const int sy = gf_border_index(y0 - ay + my, p.height, border);
            sum += sy < 0 ? 0u : sums[pixel_at(p, x, sy) + c];
        }
        for (int y = y0; y < y1; y++) {
            if (y > y0) {
                const int in = gf_border_index(y - ay + p.mask_height - 1, p.height, border);
                const int out = gf_border_index(y - ay - 1, p.height, border);
                sum += (in < 0 ? 0u : sums[pixel_at(p, x, in) + c]) -
                       (out < 0 ? 0u : sums[pixel_at(p, x, out) + c]);
            }
            const size_t at = pixel_at(p, x, y) + c;
            const double v = (double)sum * p.box_weight / p.scale_exact + p.offset_exact;
            const double source = p.src[at];
            double out = v;
            if (p.combine == GF_COMBINE_UNSHARP) {
                const double d = source - v;
                out = fabs(d) >= p.threshold ? source + p.amount * d : source;
            } else if (p.combine == GF_COMBINE_MAGNITUDE) {
                out = fabs(v);
            }
            out = rint(out);
            p.dst[at] = (unsigned char)(out > 0.0 ? (out < 255.0 ? out : 255.0) : 0.0);
        }
    }
}

unsigned blocks_for(long long items, int threads)
{
    return (unsigned)((items + threads - 1) / threads);
}

cudaError_t raise_shared(const void *entry, size_t bytes)
{
    return bytes > 48 * 1024
        ? cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes)
        : cudaSuccess;
}

cudaError_t launch_separable(const conv2d_large_launch *p, cudaStream_t stream)
{
    const int segment = kRowThreads * kRowRun, taps = padded_taps(p->mask_width, kRowRun);
    const size_t row_shared =
        sizeof(float) * (taps + (size_t)p->channels_filtered * (segment + taps + kRowRun));
    cudaError_t err = raise_shared((const void *)large_rows, row_shared);
    if (err != cudaSuccess)
        return err;
    large_rows<<<dim3(blocks_for(p->width, segment), p->height), kRowThreads, row_shared, stream>>>(*p);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;
    const dim3 block(32, 8);
    const size_t column_shared = sizeof(float) * padded_taps(p->mask_height, kColumnRun);
    large_columns<<<dim3(blocks_for(p->width, 32), blocks_for(p->height, 8 * kColumnRun)), block,
                    column_shared, stream>>>(*p);
    return cudaGetLastError();
}

cudaError_t launch_box(const conv2d_large_launch *p, cudaStream_t stream)
{
    const int row_run = box_run(p->mask_width), column_run = box_run(p->mask_height);
    const long long runs = (long long)((p->width + row_run - 1) / row_run) * p->height;
    box_rows<<<blocks_for(runs, 128), 128, 0, stream>>>(*p);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return err;
    box_columns<<<dim3(blocks_for(p->width, 64), blocks_for(p->height, column_run)), 64, 0, stream>>>(*p);
    return cudaGetLastError();
}

}  // namespace

static int all_equal(const double *v, int n)
{
    for (int i = 1; i < n; i++)
        if (v[i] != v[0])
            return 0;
    return 1;
}

extern "C" int conv2d_large_method_for(const gf_mask *mask)
{
    if (mask->count != 1 || !mask->separable)
        return CONV2D_LARGE_DIRECT;
    return all_equal(mask->weights[0], mask->width * mask->height) &&
                   all_equal(mask->row, mask->width) && all_equal(mask->column, mask->height)
               ? CONV2D_LARGE_BOX : CONV2D_LARGE_SEPARABLE;
}

extern "C" void conv2d_large_launch_of(const gf_mask *mask, int width, int height, int channels,
                                       int channels_filtered, int border, conv2d_large_launch *p)
{
    memset(p, 0, sizeof *p);
    p->width = width;
    p->height = height;
    p->channels = channels;
    p->channels_filtered = channels_filtered;
    p->border = border;
    p->mask_width = mask->width;
    p->mask_height = mask->height;
    p->mask_count = mask->count;
    p->combine = mask->combine;
    p->amount = (float)mask->amount;
    p->threshold = (float)mask->threshold;
    p->box_weight = mask->weights[0][0];
    p->scale_exact = mask->scale[0];
    p->offset_exact = mask->offset[0];
    for (int k = 0; k < mask->count; k++) {
        p->scale[k] = (float)mask->scale[k];
        p->offset[k] = (float)mask->offset[k];
    }
}

extern "C" const char *conv2d_large_method_name(int method)
{
    static const char *const names[] = {"large direct", "large separable", "large box"};
    return method >= 0 && method < CONV2D_LARGE_METHODS ? names[method] : NULL;
}

extern "C" size_t conv2d_large_scratch_bytes(int method, const conv2d_large_launch *p)
{
    if (method == CONV2D_LARGE_DIRECT)
        return 0;
    return (size_t)p->width * p->height * p->channels * sizeof(float);  /* float or unsigned */
}

extern "C" cudaError_t conv2d_large_gpu(int method, const conv2d_large_launch *p, cudaStream_t stream)
{
    switch (method) {
    case CONV2D_LARGE_SEPARABLE: return launch_separable(p, stream);
    case CONV2D_LARGE_BOX: return launch_box(p, stream);
    default: break;
    }
    const dim3 block(kDirectSide, kDirectSide);
    large_direct<<<dim3(blocks_for(p->width, kDirectSide), blocks_for(p->height, kDirectSide)), block, 0,
                   stream>>>(*p);
    return cudaGetLastError();
}
