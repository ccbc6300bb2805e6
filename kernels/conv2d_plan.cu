/* conv2d_plan.cu - the planner of the 2-D correlation's versions 2 to 4:
 * for a launch, the instantiation (conv2d_variant_table, from conv2d.cu: the
 * only way to the kernels), the block, the shared memory and the grid, and
 * the weights and header the kernel reads (conv2d_make_plan, in steps:
 * pick the variant, lay out the block, fill the header, pack the weights,
 * choose the scaling mode, size the grid). conv2d_query.cu answers
 * kernels.h's conv2d_* functions from it.
 *
 * One plan a launch (and one a candidate of the tile rule): what it reads
 * of the mask's weights comes made (conv2d_mask_facts, once a mask); the
 * answers of the device queries it needs (occupancy, the tensor cores' PTX
 * version, a kernel's raised shared-memory limit) and of the bank-conflict
 * searches of versions 2 and 3 are kept per host thread, since every launch
 * asks them again. A query that fails, or an error pending from earlier
 * work, makes the plan take its device-independent choice instead. The
 * family headers are included for their sizing rules (rows a thread, ring
 * slots, shared bytes), which the plan and the kernels must agree on; no
 * kernel is instantiated here. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "conv2d_tiled.cuh"
#include "conv2d_direct.cuh"
#include "conv2d_scan.cuh"
#include "conv2d_mma.cuh"
#include "conv2d_stream.cuh"
#include "conv2d_plan.cuh"
#include "conv2d_planner.h"
#include "conv2d_weights.h"

/* ---- dispatch ------------------------------------------------------------- */

/* The last N answers of a host-side query (each user keeps one static
 * thread_local): the first entry a predicate accepts, or the oldest slot
 * for a new answer. */
template <class Entry, int N>
struct conv2d_recent {
    Entry entries[N];
    int count = 0, next = 0;

    template <class Match>
    const Entry *find(Match match) const
    {
        for (int i = 0; i < count; i++)
            if (match(entries[i]))
                return &entries[i];
        return nullptr;
    }
    Entry &add()
    {
        Entry &e = entries[next];
        next = (next + 1) % N;
        count = count < N ? count + 1 : N;
        return e;
    }
};

/* The shared-memory opt-in of a kernel that needs more than 48 KB: its
 * limit raised to all that a block of the device may have (less its static
 * shared memory), never to the launch's own bytes. The limit belongs to the
 * kernel, not to a launch, and the batch's workers choose tiles and launch
 * at the same time: one setting it to a candidate tile's bytes while
 * another launched with more failed that launch ("invalid argument"). Once
 * per kernel and device in each host thread. */
extern "C" cudaError_t conv2d_allow_shared(const void *entry, size_t shared)
{
    struct raised {
        const void *entry;
        int dev;
    };
    static thread_local conv2d_recent<raised, 32> done;
    if (shared <= 48 * 1024)
        return cudaSuccess;
    int dev = 0, optin = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess)
        return err;
    if (done.find([&](const raised &r) { return r.entry == entry && r.dev == dev; }))
        return cudaSuccess;
    cudaFuncAttributes fa;
    if ((err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) !=
            cudaSuccess ||
        (err = cudaFuncGetAttributes(&fa, entry)) != cudaSuccess ||
        (err = cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    optin - (int)fa.sharedSizeBytes)) != cudaSuccess)
        return err;
    done.add() = raised{entry, dev};
    return cudaSuccess;
}

/* Device queries made while planning. An error already pending from
 * earlier work is left for its owner to report: with one pending, no query
 * is made and the plan takes its device-independent choice. A query's own
 * failure is cleared, so that the launch does not report it. */
static bool conv2d_error_pending()
{
    return cudaPeekAtLastError() != cudaSuccess;
}

static bool conv2d_query_failed()
{
    cudaGetLastError();
    return false;
}

/* Test hook (GPUFILTER_TEST_FAULT=query): every planning query fails. */
static bool conv2d_queries_fail = false;

extern "C" void conv2d_fail_queries(int fail)
{
    conv2d_queries_fail = fail != 0;
}

bool conv2d_device_sms(int *dev, int *sms)
{
    if (conv2d_queries_fail || conv2d_error_pending())
        return false;
    if (cudaGetDevice(dev) != cudaSuccess ||
        cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, *dev) != cudaSuccess)
        return conv2d_query_failed();
    return *sms > 0;
}

const conv2d_variant *conv2d_find(int version, int C, int CF, int K, int M, int ws, unsigned zero, int mode)
{
    int count = 0;
    const conv2d_variant *variants = conv2d_variant_table(&count);
    for (int i = 0; i < count; i++) {
        const conv2d_variant &v = variants[i];
        if (v.version == version && v.C == C && v.CF == CF && v.K == K && v.MW == M &&
            v.ws == ws && v.zero == zero && v.mode == mode)
            return &v;
    }
    return NULL;
}

/* Shared-memory wavefronts of one warp accessing pixel slots of 'cp' floats
 * (the bank model: a 16-byte access is served 8 threads at a time, 8-byte
 * 16 at a time, 4-byte 32 at a time; a phase takes as many wavefronts as
 * the most distinct words one bank holds). */
static int conv2d_wavefronts(const int *slot, int threads, int cp)
{
    const int phase = 32 / cp;
    int total = 0;
    for (int p0 = 0; p0 < threads; p0 += phase) {
        int words[32][32], count[32] = {0}, worst = 1;
        for (int t = p0; t < p0 + phase && t < threads; t++)
            for (int f = 0; f < cp; f++) {
                const int word = slot[t] * cp + f, bank = word & 31;
                bool seen = false;
                for (int i = 0; i < count[bank]; i++)
                    seen = seen || words[bank][i] == word;
                if (!seen && count[bank] < 32)
                    words[bank][count[bank]++] = word;
                if (count[bank] > worst)
                    worst = count[bank];
            }
        total += worst;
    }
    return total;
}

