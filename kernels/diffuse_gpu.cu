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
 *   stream    (v4) k iterations a launch (k = 1..8) in registers, no shared
 *             memory, no barrier. A warp owns a strip of W = 32 C columns
 *             (C = 2 or 4 adjacent columns a lane, x0 = strip (W - 2k) - k
 *             its first) and a chunk of H output rows, and streams down
 *             its H + 2k input rows once: as input row t arrives, level s
 *             (s iterations applied) is computed at row t - s from level
 *             s - 1's rows t - s - 1 .. t - s + 1, level k stored. Levels
 *             1..k-1 keep their last two rows in registers (three where
 *             the strip or chunk meets the image's edge), the input four
 *             (two of them loading ahead), in slots fixed by the
 *             unrolled row loop; west and east across lanes by shuffles.
 *             Each flux is computed once, for the edge between two cells
 *             (into the east cell it is minus the flux into the west one),
 *             the flux across a row's south edge kept for the row below. Level
 *             s is valid on local columns s .. W-1-s and rows s ..
 *             H+2k-1-s (the rows above, computed as the pipeline fills
 *             from the zeros it starts with, are never used), so the
 *             W - 2k middle columns and H middle rows of level k are
 *             exact. Traffic per iteration: (W/(W-2k) (H+2k)/H + 1) / k
 *             floats an output. The interior strips take long chunks
 *             first, about a wave of them over four fifths of the rows
 *             (2k rows of overhead on hundreds), then chunks of H rows,
 *             which the warps that finish first take up, so that the SMs
 *             stay full to the end (diffuse_stream_layout_for).
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
 * Streams follow the same rule, a cell outside the image holding a value
 * no image cell reads: before level s is computed on a row, level s - 1's
 * ghost cells next to the image's edge (across it from that row, or left
 * of column 0 and right of column w - 1) are set to what the border mode
 * maps them to, 0 or an image cell beside them on the same level.
 *
 * Arithmetic: the same operations in every version (flux and combine, or
 * flux_of with the kind a template argument), rounded op by op (__fadd_rn,
 * __fmul_rn, one __fmaf_rn, never contracted otherwise), so every version
 * gives the same floats (the stream's shared fluxes are exact: a - b
 * rounds to -(b - a) and the flux is odd, so only a zero's sign may
 * differ, which no later sum turns into another value): the flux g(|d|) d with
 * d = u_n - u, g = expf(-(d/K)^2) (the accurate expf, 2 ulp) or
 * 1 / (1 + (d/K)^2), d/K as d * (1/K); u' = fma(step, ((N + S) + W) + E, u),
 * the reference's order. The state is float32, so the result may differ
 * from the float64 reference by one where it lies near a half
 * (docs/diffuse.md gives the bound). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

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

/* u' from the four fluxes into u, in the reference's order. */
__device__ __forceinline__ float combine(float step, float u, float fn, float fs, float fw, float fe)
{
    const float ns = __fadd_rn(fn, fs);
    return __fmaf_rn(step, __fadd_rn(__fadd_rn(ns, fw), fe), u);
}

__device__ __forceinline__ float update(const diffuse_params &p, float u, float n, float s, float w,
                                        float e)
{
    return combine(p.step, u, flux(p, __fsub_rn(n, u)), flux(p, __fsub_rn(s, u)), flux(p, __fsub_rn(w, u)),
                   flux(p, __fsub_rn(e, u)));
}

/* flux and update with the kind fixed at compile time: the same operations
 * in the same order, so the same bits. */
template <int KIND>
__device__ __forceinline__ float flux_of(float inv_k, float d)
{
    if (KIND == GF_DIFFUSE_HEAT)
        return d;
    const float r = __fmul_rn(d, inv_k), r2 = __fmul_rn(r, r);
    if (KIND == GF_DIFFUSE_PM_EXP)
        return __fmul_rn(expf(-r2), d);
    return __fdiv_rn(d, __fadd_rn(1.0f, r2));
}