/* The two searches below try 32 strides through conv2d_wavefronts each:
 * with them a launch call of version 3 took 50 to 130 us of host time in
 * the bench (version 2: 5 to 20), since conv2d_gpu plans every launch.
 * Pure functions of their arguments, so their answers are kept per host
 * thread. */
struct conv2d_stride_answer {
    int args[5], stride;
};

template <class Search>
static int conv2d_kept_stride(conv2d_recent<conv2d_stride_answer, 16> &known, const int (&args)[5],
                              Search search)
{
    if (const conv2d_stride_answer *a = known.find([&](const conv2d_stride_answer &e) {
            return memcmp(e.args, args, sizeof args) == 0;
        }))
        return a->stride;
    const int stride = search();
    conv2d_stride_answer &a = known.add();
    memcpy(a.args, args, sizeof args);
    a.stride = stride;
    return stride;
}

/* A row stride (in slots) >= 'least' for which warp 0's reads are
 * conflict-free (or the least bad): thread t reads slot
 * (t / per_row) * rows_apart * stride + t % per_row. */
static int conv2d_search_row_stride(int least, int per_row, int rows_apart, int threads, int cp)
{
    int best = least, best_cost = 1 << 30;
    const int n = threads < 32 ? threads : 32;
    for (int stride = least; stride < least + 32; stride++) {
        int slot[32];
        for (int t = 0; t < n; t++)
            slot[t] = (t / per_row) * rows_apart * stride + t % per_row;
        const int cost = conv2d_wavefronts(slot, n, cp);
        if (cost < best_cost) {
            best = stride;
            best_cost = cost;
        }
    }
    return best;
}

static int conv2d_row_stride(int least, int per_row, int rows_apart, int threads, int cp)
{
    static thread_local conv2d_recent<conv2d_stride_answer, 16> known;
    return conv2d_kept_stride(known, {least, per_row, rows_apart, threads, cp}, [&] {
        return conv2d_search_row_stride(least, per_row, rows_apart, threads, cp);
    });
}

/* Version 3's ring stride: the row pass writes (thread t: row t / per_row,
 * columns 8 (t % per_row) + q, swizzled) and the column pass reads (thread
 * t: row 8 (t / tw), column t % tw, swizzled), both as conflict-free as
 * possible. */
static int conv2d_search_ring_stride(int tw, int threads, int cp)
{
    const int n = 32 / cp, ln = n == 8 ? 3 : n == 16 ? 4 : 5;
    auto swz = [&](int x) { return x ^ ((x >> ln) & (n - 1)); };
    const int least = (tw + n - 1) / n * n, per_row = tw / 8, warp = threads < 32 ? threads : 32;
    int best = least, best_cost = 1 << 30;
    for (int stride = least; stride < least + 32; stride++) {
        int slot[32], cost = 0;
        for (int q = 0; q < 8; q++) {
            for (int t = 0; t < warp; t++)
                slot[t] = (t / per_row) * stride + swz(8 * (t % per_row) + q);
            cost += conv2d_wavefronts(slot, warp, cp);
        }
        for (int t = 0; t < warp; t++)
            slot[t] = 8 * (t / tw) * stride + swz(t % tw);
        cost += 8 * conv2d_wavefronts(slot, warp, cp);
        if (cost < best_cost) {
            best = stride;
            best_cost = cost;
        }
    }
    return best;
}

static int conv2d_ring_stride(int tw, int threads, int cp)
{
    static thread_local conv2d_recent<conv2d_stride_answer, 16> known;
    return conv2d_kept_stride(known, {tw, threads, cp, 0, 0},
                              [&] { return conv2d_search_ring_stride(tw, threads, cp); });
}

/* Whether s is an odd integer d, 3 <= |d| < 2^22 (MODE_DIV_ODD) */
static bool conv2d_odd_divisor(float s)
{
    const float d = fabsf(s);
    return d >= 3.0f && d < 0x1p22f && fmodf(d, 2.0f) == 1.0f;  /* exact: no rounding */
}

/* Whether conv2d_div may divide matrix k's sums by its scale (else
 * __fdiv_rn): the scale, the largest possible sum (255 times the sum of
 * |weights|) and its quotient within 2^100 in magnitude, so that no step
 * overflows, and no nonzero weight below 2^-20, so that a nonzero sum (a
 * multiple of 2^-44 at least) stays clear of the denormals. */
static bool conv2d_div_range(const conv2d_launch *p, int k, float inv)
{
    const float s = fabsf(p->scale[k]);
    if (!p->host_weights || !(s >= 0x1p-100f && s <= 0x1p100f))
        return false;
    const int taps = p->mask_width * p->mask_height;
    double total = 0.0, least = 1.0;
    for (int i = 0; i < taps; i++) {
        const double w = fabs((double)p->host_weights[k * taps + i]);
        total += w;
        if (w != 0.0 && w < least)
            least = w;
    }
    const double top = 255.0 * total;
    return top < 0x1p100 && top * fabs((double)inv) < 0x1p100 && least >= 0x1p-20;
}

static_assert(CONV2D_MAX_MATRICES == 4 && kMaxMask == 31, "kernels.h's conv2d_mask_facts arrays");

extern "C" void conv2d_mask_facts_make(const conv2d_launch *p, conv2d_mask_facts *f)
{
    const int K = p->mask_count, mw = p->mask_width, mh = p->mask_height, taps = mw * mh;
    f->host_weights = p->host_weights;
    f->mask_count = K;
    f->mask_width = mw;
    f->mask_height = mh;
    float inv[CONV2D_MAX_MATRICES];
    for (int k = 0; k < K; k++)
        inv[k] = 1.0f / p->scale[k];
    f->short_weights = conv2d_short_weights(p->host_weights, K, taps);
    f->byte_weights = conv2d_byte_weights(p->host_weights, K * taps);
    f->factors = conv2d_integer_factors(p->host_weights, mw, mh, f->row, f->column);
    f->prescalable = conv2d_prescalable(p, K, taps, inv);
    f->in_range = conv2d_in_range(p->host_weights, taps, p->scale[0]);
    for (int k = 0; k < K; k++)
        f->div_range[k] = conv2d_div_range(p, k, inv[k]);
}

/* p's facts: the caller's where they were made for this launch's weights
 * and mask, else made into own. p checked by the caller (1..4 matrices of
 * at most kMaxMask square, host weights given). */
static const conv2d_mask_facts *conv2d_facts(const conv2d_launch *p, conv2d_mask_facts *own)
{
    const conv2d_mask_facts *f = p->facts;
    if (f && f->host_weights == p->host_weights && f->mask_count == p->mask_count &&
        f->mask_width == p->mask_width && f->mask_height == p->mask_height)
        return f;
    conv2d_mask_facts_make(p, own);
    return own;
}

/* Blocks of a plan's kernel that the device holds at once: blocks per SM
 * from the occupancy API times the SMs; 0 when a query fails. Cached per
 * host thread (conv2d_gpu plans every launch, and the bench times the
 * launch call). */
long long conv2d_resident_blocks(const conv2d_plan &pl, int threads)
{
    struct known {
        const void *entry;
        int threads, dev;
        size_t shared;
        long long blocks;
    };
    static thread_local conv2d_recent<known, 16> answers;
    int dev = 0, sms = 0, per_sm = 0;
    if (conv2d_queries_fail || conv2d_error_pending())
        return 0;
    if (cudaGetDevice(&dev) != cudaSuccess)
        return conv2d_query_failed();
    /* the answer known: no more queries on this path, which every launch takes */
    if (const known *k = answers.find([&](const known &e) {
            return e.entry == pl.v->entry && e.threads == threads && e.dev == dev &&
                   e.shared == pl.shared;
        }))
        return k->blocks;
    if (!conv2d_device_sms(&dev, &sms) || conv2d_allow_shared(pl.v->entry, pl.shared) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pl.v->entry, threads, pl.shared) !=
            cudaSuccess)
        return conv2d_query_failed();
    answers.add() = known{pl.v->entry, threads, dev, pl.shared, (long long)per_sm * sms};
    return (long long)per_sm * sms;
}

/* Version 4's tiles per block (h.steps), walking down: each thread's rows
 * go on down its own ring from one tile to the next, so a strip pays the
 * M - 1 halo rows and the setup once. The count minimises the row steps on
 * the critical path, waves x (steps x rows + halo), the waves being the
 * grid over the blocks the device holds at once: on 132 SMs at 3 blocks
 * each, 8192x8192 gray 3x3 (tile 256x64) goes from 4096 blocks, 11 waves
 * (the last a third full) of 10 row steps, to 384 blocks, one wave of 90.
 * Ties go to fewer steps; grid.y stays within 65535. */
static long long conv2d_steps4(long long grid_x, long long tiles_y, int rows, int halo,
                               long long resident)
{
    long long best = (tiles_y + 65534) / 65535, best_cost = -1;
    if (best < 1)
        best = 1;
    if (resident < 1)
        return best;
    for (long long s = best; s <= tiles_y; s++) {
        const long long blocks = grid_x * ((tiles_y + s - 1) / s);
        const long long cost = (blocks + resident - 1) / resident * (s * rows + halo);
        if (best_cost < 0 || cost < best_cost) {
            best = s;
            best_cost = cost;
        }
        if (blocks <= resident)
            break;  /* one wave: more steps only make it longer */
    }
    return best;
}

/* Version 4's grid: one tile per block, or, where the grid would run past
 * the blocks the device holds at once, each block walking down h.steps
 * tiles (conv2d_steps4) with the columns of threads off the fast path (the
 * image's edges, whose rows are gathered at a memory latency each) given
 * to edge blocks ahead of the others, one tile of rows per unit, so that
 * no strip is latency-bound. Images whose rows are not aligned for the
 * fast path keep one tile per block. */