template <int KIND>
__device__ __forceinline__ float update_of(float step, float inv_k, float u, float n, float s, float w,
                                           float e)
{
    return combine(step, u, flux_of<KIND>(inv_k, __fsub_rn(n, u)), flux_of<KIND>(inv_k, __fsub_rn(s, u)),
                   flux_of<KIND>(inv_k, __fsub_rn(w, u)), flux_of<KIND>(inv_k, __fsub_rn(e, u)));
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

/* v4: see the opening comment. A block is kStreamWarps independent warps,
 * warp g on item g of the launch's layout (item_of). */
constexpr int kStreamWarps = DIFFUSE_STREAM_WARPS;

/* The registers a thread may use (__maxnreg__): a bound rather than a
 * target, (2K + 1) C plus room for the updates in flight, under which
 * ptxas keeps the whole state ((3K + 2) C values: two rows and a flux a
 * level, four input rows) in registers (-Xptxas -v: no spills); it uses
 * fewer (96 of 128 at K = 8, C = 2, heat). */
__host__ __device__ constexpr int stream_registers(int k, int c, int kind)
{
    return ((2 * k + 1) * c + (kind == GF_DIFFUSE_HEAT ? 4 * k + 56 : 8 * k + 80) + 7) / 8 * 8;
}

/* The value an image cell reads across the image's edge: 0 (constant),
 * its own (nearest, reflect; mirror on a side of 1) or its neighbour on
 * the other side (mirror). */
enum { kEdgeZero = 0, kEdgeSelf = 1, kEdgeOpposite = 2 };

__device__ __forceinline__ int edge_rule(gf_border border, int n)
{
    return border == GF_BORDER_CONSTANT ? kEdgeZero
           : border == GF_BORDER_MIRROR && n > 1 ? kEdgeOpposite : kEdgeSelf;
}

template <int C>
__device__ __forceinline__ void load_vector(const float *q, float (&d)[C])
{
    if constexpr (C == 4) {
        const float4 f = __ldg(reinterpret_cast<const float4 *>(q));
        d[0] = f.x, d[1] = f.y, d[2] = f.z, d[3] = f.w;
    } else {
        const float2 f = __ldg(reinterpret_cast<const float2 *>(q));
        d[0] = f.x, d[1] = f.y;
    }
}

template <int C>
__device__ __forceinline__ void store_vector(float *q, const float (&d)[C])
{
    if constexpr (C == 4)
        *reinterpret_cast<float4 *>(q) = make_float4(d[0], d[1], d[2], d[3]);
    else
        *reinterpret_cast<float2 *>(q) = make_float2(d[0], d[1]);
}

/* One warp's strip and chunk. Not EDGE (the strip and chunk with their
 * halo inside the image, or wrap): every cell updates from its strip
 * neighbours, loaded straight from the plane or, in wrap across the edge,
 * from wrapped coordinates. EDGE: rows and columns outside the image load
 * as 0 and hold unused values, except the ghost cells next to the image's
 * edge: before level s is computed on a row, level s - 1's cells across
 * the edge from it (the row above row 0, below row h - 1, the columns left
 * of column 0 and right of column w - 1) are set to what the border mode
 * reads there, from the image cells beside them on the same level. */
template <int K, int C, int KIND, bool EDGE>
struct stream_warp {
    static constexpr int W = 32 * C;
    const float *u;
    float *out;
    float step, inv_k;
    int w, h, lane, x0, y0, rows;  /* rows: input rows streamed, chunk + 2K */
    bool direct, vec, vstore, wrap;
    unsigned store_mask;           /* bit c: the lane's column c is written */
    int vrule, hrule;
    const float *next_in;          /* direct: the next row to load, at the lane's first column */
    float *next_out;               /* the next row to store, at the lane's first column */
    /* Level 0 keeps kIn rows, kIn - 2 of them loading ahead; levels 1..K-1
     * kSlots; the row loop is unrolled by kUnroll, a multiple of both, so
     * that every slot is a fixed register. EDGE reads the north row, the
     * others only the middle and south ones (the north flux is kept). */
    static constexpr int kIn = EDGE ? 3 : 4, kSlots = EDGE ? 3 : 2, kUnroll = EDGE ? 3 : 4;
    static constexpr int kAhead = kIn - 2;
    float in[kIn][C];              /* in[r % kIn]: level 0 (input) at local row r */
    float v[K][kSlots][C];         /* v[s][r % kSlots]: level s >= 1 at local row r */
    float south[K][C];             /* not EDGE: level s + 1's flux across its row's south edge */
    float result[C];               /* level K of the step's row */

    /* Level L's row r, r given as its difference to a multiple of kUnroll
     * (the unrolled step's t, possibly negative). */
    template <int L, int R>
    __device__ __forceinline__ float (&slot())[C]
    {
        if constexpr (L == 0)
            return in[(R % kIn + kIn) % kIn];
        else
            return v[L][(R % kSlots + kSlots) % kSlots];
    }

    __device__ __forceinline__ void init(const diffuse_params &p, const float *plane, float *dest,
                                         int first_x, int first_y, int out_rows, bool inside)
    {
        u = plane;
        out = dest;
        step = p.step;
        inv_k = p.inv_k;
        w = p.width;
        h = p.height;
        lane = (int)(threadIdx.x & 31);
        x0 = first_x;
        y0 = first_y;
        rows = out_rows + 2 * K;
        const gf_border border = (gf_border)p.border;
        wrap = border == GF_BORDER_WRAP;
        direct = inside;
        vec = w % C == 0 && x0 % C == 0;
        vrule = edge_rule(border, h);
        hrule = edge_rule(border, w);
        store_mask = 0;
#pragma unroll
        for (int c = 0; c < C; c++) {
            const int j = C * lane + c, gx = x0 + j;
            if (j >= K && j < W - K && gx < w)
                store_mask |= 1u << c;
        }
        vstore = vec && store_mask == (1u << C) - 1;
        next_in = direct ? u + (size_t)(y0 - K) * w + (x0 + C * lane) : u;
        next_out = out + (size_t)y0 * w + (x0 + C * lane);
    }

    /* Level 0 at local row t (image row y0 - K + t). */
    __device__ __forceinline__ void load(int t, float (&d)[C])
    {
        if (!EDGE && direct) {
            if (vec) {
                load_vector<C>(next_in, d);
            } else {
#pragma unroll
                for (int c = 0; c < C; c++)
                    d[c] = __ldg(next_in + c);
            }
            next_in += w;
            return;
        }
        const int gy = y0 - K + t;
        const int my = gy >= 0 && gy < h ? gy : wrap ? gf_border_index(gy, h, GF_BORDER_WRAP) : -1;
#pragma unroll
        for (int c = 0; c < C; c++) {
            const int gx = x0 + C * lane + c;
            const int mx = gx >= 0 && gx < w ? gx : wrap ? gf_border_index(gx, w, GF_BORDER_WRAP) : -1;
            d[c] = my >= 0 && mx >= 0 ? __ldg(u + (size_t)my * w + mx) : 0.0f;
        }
    }

    /* Level K at local row t - K, image row y0 + t - 2K: the chunk's rows
     * in order. */
    __device__ __forceinline__ void store(const float (&r)[C])
    {
        if (vstore) {
            store_vector<C>(next_out, r);
        } else {
#pragma unroll
            for (int c = 0; c < C; c++)
                if (store_mask >> c & 1)
                    next_out[c] = r[c];
        }
        next_out += w;
    }

    /* What a ghost cell reads: 0, the image cell next to it (near) or the
     * one after that (far, mirror). */
    __device__ __forceinline__ float across(int rule, float near, float far)
    {
        return rule == kEdgeZero ? 0.0f : rule == kEdgeSelf ? near : far;
    }

    /* Row r's ghost cell left of column 0, from the columns east of it. */
    __device__ __forceinline__ void ghost_left(float (&r)[C])
    {
        const float next0 = __shfl_down_sync(0xffffffffu, r[0], 1);
        const float next1 = __shfl_down_sync(0xffffffffu, r[1], 1);
        const int first = x0 + C * lane;
        float e1[C], e2[C];
#pragma unroll
        for (int c = 0; c < C; c++) {
            e1[c] = c + 1 < C ? r[c + 1] : next0;
            e2[c] = c + 2 < C ? r[c + 2] : c + 2 == C ? next0 : next1;
        }
#pragma unroll
        for (int c = 0; c < C; c++)
            if (first + c == -1)
                r[c] = across(hrule, e1[c], e2[c]);
    }

    /* Row r's ghost cell right of column w - 1, from the columns west of it. */
    __device__ __forceinline__ void ghost_right(float (&r)[C])
    {
        const float last = __shfl_up_sync(0xffffffffu, r[C - 1], 1);
        const float before = __shfl_up_sync(0xffffffffu, r[C - 2], 1);
        const int first = x0 + C * lane;
        float w1[C], w2[C];
#pragma unroll
        for (int c = 0; c < C; c++) {
            w1[c] = c >= 1 ? r[c - 1] : last;
            w2[c] = c >= 2 ? r[c - 2] : c == 1 ? last : before;
        }
#pragma unroll
        for (int c = 0; c < C; c++)
            if (first + c == w)
                r[c] = across(hrule, w1[c], w2[c]);
    }

    /* Row a's ghost row (across the edge from row m), from m or b, the row
     * on m's other side (mirror). */
    __device__ __forceinline__ void ghost_row(float (&a)[C], const float (&m)[C], const float (&b)[C])
    {
#pragma unroll
        for (int c = 0; c < C; c++)
            a[c] = across(vrule, m[c], b[c]);
    }

    /* Level S at local row t - S, in the step of input row t (t % kUnroll
     * == P), from level S - 1's rows t - S - 1 .. t - S + 1. Each flux is
     * computed once, for the edge between two cells: the flux into a cell
     * from its east neighbour is minus the flux into that neighbour from
     * the west, and (not EDGE) the flux from the north minus the flux into
     * the row above from the south, kept from the step before: flux(-d) =
     * -flux(d) exactly (d = a - b rounds to -(b - a)), so every cell sums
     * the same values as update_of. EDGE takes the north flux from the
     * north row as ghosted in this step. */
    template <int S, int P>
    __device__ __forceinline__ void level(int t)
    {
        float(&m)[C] = slot<S - 1, P - S>();
        float(&b)[C] = slot<S - 1, P - S + 1>();
        if constexpr (EDGE) {
            float(&a)[C] = slot<S - 1, P - S - 1>();
            const int gy = y0 - K + t - S;
            if (gy == 0)
                ghost_row(a, m, b);
            if (gy == h - 1)
                ghost_row(b, m, a);
            if (x0 < 0)
                ghost_left(m);
            if (w - x0 < W)
                ghost_right(m);
        }
        const float west = __shfl_up_sync(0xffffffffu, m[C - 1], 1);
        float fw[C], fs[C];
#pragma unroll
        for (int c = 0; c < C; c++) {
            fw[c] = flux_of<KIND>(inv_k, __fsub_rn(c > 0 ? m[c - 1] : west, m[c]));
            fs[c] = flux_of<KIND>(inv_k, __fsub_rn(b[c], m[c]));
        }
        const float east = __shfl_down_sync(0xffffffffu, fw[0], 1);
        float r[C];
#pragma unroll
        for (int c = 0; c < C; c++) {
            float fn;
            if constexpr (EDGE)
                fn = flux_of<KIND>(inv_k, __fsub_rn((slot<S - 1, P - S - 1>())[c], m[c]));
            else
                fn = -south[S - 1][c];
            r[c] = combine(step, m[c], fn, fs[c], fw[c], -(c < C - 1 ? fw[c + 1] : east));
            if constexpr (!EDGE)
                south[S - 1][c] = fs[c];
        }
#pragma unroll
        for (int c = 0; c < C; c++) {
            if constexpr (S < K)
                (slot<S, P - S>())[c] = r[c];
            else
                result[c] = r[c];
        }
    }

    template <int S, int P>
    __device__ __forceinline__ void levels(int t)
    {
        if constexpr (S <= K) {
            level<S, P>(t);
            levels<S + 1, P>(t);
        }
    }

    /* Input row t (t % kUnroll == P): level 1, then row t + kAhead loads
     * into the slot of row t - 2, which level 1 no longer reads, while
     * levels 2..K run; level K's row is stored once it is one of the
     * chunk's. */
    template <int P>
    __device__ __forceinline__ void row(int t)
    {
        level<1, P>(t);
        if (t + kAhead < rows)
            load(t + kAhead, slot<0, P + kAhead>());
        levels<2, P>(t);
        if (t >= 2 * K)
            store(result);
    }

    template <int P>
    __device__ __forceinline__ void unrolled(int t)
    {
        if constexpr (P < kUnroll) {
            row<P>(t + P);
            unrolled<P + 1>(t);
        }
    }

    template <int P>
    __device__ __forceinline__ void tail(int t)
    {
        if constexpr (P < kUnroll - 1) {
            if (t + P < rows) {
                row<P>(t + P);
                tail<P + 1>(t);
            }
        }
    }

    /* Input rows 0..2K-1 fill the pipeline: level s is valid from input row
     * 2s on (at its row s); the values before, from the zeros the state
     * starts with, are never stored nor read by a valid cell, and the
     * north flux a level keeps is valid from its first valid row on. */
    __device__ __forceinline__ void run()
    {
#pragma unroll
        for (int c = 0; c < C; c++) {
#pragma unroll
            for (int r = 0; r < kIn; r++)
                in[r][c] = 0.0f;
#pragma unroll
            for (int s = 0; s < K; s++) {
                south[s][c] = 0.0f;
#pragma unroll
                for (int r = 0; r < kSlots; r++)
                    v[s][r][c] = 0.0f;
            }
        }
#pragma unroll
        for (int r = 0; r < kAhead; r++)  /* rows >= 2K + 1 >= 3 */
            load(r, in[r]);
        int t = 0;
#pragma unroll 1
        for (; t + kUnroll <= rows; t += kUnroll)
            unrolled<0>(t);
        tail<0>(t);
    }
};

/* Item g of a launch's layout (diffuse_gpu.h): the interior strips' long
 * chunks, then the first and last strips' chunks, then the interior
 * strips' short chunks above and below the long ones; within each, the
 * strip varies fastest, then the plane. */
struct stream_item {
    int strip, plane, y0, rows;
};

__device__ __forceinline__ stream_item item_of(const diffuse_stream_layout &l, int height, int g)
{
    const int edges = min(l.strips, 2), interior = l.strips - edges;
    const int long_items = interior * l.planes * l.long_n;
    const int chunks = (height + l.chunk_h - 1) / l.chunk_h;
    const int edge_items = edges * l.planes * chunks;
    stream_item it;
    if (g < long_items) {
        const int r = g / interior;
        it.strip = 1 + g % interior;
        it.plane = r % l.planes;
        it.y0 = l.long_y + r / l.planes * l.long_h;
        it.rows = l.long_h;
        return it;
    }
    g -= long_items;
    if (g < edge_items) {
        const int r = g / edges;
        it.strip = g % edges ? l.strips - 1 : 0;
        it.plane = r % l.planes;
        it.y0 = r / l.planes * l.chunk_h;
        it.rows = min(l.chunk_h, height - it.y0);
        return it;
    }
    g -= edge_items;
    const int r = g / interior, j = r / l.planes;
    const int top = (l.long_y + l.chunk_h - 1) / l.chunk_h, rest = l.long_y + l.long_n * l.long_h;
    it.strip = 1 + g % interior;
    it.plane = r % l.planes;
    it.y0 = j < top ? j * l.chunk_h : rest + (j - top) * l.chunk_h;
    it.rows = min(l.chunk_h, (j < top ? l.long_y : height) - it.y0);
    return it;
}

template <int K, int C, int KIND>
__global__ void __launch_bounds__(32 * kStreamWarps) __maxnreg__(stream_registers(K, C, KIND))
    steps_stream(diffuse_params p, const float *__restrict__ cur, float *__restrict__ next,
                 diffuse_stream_layout layout)
{
    const int g = (int)(blockIdx.x * kStreamWarps + threadIdx.x / 32);
    if (g >= layout.items)
        return;
    const stream_item it = item_of(layout, p.height, g);
    const int x0 = it.strip * (32 * C - 2 * K) - K;
    const bool inside = x0 >= 0 && x0 + 32 * C <= p.width && it.y0 >= K && it.y0 + it.rows + K <= p.height;
    const size_t offset = (size_t)p.width * (size_t)p.height * (size_t)it.plane;
    if (inside || p.border == GF_BORDER_WRAP) {
        stream_warp<K, C, KIND, false> s;
        s.init(p, cur + offset, next + offset, x0, it.y0, it.rows, inside);
        s.run();
    } else {
        stream_warp<K, C, KIND, true> s;
        s.init(p, cur + offset, next + offset, x0, it.y0, it.rows, false);
        s.run();
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

template <int K, int C>
const void *stream_kernel(int kind)
{
    return kind == GF_DIFFUSE_HEAT     ? (const void *)steps_stream<K, C, GF_DIFFUSE_HEAT>
           : kind == GF_DIFFUSE_PM_EXP ? (const void *)steps_stream<K, C, GF_DIFFUSE_PM_EXP>
                                       : (const void *)steps_stream<K, C, GF_DIFFUSE_PM_RATIONAL>;
}

template <int K>
const void *stream_width(int strip_w, int kind)
{
    return strip_w == 64 ? stream_kernel<K, 2>(kind) : strip_w == 128 ? stream_kernel<K, 4>(kind) : nullptr;
}

const void *stream_for(int k, int strip_w, int kind)
{
    switch (k) {
    case 1: return stream_width<1>(strip_w, kind);
    case 2: return stream_width<2>(strip_w, kind);
    case 3: return stream_width<3>(strip_w, kind);
    case 4: return stream_width<4>(strip_w, kind);
    case 5: return stream_width<5>(strip_w, kind);
    case 6: return stream_width<6>(strip_w, kind);
    case 7: return stream_width<7>(strip_w, kind);
    case 8: return stream_width<8>(strip_w, kind);
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

int diffuse_stream_strips(int width, int k, int strip_w)
{
    return tiles(width, strip_w - 2 * k);
}

cudaError_t diffuse_stream_blocks_per_sm(int kind, int k, int strip_w, int *blocks)
{
    const void *kernel = stream_for(k, strip_w, kind);
    *blocks = 0;
    if (!kernel)
        return cudaErrorInvalidValue;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, 32 * kStreamWarps, 0);
}

cudaError_t diffuse_stream_wave(int kind, int k, int strip_w, long long *warps)
{
    const char *given = getenv("GPUFILTER_DIFFUSE_WAVE");
    if (given && atoll(given) > 0) {
        *warps = atoll(given);
        return cudaSuccess;
    }
    int blocks = 0, device = 0, sms = 0;
    cudaError_t err = diffuse_stream_blocks_per_sm(kind, k, strip_w, &blocks);
    if (err == cudaSuccess)
        err = cudaGetDevice(&device);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    *warps = (long long)blocks * kStreamWarps * sms;
    return err;
}

int diffuse_stream_layout_for(int width, int height, int planes, int k, int strip_w, int chunk_h,
                              long long resident, diffuse_stream_layout *layout)
{
    const int strips = diffuse_stream_strips(width, k, strip_w), interior = strips - min(strips, 2);
    diffuse_stream_layout l = {strips, planes, chunk_h, 0, 0, 0, 0};
    /* the long chunks: as many a strip and plane as one wave holds, over
     * about four fifths of the rows below the first chunk */
    const long long across = (long long)interior * planes;
    const long long per_strip = across ? resident / across : 0;
    if (per_strip > 0 && height > 2 * chunk_h) {
        const long long long_h = 4 * (height - 2LL * chunk_h) / (5 * per_strip);
        if (long_h >= 2 * chunk_h) {
            l.long_n = (int)per_strip;
            l.long_h = (int)long_h;
            l.long_y = chunk_h;
        }
    }
    const long long chunks = tiles(height, chunk_h);
    const long long rest = height - (l.long_y + (long long)l.long_n * l.long_h);
    const long long items = across * l.long_n + (long long)min(strips, 2) * planes * chunks +
                            across * (tiles(l.long_y, chunk_h) + tiles((int)rest, chunk_h));
    if (items > INT_MAX - kStreamWarps)
        return -1;
    l.items = (int)items;
    *layout = l;
    return 0;
}

cudaError_t diffuse_steps_stream(const diffuse_params *p, const float *cur, float *next, int k,
                                 int strip_w, int chunk_h, cudaStream_t stream)
{
    const void *kernel = stream_for(k, strip_w, p->kind);
    if (!kernel || chunk_h < 1)
        return cudaErrorInvalidValue;
    long long wave = 0;
    const cudaError_t err = diffuse_stream_wave(p->kind, k, strip_w, &wave);
    if (err != cudaSuccess)
        return err;
    diffuse_stream_layout layout;
    if (diffuse_stream_layout_for(p->width, p->height, p->planes, k, strip_w, chunk_h,
                                  wave, &layout) != 0)
        return cudaErrorInvalidValue;
    diffuse_params params = *p;
    void *args[] = {&params, (void *)&cur, (void *)&next, &layout};
    const dim3 grid((unsigned)((layout.items + kStreamWarps - 1) / kStreamWarps));
    return cudaLaunchKernel(kernel, grid, dim3(32 * kStreamWarps), args, 0, stream);
}

cudaError_t diffuse_run(const diffuse_params *p, float *planes[2], int iterations, int version,
                        int k, int tile_w, int tile_h, int *result, cudaStream_t stream)
{
    const int many = version == DIFFUSE_TEMPORAL || version == DIFFUSE_STREAM;
    int cur = 0;
    for (int done = 0; done < iterations;) {
        const int steps = many ? (iterations - done < k ? iterations - done : k) : 1;
        cudaError_t err;
        if (version == DIFFUSE_GLOBAL)
            err = diffuse_step_global(p, planes[cur], planes[!cur], stream);
        else if (version == DIFFUSE_STREAM)
            err = diffuse_steps_stream(p, planes[cur], planes[!cur], steps, tile_w, tile_h, stream);
        else
            err = diffuse_steps_tiled(p, planes[cur], planes[!cur], steps, tile_w, tile_h, stream);
        if (err != cudaSuccess)
            return err;
        cur = !cur;
        done += steps;
    }
    *result = cur;
    return cudaSuccess;
}

}  /* extern "C" */