static bool conv2d_strips4(const conv2d_launch *p, conv2d_plan *pl, long long grid_x,
                           long long tiles_y, int threads)
{
    fast_header &h = pl->h;
    const int C = p->channels, Q = pl->v->Q, P = pl->v->P, M = p->mask_width;
    /* the columns of threads off the fast path (conv2d_body4's 'fast'):
     * the first 'left', and those from right0 on */
    const int sw = conv2d_halo4_words(C, M);
    const long long cols = (p->width + Q - 1) / Q;             /* columns of threads */
    const long long left = (4 * sw + Q * C - 1) / (Q * C);     /* x * C < 4 sw */
    const long long right0 = ((long long)p->width * C - 4 * sw) / (Q * C);  /* then past the row */
    h.steps = 1;
    h.edge_rows = h.edge_cols = h.edge_left = h.edge_right0 = 0;
    pl->grid = dim3((unsigned)grid_x, (unsigned)tiles_y);
    if (!conv2d_strips_ok4(C, M, pl->v->ws) || !h.aligned || right0 < left)
        return tiles_y <= 65535;
    const long long resident = conv2d_resident_blocks(*pl, threads);
    if (resident < 1 || grid_x * tiles_y <= resident)
        return tiles_y <= 65535;
    const long long edge_cols = left + cols - right0;
    const long long edge_blocks = (edge_cols * ((p->height + P - 1) / P) + threads - 1) / threads;
    const long long edge_rows = (edge_blocks + grid_x - 1) / grid_x;
    const long long steps = conv2d_steps4(grid_x, tiles_y, P, M - 1, resident - edge_blocks);
    const long long grid_y = edge_rows + (tiles_y + steps - 1) / steps;
    if (steps < 2 || 2 * edge_blocks >= resident || grid_y > 65535)
        return tiles_y <= 65535;
    h.steps = (int)steps;
    h.edge_rows = (int)edge_rows;
    h.edge_cols = (int)edge_cols;
    h.edge_left = (int)left;
    h.edge_right0 = (int)right0;
    pl->grid = dim3((unsigned)grid_x, (unsigned)grid_y);
    return true;
}

/* Whether a tile suits the prefix sums across a warp (Q pixels a thread):
 * blocks of whole warps, at most kMaxThreads. */
static bool conv2d_scan_tile(int Q, int TW, int TH)
{
    const int threads = TW / Q * TH;
    return TW % Q == 0 && TW >= Q && TH >= 1 && threads % 32 == 0 && threads <= kMaxThreads;
}

/* The prefix sums' grid: one warp for each column of conv2d_scan_outputs
 * pixels and strip of rows, h.steps rows a warp walks down, in groups of
 * kScanRows4: as many as conv2d_steps4 finds best for the warps the device
 * holds at once (each strip's first M - 1 rows feed its sums before its
 * first output); the blocks in one row of the grid. The strips do not
 * follow the tile's height: strips of the tile's height can leave a
 * quarter of the warps the device holds idle. */

static bool conv2d_scan_grid4(const conv2d_launch *p, conv2d_plan *pl, int threads)
{
    fast_header &h = pl->h;
    const int out = conv2d_scan_outputs(p->channels, p->mask_width);
    const long long columns = (p->width + out - 1) / out, per_block = threads / 32;
    const long long steps = conv2d_steps4(columns, (p->height + kScanRows4 - 1) / kScanRows4,
                                          kScanRows4, p->mask_width - 1,
                                          conv2d_resident_blocks(*pl, threads) * per_block);
    h.steps = (int)(steps * kScanRows4);
    h.edge_rows = h.edge_cols = h.edge_left = h.edge_right0 = 0;
    const long long warps = columns * ((p->height + h.steps - 1) / h.steps);
    pl->grid = dim3((unsigned)((warps + per_block - 1) / per_block), 1);
    return (warps + per_block - 1) / per_block <= 0x7FFFFFFF;
}

/* Whether the path's kernels run on the current device with the 8-bit
 * mma.sync: their code came from PTX of compute capability 8.0 or above
 * (cudaFuncAttributes' ptxVersion), which also means a device of 8.0 or
 * above. The default build carries Hopper code and compute_75 PTX: an
 * Ampere or Ada GPU compiles the kernels from that PTX at start, without
 * the mma (they would trap), so the path is left to the others there.
 * Every kernel comes from the same -gencode flags, so the question goes
 * to the naive gray kernel in conv2d.cu's own small module: asking a
 * tensor-core kernel would load its whole set (a module loads at its
 * first use), the gray set for an RGBA call. */
static bool conv2d_mma_device()
{
    static thread_local int known_dev = -1;
    static thread_local bool known_usable = false;
    int dev = 0;
    if (conv2d_queries_fail || conv2d_error_pending())
        return false;
    if (cudaGetDevice(&dev) != cudaSuccess)
        return conv2d_query_failed();
    if (dev != known_dev) {
        cudaFuncAttributes fa;
        if (cudaFuncGetAttributes(&fa, (const void *)conv2d_entry_for(0, 1)) != cudaSuccess)
            return conv2d_query_failed();
        known_dev = dev;
        known_usable = fa.ptxVersion >= 80;
    }
    return known_usable;
}

/* The tiles kMma4 takes: rows of 16 to 256 bytes, a power of two (m-tiles
 * of 16 bytes, output pieces of 16), and a multiple of 16 rows, at most
 * 128 (whether the device has the shared memory is the launcher's check,
 * as for every version: at most 218 KB, RGBA 31x31 at 64x128). */
static bool conv2d_mma_tile(int C, int TW, int TH)
{
    const int bytes = TW * C;
    return bytes >= 16 && bytes <= 256 && (bytes & (bytes - 1)) == 0 && TH >= 16 && TH <= 128 &&
           TH % 16 == 0;
}

/* kMma4's persistent grid: as many blocks as the device holds at once, at
 * most one a tile; h.steps the tiles a block walks at most. */
static bool conv2d_mma_grid(const conv2d_launch *p, conv2d_plan *pl, int threads)
{
    const long long tiles = (long long)((p->width + p->tile_width - 1) / p->tile_width) *
                            ((p->height + p->tile_height - 1) / p->tile_height);
    const long long resident = conv2d_resident_blocks(*pl, threads);
    const long long blocks = resident < 1 || resident > tiles ? tiles : resident;
    pl->h.steps = (int)((tiles + blocks - 1) / blocks);
    pl->h.edge_rows = pl->h.edge_cols = pl->h.edge_left = pl->h.edge_right0 = 0;
    pl->grid = dim3((unsigned)blocks, 1);
    return tiles <= 0x7FFFFFFF;
}

bool conv2d_stream4(int dp)
{
    return dp >= kStream4 && dp < kStream4 + kStreamShapes;
}

/* Whether a 3x3 mask that factors, in range, suits the row streams
 * (kStream4): a column and a row of integers 0..255 whose products' sums
 * stay in 16-bit lanes (255 * sum(column) * sum(row) < 2^16), scaled by a
 * power of two up to 2^8 (quick: prescaled, no offset) or by an odd integer
 * below 2^15 (odd, no offset), gray or RGBA rows of whole 16-byte words
 * from 16-byte aligned buffers (conv2d_stream.cuh). */
static bool conv2d_stream_fits(const conv2d_launch *p, const conv2d_mask_facts *facts, bool quick,
                               bool odd)
{
    double rows = 0.0, columns = 0.0;
    if (!conv2d_byte_factors(facts->row, facts->column, 3, &rows, &columns))
        return false;
    const float s = p->scale[0];
    const bool scale = (quick && s >= 1.0f && s <= 256.0f) || (odd && s < 32768.0f);
    return scale && 255.0 * rows * columns < 65536.0 && (p->channels == 1 || p->channels == 4) &&
           (size_t)p->width * p->channels % 16 == 0 &&
           (((uintptr_t)p->src | (uintptr_t)p->dst) & 15) == 0;
}

/* The tiles kStream4 takes: groups of 8, 16 or 32 lanes across, or whole
 * warps (tile_width * C / 16 threads, a power of two from 8), each lane
 * kStreamRows4 rows: tile_height a multiple of them. */
static bool conv2d_stream_tile(int C, int TW, int TH)
{
    const int lanes = TW * C / 16;
    return TW * C % 16 == 0 && lanes >= 8 && (lanes & (lanes - 1)) == 0 && TH >= kStreamRows4 &&
           TH % kStreamRows4 == 0;
}

/* What choosing the variant learns for the later steps of a plan. */
struct conv2d_choice {
    const conv2d_mask_facts *facts;  /* NULL without host weights */
    int cf, CF;                      /* channels filtered: as given (clamped), the template's */
    float row[kMaxMask], column[kMaxMask];
    bool have_factors;               /* row x column, in row and column */
    bool in_range;                   /* version 4: outputs in 0..255, where prescaled or odd */
    bool mma, row_streams;           /* version 4: the tensor cores, the row streams */
    int threads;
};

/* Version 2: the fixed-size kernels for 3x3 (up to two matrices), 5x5 and
 * 7x7 (one), weights in the parameters unless they do not fit. */
static bool conv2d_pick2(const conv2d_launch *p, conv2d_plan *pl, const conv2d_choice &ch)
{
    const int K = p->mask_count, mw = p->mask_width, mh = p->mask_height;
    const bool host = p->host_weights != NULL;
    const bool fixed = host && mw == mh && ((mw == 3 && K <= 2) || ((mw == 5 || mw == 7) && K == 1));
    const bool ws = !host || K * mw * mh > kParamWeights;
    if (ws && !p->weights)
        return false;
    pl->v = conv2d_find(2, p->channels, ch.CF, K, fixed ? mw : 0, ws);
    const int TW = p->tile_width, TH = p->tile_height;
    return TW >= 8 && TH >= 4 && TW % 8 == 0 && TH % 4 == 0;
}

/* Version 3: one matrix as a column times a row, from the host weights'
 * integer factors, the row and column given on the host, or (weights in
 * shared memory) on the device only. */
static bool conv2d_pick3(const conv2d_launch *p, conv2d_plan *pl, conv2d_choice &ch)
{
    const int mw = p->mask_width, mh = p->mask_height;
    if (p->mask_count != 1)
        return false;
    if (ch.facts && ch.facts->factors) {
        memcpy(ch.row, ch.facts->row, mw * sizeof(float));
        memcpy(ch.column, ch.facts->column, mh * sizeof(float));
        ch.have_factors = true;
    } else if (p->host_row_weights && p->host_column_weights) {
        for (int x = 0; x < mw; x++)
            ch.row[x] = p->host_row_weights[x];
        for (int y = 0; y < mh; y++)
            ch.column[y] = p->host_column_weights[y];
        ch.have_factors = true;
    } else if (!p->row_weights || !p->column_weights) {
        return false;
    }
    pl->v = conv2d_find(3, p->channels, ch.CF, 1, 0, !ch.have_factors);
    const int TW = p->tile_width, TH = p->tile_height;
    return TW >= 8 && TH >= 8 && TW % 8 == 0 && TH % 8 == 0;
}

/* Version 4: the first of conv2d_paths4 that applies and has a kernel for
 * this size, layout and mode (a gradient pair in lanes before them all).
 * One matrix (|v| of one matrix excepted), or a gradient pair. */
static bool conv2d_pick4(const conv2d_launch *p, conv2d_plan *pl, conv2d_choice &ch)
{
    const int C = p->channels, K = p->mask_count, mw = p->mask_width, mh = p->mask_height;
    const int TW = p->tile_width, TH = p->tile_height;
    if (!p->host_weights || mw != mh || (K == 1 && p->combine == GF_COMBINE_MAGNITUDE) ||
        (K == 2 && (p->combine != GF_COMBINE_MAGNITUDE || !conv2d_gradient_zeros(p, K, mw))) || K > 2)
        return false;
    const conv2d_mask_facts *facts = ch.facts;
    const unsigned zero = K == 2 ? CONV2D_GRADIENT_ZEROS : 0u;
    const bool integer = (C == 1 || C == 4) && facts->short_weights;
    ch.have_factors = integer && K == 1 && mw >= 5 && facts->factors && conv2d_byte_weights(facts->row, mw);
    if (ch.have_factors) {
        memcpy(ch.row, facts->row, mw * sizeof(float));
        memcpy(ch.column, facts->column, mh * sizeof(float));
    }
    const float *row = ch.row, *column = ch.column;
    const bool no_offset = K == 1 && p->offset[0] == 0.0f;
    const bool quick = no_offset && facts->prescalable;  /* K = 1 */
    const bool odd = no_offset && conv2d_odd_divisor(p->scale[0]);
    /* the modes of the kernels this mask can take, the most specific
     * first: outputs in 0..255, prescaled, any */
    int modes[3], nmodes = 0;
    ch.in_range = (quick || odd) && facts->in_range;
    if (ch.in_range)
        modes[nmodes++] = (quick ? MODE_PRESCALED_NO_OFFSET : MODE_DIV_ODD) + kInRange;
    if (quick)
        modes[nmodes++] = MODE_PRESCALED_NO_OFFSET;
    modes[nmodes++] = kModeAny;
    const bool box = ch.have_factors && conv2d_ones(column, mh) && conv2d_ones(row, mw);
    /* the tensor cores' kernels copy no channel byte by byte: only
     * gray, or RGBA with alpha copied or filtered */
    const bool mma = ch.have_factors && mw >= kMmaMinMask && ch.cf == ch.CF &&
                     conv2d_mma_weights(row, column, mw) && conv2d_mma_device();
    /* 3x3 masks of a column times a row in range, rows of whole 16-byte
     * words: the row streams (bench/RESULTS.md) */
    const bool stream = integer && K == 1 && mw == 3 && ch.cf == ch.CF && facts->factors &&
                        facts->in_range && conv2d_stream_fits(p, facts, quick, odd);
    const bool stream_binomial =
        stream && conv2d_binomial_column(facts->row, 3) && conv2d_binomial_column(facts->column, 3);
    const bool stream_ones = stream && conv2d_ones(facts->row, 3) && conv2d_ones(facts->column, 3);
    bool applies[kPaths4];
    applies[kPathStreamBinomial] = stream_binomial;
    applies[kPathStreamOnes] = stream_ones;
    applies[kPathStreamAny] = stream;
    /* gray box masks from 11x11 on: the tensor cores before the prefix
     * sums (bench/RESULTS.md) */
    applies[kPathMmaBox] = box && mma;
    applies[kPathBoxScan] = applies[kPathBoxRunning] = box;
    applies[kPathBinomialColumn] = ch.have_factors && conv2d_binomial_column(column, mh);
    applies[kPathOnesColumn] = ch.have_factors && conv2d_ones(column, mh);
    applies[kPathMma] = mma;
    applies[kPathSeparable] = ch.have_factors;
    applies[kPathDp4a] = integer && facts->byte_weights;
    applies[kPathDp2a] = integer;
    applies[kPathFloat] = true;
    const int gradient = conv2d_gradient_index(p, C, K, mw, mh);
    pl->v = gradient < 0 ? NULL
                         : conv2d_find(4, C, ch.CF, K, mw, kGradient4 + gradient, zero, MODE_PRESCALED_NO_OFFSET);
    for (int i = 0; i < kPaths4 && !pl->v; i++)
        for (int m = 0; m < nmodes && applies[i] && (!conv2d_paths4[i].channels || conv2d_paths4[i].channels == C) &&
                        !pl->v;
             m++) {
            const int dp = conv2d_paths4[i].dp;
            pl->v = conv2d_find(4, C, ch.CF, K, mw, dp, zero, modes[m]);
            pl->path = i + 1;
            if (pl->v && dp == kBoxScan4 && !conv2d_scan_tile(pl->v->Q, TW, TH))
                pl->v = NULL;  /* not blocks of whole warps: the paths below */
            if (pl->v && dp == kMma4 && !conv2d_mma_tile(C, TW, TH))
                pl->v = NULL;  /* not a tile of its: the paths below */
            if (pl->v && conv2d_stream4(dp) && !conv2d_stream_tile(C, TW, TH))
                pl->v = NULL;  /* not groups of 8, 16 or 32 lanes: the paths below */
        }
    return pl->v && TW % pl->v->Q == 0 && TH % pl->v->P == 0 && TW >= pl->v->Q && TH >= pl->v->P;
}

/* The block and the shared bytes of the chosen variant at p's tile. */
static bool conv2d_plan_layout(int version, const conv2d_launch *p, conv2d_plan *pl, conv2d_choice &ch)
{
    const int C = p->channels, K = p->mask_count, mw = p->mask_width, mh = p->mask_height;
    const int TW = p->tile_width, TH = p->tile_height;
    const int CP = C == 3 ? 4 : C;
    const int P = pl->v->P, Q = pl->v->Q;
    ch.mma = version == 4 && pl->v->ws == kMma4;  /* blocks of 256 whatever the tile */
    ch.row_streams = version == 4 && conv2d_stream4(pl->v->ws);  /* blocks of up to 1024 */
    const int nx = TW / Q, ny = TH / P;
    const int threads = ch.mma ? kMaxThreads : version == 3 ? TW * (TH / 8) : nx * ny;
    ch.threads = threads;
    if (threads < 1 || threads > (ch.row_streams ? kStreamMaxThreads : kMaxThreads))
        return false;
    pl->block = ch.mma ? dim3(kMaxThreads) : version == 3 ? dim3(TW, TH / 8) : dim3(nx, ny);

    fast_header &h = pl->h;
    memset(&h, 0, sizeof h);
    const int L = TW + mw - 1, R = TH + mh - 1;
    h.lq = (L + Q - 1) / Q;
    if (ch.mma) {
        pl->shared = conv2d_mma_shared(C, mw, TW, TH);
    } else if (ch.row_streams || (version == 4 && pl->v->ws == kBoxScan4)) {
        /* registers and shuffles only */
        pl->shared = 0;
    } else if (version == 4) {  /* each thread's ring of rows */
        pl->shared = (size_t)threads * conv2d_ring_slots4(mw, pl->v->ws) * conv2d_slot_bytes4(C, Q, mw, pl->v->ws);
    } else if (version == 2) {
        h.rs = conv2d_row_stride(Q * h.lq, nx, P, threads, CP);
        pl->shared = (pl->v->ws ? (size_t)((K * mw * mh + 3) & ~3) * sizeof(float) : 0) +
                     (size_t)R * h.rs * CP * sizeof(float);
    } else {
        h.rs = conv2d_row_stride(Q * h.lq, TW / 8, 1, threads, CP);
        h.hrs = conv2d_ring_stride(TW, threads, CP);
        pl->shared = (pl->v->ws ? 64 * sizeof(float) : 0) + ((size_t)TH * h.rs + (size_t)R * h.hrs) * CP * sizeof(float);
    }
    return true;
}

/* The header's image, mask and scaling fields (all but mode and the
 * grid's), and each matrix's 1 / scale into inv. */
static void conv2d_plan_header(int version, const conv2d_launch *p, conv2d_plan *pl, const conv2d_choice &ch,
                               float *inv)
{
    fast_header &h = pl->h;
    const int C = p->channels, K = p->mask_count;
    h.src = p->src;
    h.dst = p->dst;
    h.wdev = p->weights;
    h.rowdev = p->row_weights;
    h.coldev = p->column_weights;
    h.width = p->width;
    h.height = p->height;
    h.border = p->border;
    h.mw = p->mask_width;
    h.mh = p->mask_height;
    h.cf = ch.cf;
    h.tw = p->tile_width;
    h.th = p->tile_height;
    h.flat = ((uintptr_t)p->src & 3) == 0;
    h.vec = (((uintptr_t)p->src | (uintptr_t)p->dst) & 15) == 0;
    {   /* version 4's fast path: its loads aligned in every row */
        const int own = version == 4 ? pl->v->Q * C : 16;
        const size_t align = own % 16 == 0 ? 16 : own % 8 == 0 ? 8 : 4;
        h.aligned = (uintptr_t)p->src % align == 0 && (size_t)p->width * C % align == 0;
    }
    {
        const long long row_bytes = (long long)p->width * C, tail = (64 + row_bytes - 1) / row_bytes;
        h.safe_rows = p->height - (int)(tail < p->height ? tail : p->height);
    }
    for (int k = 0; k < K; k++) {
        h.scale[k] = p->scale[k];
        h.offset[k] = p->offset[k];
        inv[k] = 1.0f / p->scale[k];  /* exact for the powers of two it is used for */
        h.rcp[k] = ch.facts && ch.facts->div_range[k] ? inv[k] : 0.0f;
    }
    switch (p->combine) {
    case GF_COMBINE_MAGNITUDE: h.comb = COMB_MAG; break;
    case GF_COMBINE_MAX:       h.comb = K > 1 ? COMB_MAX : COMB_SUM; break;
    case GF_COMBINE_MIN:       h.comb = K > 1 ? COMB_MIN : COMB_SUM; break;
    default:                   h.comb = COMB_SUM; break;
    }
}

/* The weights by value, a scale that is a power of two folded in (exact:
 * every partial sum scales by the same power of two, far from underflow
 * and overflow for weights between 2^-100 and 2^100); returns whether
 * they were prescaled. */
static bool conv2d_plan_weights(int version, const conv2d_launch *p, conv2d_plan *pl, const conv2d_choice &ch,
                                const float *inv)
{
    const int K = p->mask_count, mw = p->mask_width, mh = p->mask_height;
    bool prescale = false;
    pl->nw = 0;
    if (version == 4 && pl->v->ws) {
        prescale = ch.facts->prescalable;
        pl->nw = ch.mma           ? conv2d_pack_mma(ch.row, ch.column, mw, pl->w)
                 : ch.row_streams ? conv2d_pack_stream(ch.facts->row, ch.facts->column, p->scale[0], pl->w)
                 : conv2d_separable4(pl->v->ws) ? conv2d_pack_separable(ch.row, ch.column, mw, pl->w)
                                                : conv2d_pack_weights(p->host_weights, K, mw, pl->v->ws, pl->w);
    } else if ((version == 2 || version == 4) && !pl->v->ws) {
        const int taps = mw * mh;
        prescale = ch.facts->prescalable;
        for (int k = 0; k < K; k++)
            for (int i = 0; i < taps; i++)
                pl->w[k * taps + i] = p->host_weights[k * taps + i] * (prescale ? inv[k] : 1.0f);
        pl->nw = K * taps;
    } else if (version == 3 && ch.have_factors) {
        prescale = conv2d_power_of_two(p->scale[0]);
        for (int y = 0; y < mh && prescale; y++) {
            const float c = ch.column[y] * inv[0];
            prescale = c == 0.0f || (fabsf(c) > 0x1p-100f && fabsf(c) < 0x1p100f);
        }
        for (int i = 0; i < 64; i++)
            pl->w[i] = 0.0f;
        for (int x = 0; x < mw; x++)
            pl->w[x] = ch.row[x];
        for (int y = 0; y < mh; y++)
            pl->w[32 + y] = ch.column[y] * (prescale ? inv[0] : 1.0f);
        pl->nw = 64;
    }
    return prescale;
}

/* How the kernel scales the sums (h.mode). */
static int conv2d_plan_mode(int version, const conv2d_launch *p, const conv2d_plan *pl, const conv2d_choice &ch,
                            bool prescale)
{
    const int K = p->mask_count;
    int mode = MODE_DIV;
    if (prescale) {
        bool offsets = false;
        for (int k = 0; k < K; k++)
            offsets = offsets || p->offset[k] != 0.0f;
        mode = offsets ? MODE_PRESCALED : MODE_PRESCALED_NO_OFFSET;
    } else if ((version == 4 && pl->v->ws == CONV2D_DP4A && K == 1 && p->mask_width == 3 && p->mask_height == 3 &&
                p->offset[0] == 0.0f && conv2d_odd_divisor(p->scale[0])) ||
               (version == 4 && (pl->v->ws == kBox4 || pl->v->ws == kRunning4 || pl->v->ws == kBoxScan4)) ||
               (ch.mma && ch.in_range && 255.0f * p->scale[0] < 4194304.0f)) {
        /* box3, box5..31: one FFMA per output instead of a division; on
         * the tensor cores in range and not prescaled means an odd divisor
         * d (conv2d_odd_divisor), whose sums (at most 255 d) must stay
         * below 2^22 */
        mode = MODE_DIV_ODD;
    }
    /* the tensor cores' kernels (kModeAny) take the finish without a clamp
     * from the header */
    if (ch.mma && (mode == MODE_PRESCALED_NO_OFFSET || mode == MODE_DIV_ODD) && ch.in_range)
        mode += kInRange;
    return mode;
}

/* The grid, and the tiles a block walks down (h.steps). */
static bool conv2d_plan_grid(int version, const conv2d_launch *p, conv2d_plan *pl, const conv2d_choice &ch)
{
    fast_header &h = pl->h;
    const int TW = p->tile_width, TH = p->tile_height;
    const long long grid_x = (p->width + TW - 1) / TW, tiles_y = (p->height + TH - 1) / TH;
    if (version == 4 && pl->v->ws == kBoxScan4)
        return conv2d_scan_grid4(p, pl, ch.threads);
    if (ch.mma)
        return conv2d_mma_grid(p, pl, ch.threads);
    if (ch.row_streams) {  /* a tile a block */
        h.steps = 1;
        h.edge_rows = h.edge_cols = h.edge_left = h.edge_right0 = 0;
        pl->grid = dim3((unsigned)grid_x, (unsigned)tiles_y);
        return grid_x <= 0x7FFFFFFF && tiles_y <= 65535;
    }
    if (version == 4)
        return conv2d_strips4(p, pl, grid_x, tiles_y, ch.threads);
    /* a block walks down ~256 rows, unless that leaves too few blocks; a
     * tile a block where the SMs cannot be counted (right on any device) */
    int dev = 0, sms = 0;
    long long steps = 256 / TH < 1 ? 1 : 256 / TH;
    if (steps > tiles_y)
        steps = tiles_y;
    if (!conv2d_device_sms(&dev, &sms))
        steps = 1;
    while (steps > 1 && grid_x * ((tiles_y + steps - 1) / steps) < 16LL * sms)
        steps--;
    if ((tiles_y + steps - 1) / steps > 65535)
        steps = (tiles_y + 65534) / 65535;
    h.steps = (int)steps;
    pl->grid = dim3((unsigned)grid_x, (unsigned)((tiles_y + steps - 1) / steps));
    return true;
}

bool conv2d_make_plan(int version, const conv2d_launch *p, conv2d_plan *pl, bool full)
{
    const int C = p->channels, K = p->mask_count, mw = p->mask_width, mh = p->mask_height;
    if (C < 1 || C > 4 || K < 1 || K > CONV2D_MAX_MATRICES || mw < 1 || mh < 1 ||
        mw > kMaxMask || mh > kMaxMask || p->width < 1 || p->height < 1)
        return false;
    pl->path = 0;  /* version 4 sets it where it picks a path */
    conv2d_choice ch;
    conv2d_mask_facts own;
    ch.facts = p->host_weights ? conv2d_facts(p, &own) : NULL;
    ch.cf = p->channels_filtered < 0 ? 0 : p->channels_filtered > C ? C : p->channels_filtered;
    ch.CF = conv2d_cf_template(C, ch.cf);
    ch.have_factors = ch.in_range = ch.mma = ch.row_streams = false;
    ch.threads = 0;
    const bool picked = version == 2 ? conv2d_pick2(p, pl, ch)
                        : version == 3 ? conv2d_pick3(p, pl, ch)
                        : version == 4 ? conv2d_pick4(p, pl, ch)
                                       : false;
    if (!picked || !pl->v || !conv2d_plan_layout(version, p, pl, ch))
        return false;
    if (!full)
        return true;
    float inv[CONV2D_MAX_MATRICES];
    conv2d_plan_header(version, p, pl, ch, inv);
    const bool prescale = conv2d_plan_weights(version, p, pl, ch, inv);
    pl->h.mode = conv2d_plan_mode(version, p, pl, ch, prescale);
    return conv2d_plan_grid(version, p, pl, ch);
}
