/* cpu_conv.c - the fast CPU convolution (see cpu_conv.h for the contract;
 * cpu_conv_plan.c chooses each mask's path).
 *
 * A band of output rows is one thread's. Source rows are read through a
 * padded copy (the border applied once per row, so the inner loops have no
 * border test), kept in a ring keyed by the virtual row index v (y + my -
 * anchor, any integer: gf_border_index maps it). Integer sums are exact, so
 * their order is free: a separable mask sums rows into a ring of 32-bit row
 * responses, then columns; a constant row or column is a running sum. The
 * double path keeps the reference's order of additions per matrix, (my, mx)
 * ascending, so its sums are the reference's bit for bit. */
#include "cpu_conv.h"
#include "cpu_conv_plan.h"
#include "util.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Work (pixels x taps) below this runs on the calling thread alone. */
#define WORK_PER_THREAD (1 << 21)


typedef struct {
    const unsigned char *src;  /* samples of 'depth' bits, addressed in bytes */
    unsigned char *dst;
    int width, height, channels, channels_filtered;
    int depth, sample_bytes;  /* 8 and 1, or 16 and 2 */
    const gf_mask *mask;
    gf_border border;
    const gf_cpu_plan *plan;
    int y0, y1;  /* this band's output rows */
    int failed;
    struct unit_queue *units;  /* source rows still arriving: the band takes units from it */
    int took;                  /* units of 0 rows: the band's own rows taken */
} band_job;

/* Output rows in units of 'rows', taken in order by the bands' threads,
 * each once the source rows it reads are there (gf_conv2d_fast_ahead);
 * rows 0: each band is one unit, its own rows. */
typedef struct unit_queue {
    const gf_rows_ready *ready;
    int rows;
    int next;      /* the next unit's first row, under lock */
    int stopped;   /* a wait failed: no unit starts */
    pthread_mutex_t lock;
} unit_queue;

/* Run the statements after p with q, p's samples typed: uint16_t at depth
 * 16, else unsigned char (each loop compiled, and vectorized, for both). */
#define WITH_SAMPLES(depth, q, p, ...)                                     \
    do {                                                                   \
        if ((depth) == 16) {                                               \
            const uint16_t *q = (const uint16_t *)(const void *)(p);       \
            __VA_ARGS__;                                                   \
        } else {                                                           \
            const unsigned char *q = (const unsigned char *)(p);           \
            __VA_ARGS__;                                                   \
        }                                                                  \
    } while (0)

/* Bytes of one row of n samples (width * channels) of the source or result. */
static size_t sample_offset(const band_job *job, size_t n)
{
    return n * (size_t)job->sample_bytes;
}


/* ---- rows ------------------------------------------------------------------ */

static int ring_slot(int v, int slots)
{
    int m = v % slots;
    return m < 0 ? m + slots : m;
}

/* Source row sy extended by the border: padded[p] is column p - ax. */
static void pad_row(const band_job *job, int sy, unsigned char *padded)
{
    const int w = job->width, ax = job->mask->width / 2;
    const size_t ch = sample_offset(job, (size_t)job->channels);  /* bytes a pixel */
    const unsigned char *row = job->src + (size_t)sy * w * ch;
    const int total = w + job->mask->width - 1;
    for (int p = 0; p < total; p++) {
        if (p == ax) {  /* the image itself, in one copy */
            memcpy(padded + (size_t)p * ch, row, (size_t)w * ch);
            p += w - 1;
            continue;
        }
        const int sx = gf_border_index(p - ax, w, job->border);
        if (sx < 0)
            memset(padded + (size_t)p * ch, 0, ch);
        else
            memcpy(padded + (size_t)p * ch, row + (size_t)sx * ch, ch);
    }
}

/* ---- finishing: the reference's finish_value over a row ------------------ */

/* Round half to even (the default rounding mode) and clamp to 0..255, as
 * nearbyint then the clamp do, in two passes that vectorize: clamping to
 * -1..256 first keeps the 1.5 * 2^52 trick exact (a NaN becomes -1, so 0),
 * then the integers are clamped and narrowed. */
static void round_row(const double *t, int32_t *rounded, unsigned char *out, int n)
{
    for (int i = 0; i < n; i++) {
        const double low = t[i] > -1.0 ? t[i] : -1.0;
        const double clamped = low < 256.0 ? low : 256.0;
        rounded[i] = (int32_t)((clamped + 0x1.8p52) - 0x1.8p52);
    }
    for (int i = 0; i < n; i++) {
        const int32_t positive = rounded[i] > 0 ? rounded[i] : 0;
        out[i] = (unsigned char)(positive < 255 ? positive : 255);
    }
}

/* round_row at depth 16: clamped to -1..65536, then to 0..65535. */
static void round_row16(const double *t, int32_t *rounded, uint16_t *out, int n)
{
    for (int i = 0; i < n; i++) {
        const double low = t[i] > -1.0 ? t[i] : -1.0;
        const double clamped = low < 65536.0 ? low : 65536.0;
        rounded[i] = (int32_t)((clamped + 0x1.8p52) - 0x1.8p52);
    }
    for (int i = 0; i < n; i++) {
        const int32_t positive = rounded[i] > 0 ? rounded[i] : 0;
        out[i] = (uint16_t)(positive < 65535 ? positive : 65535);
    }
}

/* Fold matrix k's response r into the combined value t. */
static void combine_row(double *t, const double *r, int n, int k, gf_combine combine)
{
    if (combine == GF_COMBINE_MAGNITUDE) {
        if (k == 0)
            for (int i = 0; i < n; i++)
                t[i] = r[i] * r[i];
        else
            for (int i = 0; i < n; i++)
                t[i] += r[i] * r[i];
    } else if (k == 0) {
        memcpy(t, r, (size_t)n * sizeof *t);
    } else if (combine == GF_COMBINE_MAX) {
        for (int i = 0; i < n; i++)
            t[i] = r[i] > t[i] ? r[i] : t[i];
    } else if (combine == GF_COMBINE_MIN) {
        for (int i = 0; i < n; i++)
            t[i] = r[i] < t[i] ? r[i] : t[i];
    } else {
        for (int i = 0; i < n; i++)
            t[i] += r[i];
    }
}

/* The unfiltered channels (alpha) of output row y, copied from the source. */
static void pass_alpha(const band_job *job, int y, int n)
{
    const int ch = job->channels;
    const size_t row = sample_offset(job, (size_t)y * n);
    if (job->depth == 16) {
        const uint16_t *in = (const uint16_t *)(const void *)(job->src + row);
        uint16_t *out = (uint16_t *)(void *)(job->dst + row);
        for (int c = job->channels_filtered; c < ch; c++)
            for (int i = c; i < n; i += ch)
                out[i] = in[i];
        return;
    }
    const unsigned char *in = job->src + row;
    unsigned char *out = job->dst + row;
    for (int c = job->channels_filtered; c < ch; c++)
        for (int i = c; i < n; i += ch)
            out[i] = in[i];
}

/* GF_COMBINE_UNSHARP: the blur b in t becomes s + amount (s - b) where
 * |s - b| >= threshold, s the source value; else s. */
static void unsharp_row(const band_job *job, int y, double *t, int n)
{
    const double amount = job->mask->amount, threshold = job->mask->threshold;
    WITH_SAMPLES(job->depth, s, job->src + sample_offset(job, (size_t)y * n),
                 for (int i = 0; i < n; i++) {
                     const double d = (double)s[i] - t[i];
                     t[i] = fabs(d) >= threshold ? s[i] + amount * d : s[i];
                 });
}

static void store_row(const band_job *job, int y, double *t, int32_t *rounded, int n)
{
    if (job->mask->combine == GF_COMBINE_MAGNITUDE)
        for (int i = 0; i < n; i++)
            t[i] = sqrt(t[i]);
    if (job->mask->combine == GF_COMBINE_UNSHARP)
        unsharp_row(job, y, t, n);
    if (job->depth == 16)
        round_row16(t, rounded, (uint16_t *)(void *)(job->dst + sample_offset(job, (size_t)y * n)),
                    n);
    else
        round_row(t, rounded, job->dst + (size_t)y * n, n);
    pass_alpha(job, y, n);
}

/* ---- the three paths ------------------------------------------------------ */

typedef struct {
    unsigned char *padded;  /* ring of padded source rows (one for the separable path) */
    int *padded_tag;        /* the virtual row each slot holds */
    int32_t *lines;         /* separable: ring of row responses */
    int *line_tag;
    int32_t *isum[GF_MASK_MAX_MATRICES];
    double *dsum[GF_MASK_MAX_MATRICES];
    double *response, *combined;
    int32_t *rounded;
    int32_t *zeros;         /* the constant border's rows */
    void *columns;          /* columns_first: the column pass's row (int32_t or float) */
    void *padded_columns;   /* that row extended by the border, as pad_row */
} band_scratch;

static void free_scratch(band_scratch *s)
{
    free(s->padded), free(s->padded_tag), free(s->lines), free(s->line_tag);
    for (int k = 0; k < GF_MASK_MAX_MATRICES; k++)
        free(s->isum[k]), free(s->dsum[k]);
    free(s->response), free(s->combined), free(s->rounded), free(s->zeros);
    free(s->columns), free(s->padded_columns);
}

static int alloc_scratch(const band_job *job, band_scratch *s)
{
    const size_t n = (size_t)job->width * job->channels;
    const size_t padded_bytes = (size_t)(job->width + job->mask->width - 1) * job->channels;
    const int mh = job->mask->height;
    const int separable = job->plan->path == GF_CPU_SEPARABLE;
    const int padded_rows = separable || job->plan->columns_first ? 1 : mh;
    /* the column pass's values: int32_t or float, double at depth 16 */
    const size_t column_value = job->plan->path == GF_CPU_SEPARABLE_DOUBLE ? sizeof(double)
                                                                           : sizeof(int32_t);
    memset(s, 0, sizeof *s);
    s->padded = malloc(sample_offset(job, padded_bytes) * padded_rows);
    s->padded_tag = malloc(sizeof(int) * (mh + 1));
    s->line_tag = malloc(sizeof(int) * (mh + 1));
    s->response = malloc(n * sizeof(double));
    s->combined = malloc(n * sizeof(double));
    s->rounded = malloc(n * sizeof(int32_t));
    s->zeros = calloc(n > padded_bytes ? n : padded_bytes, sizeof(int32_t));
    int ok = s->padded && s->padded_tag && s->line_tag && s->response && s->combined &&
             s->rounded && s->zeros;
    if (job->plan->columns_first)
        ok = ok && (s->columns = malloc(n * column_value)) &&
             (s->padded_columns = malloc(padded_bytes * column_value));
    else if (separable)
        ok = ok && (s->lines = malloc(n * sizeof(int32_t) * (mh + 1)));
    for (int k = 0; k < job->mask->count && ok; k++)
        ok = job->plan->path == GF_CPU_DOUBLE || job->plan->path == GF_CPU_SEPARABLE_FLOAT ||
                     job->plan->path == GF_CPU_SEPARABLE_DOUBLE
                 ? (s->dsum[k] = malloc(n * sizeof(double))) != NULL
                                              : (s->isum[k] = malloc(n * sizeof(int32_t))) != NULL;
    if (!ok) {
        free_scratch(s);
        return -1;
    }
    for (int i = 0; i <= mh; i++)
        s->padded_tag[i] = s->line_tag[i] = INT32_MIN;
    return 0;
}

/* The padded source row of virtual row v, or NULL for the constant border's zeros. */
static const unsigned char *padded_row(const band_job *job, band_scratch *s, int v)
{
    const int sy = gf_border_index(v, job->height, job->border);
    if (sy < 0)
        return NULL;
    const int slots = job->plan->path == GF_CPU_SEPARABLE ? 1 : job->mask->height;
    const int slot = ring_slot(v, slots);
    unsigned char *p = s->padded + sample_offset(job, (size_t)slot *
                                                          (job->width + job->mask->width - 1) *
                                                          job->channels);
    if (s->padded_tag[slot] != v) {
        pad_row(job, sy, p);
        s->padded_tag[slot] = v;
    }
    return p;
}

/* float_magnitude_exact's finish: the sum of squares in 32-bit integers,
 * sqrtf, rounding half to even with the 1.5 * 2^23 trick, the clamp. */
static void finish_float_magnitude_row(const band_job *job, band_scratch *s, int y, int n)
{
    int32_t *squares = s->rounded;
    for (int i = 0; i < n; i++)
        squares[i] = s->isum[0][i] * s->isum[0][i];
    for (int k = 1; k < job->mask->count; k++)
        for (int i = 0; i < n; i++)
            squares[i] += s->isum[k][i] * s->isum[k][i];
    unsigned char *out = job->dst + (size_t)y * n;
    for (int i = 0; i < n; i++) {
        const float rounded = (sqrtf((float)squares[i]) + 0x1.8p23f) - 0x1.8p23f;
        out[i] = (unsigned char)(rounded < 255.0f ? rounded : 255.0f);
    }
    pass_alpha(job, y, n);
}

static void finish_integer_row(const band_job *job, band_scratch *s, int y, int n)
{
    if (job->plan->float_magnitude) {
        finish_float_magnitude_row(job, s, y, n);
        return;
    }
    for (int k = 0; k < job->mask->count; k++) {
        const double scale = job->mask->scale[k], offset = job->mask->offset[k];
        for (int i = 0; i < n; i++)
            s->response[i] = (double)s->isum[k][i] / scale + offset;
        combine_row(s->combined, s->response, n, k, job->mask->combine);
    }
    store_row(job, y, s->combined, s->rounded, n);
}

static void integer_band(const band_job *job, band_scratch *s)
{
    const gf_mask *m = job->mask;
    const int ch = job->channels, n = job->width * ch, ay = m->height / 2;
    for (int y = job->y0; y < job->y1; y++) {
        for (int k = 0; k < m->count; k++)
            memset(s->isum[k], 0, (size_t)n * sizeof(int32_t));
        for (int my = 0; my < m->height; my++) {
            const unsigned char *p = padded_row(job, s, y + my - ay);
            if (!p)
                continue;
            for (int k = 0; k < m->count; k++)
                for (int mx = 0; mx < m->width; mx++) {
                    const int32_t w = job->plan->taps[k][my * m->width + mx];
                    if (!w)
                        continue;
                    int32_t *acc = s->isum[k];
                    WITH_SAMPLES(job->depth, q, p + sample_offset(job, (size_t)mx * ch),
                                 for (int i = 0; i < n; i++) acc[i] += w * q[i]);
                }
        }
        finish_integer_row(job, s, y, n);
    }
}

static void double_band(const band_job *job, band_scratch *s)
{
    const gf_mask *m = job->mask;
    const int ch = job->channels, n = job->width * ch, ay = m->height / 2;
    for (int y = job->y0; y < job->y1; y++) {
        for (int k = 0; k < m->count; k++)
            memset(s->dsum[k], 0, (size_t)n * sizeof(double));
        for (int my = 0; my < m->height; my++) {
            const unsigned char *p = padded_row(job, s, y + my - ay);
            if (!p)
                continue;  /* zeros: adding 0.0 leaves every sum as it is */
            for (int k = 0; k < m->count; k++)
                for (int mx = 0; mx < m->width; mx++) {
                    const double w = m->weights[k][my * m->width + mx];
                    if (w == 0.0)
                        continue;
                    double *acc = s->dsum[k];
                    WITH_SAMPLES(job->depth, q, p + sample_offset(job, (size_t)mx * ch),
                                 for (int i = 0; i < n; i++) acc[i] += (double)q[i] * w);
                }
        }
        for (int k = 0; k < m->count; k++) {
            for (int i = 0; i < n; i++)
                s->response[i] = s->dsum[k][i] / m->scale[k] + m->offset[k];
            combine_row(s->combined, s->response, n, k, m->combine);
        }
        store_row(job, y, s->combined, s->rounded, n);
    }
}

/* line[x * ch + c] = the sum of the mw values of channel c from pixel x of
 * the padded row p on. The sums live in locals, not in line: read back
 * from memory, each step would wait for the store of the one before. */
#define DEFINE_RUNNING_ROW_SUM(name, type)                                             \
    static inline __attribute__((always_inline)) void name(int32_t *line, const type *p,  \
                                                           int width, int mw, int ch)     \
    {                                                                                     \
        int32_t sum[4] = {0, 0, 0, 0};                                                    \
        for (int mx = 0; mx < mw; mx++)                                                   \
            for (int c = 0; c < ch; c++)                                                  \
                sum[c] += p[mx * ch + c];                                                 \
        for (int c = 0; c < ch; c++)                                                      \
            line[c] = sum[c];                                                             \
        const type *in = p + (size_t)mw * ch, *out = p;                                   \
        for (int x = 1; x < width; x++, in += ch, out += ch)                              \
            for (int c = 0; c < ch; c++) {                                                \
                sum[c] += in[c] - out[c];                                                 \
                line[x * ch + c] = sum[c];                                                \
            }                                                                             \
    }
DEFINE_RUNNING_ROW_SUM(running_row_sum, unsigned char)
DEFINE_RUNNING_ROW_SUM(running_row_sum16, uint16_t)

/* running_row_sum with the channel count a constant, which keeps the sums
 * in registers. */
static void running_row_sums(const band_job *job, int32_t *line, const unsigned char *p)
{
    const int width = job->width, mw = job->mask->width;
    if (job->depth == 16) {
        const uint16_t *q = (const uint16_t *)(const void *)p;
        switch (job->channels) {
        case 1: running_row_sum16(line, q, width, mw, 1); break;
        case 2: running_row_sum16(line, q, width, mw, 2); break;
        case 3: running_row_sum16(line, q, width, mw, 3); break;
        default: running_row_sum16(line, q, width, mw, 4); break;
        }
        return;
    }
    switch (job->channels) {
    case 1: running_row_sum(line, p, width, mw, 1); break;
    case 2: running_row_sum(line, p, width, mw, 2); break;
    case 3: running_row_sum(line, p, width, mw, 3); break;
    default: running_row_sum(line, p, width, mw, 4); break;
    }
}

/* The row response of virtual row v: sum over mx of row[mx] * source. */
static const int32_t *row_response(const band_job *job, band_scratch *s, int v)
{
    const int mh = job->mask->height;
    if (gf_border_index(v, job->height, job->border) < 0)
        return s->zeros;
    const int ch = job->channels, n = job->width * ch, mw = job->mask->width;
    const int slot = ring_slot(v, mh + 1);
    int32_t *line = s->lines + (size_t)slot * n;
    if (s->line_tag[slot] == v)
        return line;
    const unsigned char *p = padded_row(job, s, v);
    if (job->plan->row_constant) {  /* a running sum along the row, per channel */
        running_row_sums(job, line, p);
    } else {
        memset(line, 0, (size_t)n * sizeof(int32_t));
        for (int mx = 0; mx < mw; mx++) {
            const int32_t w = job->plan->row[mx];
            if (!w)
                continue;
            WITH_SAMPLES(job->depth, q, p + sample_offset(job, (size_t)mx * ch),
                         for (int i = 0; i < n; i++) line[i] += w * q[i]);
        }
    }
    s->line_tag[slot] = v;
    return line;
}

static void separable_band(const band_job *job, band_scratch *s)
{
    const gf_mask *m = job->mask;
    const gf_cpu_plan *plan = job->plan;
    const int n = job->width * job->channels, mh = m->height, ay = mh / 2;
    int32_t *acc = s->isum[0];
    int32_t *window = s->isum[0];  /* column_constant: the running column sum */
    for (int y = job->y0; y < job->y1; y++) {
        if (plan->column_constant && y > job->y0) {
            const int32_t *in = row_response(job, s, y + mh - 1 - ay);
            const int32_t *out = row_response(job, s, y - 1 - ay);
            for (int i = 0; i < n; i++)
                window[i] += in[i] - out[i];
        } else {
            memset(acc, 0, (size_t)n * sizeof(int32_t));
            for (int my = 0; my < mh; my++) {
                const int32_t w = plan->column_constant ? 1 : plan->column[my];
                if (!w)
                    continue;
                const int32_t *line = row_response(job, s, y + my - ay);
                for (int i = 0; i < n; i++)
                    acc[i] += w * line[i];
            }
        }
        const double scale = m->scale[0], offset = m->offset[0];
        const double factor = plan->column_constant ? (double)plan->column[0] : 1.0;
        for (int i = 0; i < n; i++)  /* the product is exact: the bound keeps it in 32 bits */
            s->response[i] = (double)acc[i] * factor / scale + offset;
        combine_row(s->combined, s->response, n, 0, m->combine);
        store_row(job, y, s->combined, s->rounded, n);
    }
}

/* ---- columns first: masks past GF_MASK_SMALL_SIZE that factor ------------ */

/* The source row of virtual row v, or NULL for the constant border's zeros. */
static const unsigned char *source_row(const band_job *job, int v)
{
    const int sy = gf_border_index(v, job->height, job->border);
    return sy < 0 ? NULL : job->src + sample_offset(job, (size_t)sy * job->width * job->channels);
}

/* The column pass's row extended by the border, as pad_row does for bytes:
 * padded[p] is column p - ax (the border commutes with the column pass). */
#define DEFINE_PAD_COLUMNS(name, type)                                                  \
    static void name(const band_job *job, const type *row, type *padded)               \
    {                                                                                  \
        const int ch = job->channels, w = job->width, ax = job->mask->width / 2;       \
        for (int p = 0; p < w + job->mask->width - 1; p++) {                           \
            const int sx = gf_border_index(p - ax, w, job->border);                    \
            for (int c = 0; c < ch; c++)                                               \
                padded[(size_t)p * ch + c] = sx < 0 ? 0 : row[(size_t)sx * ch + c];    \
        }                                                                              \
    }
DEFINE_PAD_COLUMNS(pad_int_columns, int32_t)
DEFINE_PAD_COLUMNS(pad_float_columns, float)
DEFINE_PAD_COLUMNS(pad_double_columns, double)

/* columns = sum over my of column[my] * source row y + my - ay, exactly;
 * a constant column is a running sum kept from the row before. */
static void integer_columns(const band_job *job, int y, int32_t *columns)
{
    const gf_cpu_plan *plan = job->plan;
    const int n = job->width * job->channels, mh = job->mask->height, ay = mh / 2;
    if (plan->column_constant && y > job->y0) {
        const unsigned char *in = source_row(job, y + mh - 1 - ay), *out = source_row(job, y - 1 - ay);
        if (in)
            WITH_SAMPLES(job->depth, q, in, for (int i = 0; i < n; i++) columns[i] += q[i]);
        if (out)
            WITH_SAMPLES(job->depth, q, out, for (int i = 0; i < n; i++) columns[i] -= q[i]);
        return;
    }
    memset(columns, 0, (size_t)n * sizeof *columns);
    for (int my = 0; my < mh; my++) {
        const int32_t w = plan->column_constant ? 1 : plan->column[my];
        const unsigned char *p = source_row(job, y + my - ay);
        if (w && p)
            WITH_SAMPLES(job->depth, q, p, for (int i = 0; i < n; i++) columns[i] += w * q[i]);
    }
}

/* acc[x * ch + c] = sum over mx of row[mx] * padded[(x + mx) * ch + c]. */
static void integer_row_pass(const band_job *job, const int32_t *padded, int32_t *acc)
{
    const gf_cpu_plan *plan = job->plan;
    const int ch = job->channels, n = job->width * ch, mw = job->mask->width;
    if (plan->row_constant) {
        for (int c = 0; c < ch; c++) {
            int32_t sum = 0;
            for (int mx = 0; mx < mw; mx++)
                sum += padded[mx * ch + c];
            acc[c] = sum;
            for (int x = 1; x < job->width; x++) {
                sum += padded[(size_t)(x + mw - 1) * ch + c] - padded[(size_t)(x - 1) * ch + c];
                acc[(size_t)x * ch + c] = sum;
            }
        }
        return;
    }
    memset(acc, 0, (size_t)n * sizeof *acc);
    for (int mx = 0; mx < mw; mx++)
        if (plan->row[mx])
            for (int i = 0; i < n; i++)
                acc[i] += plan->row[mx] * padded[(size_t)mx * ch + i];
}

static void integer_columns_first_band(const band_job *job, band_scratch *s)
{
    const gf_mask *m = job->mask;
    const gf_cpu_plan *plan = job->plan;
    const int n = job->width * job->channels;
    int32_t *columns = s->columns, *padded = s->padded_columns, *acc = s->isum[0];
    const double factor = plan->column_constant ? (double)plan->column[0] : 1.0;
    for (int y = job->y0; y < job->y1; y++) {
        integer_columns(job, y, columns);
        pad_int_columns(job, columns, padded);
        integer_row_pass(job, padded, acc);
        for (int i = 0; i < n; i++)
            s->response[i] = (double)acc[i] * factor / m->scale[0] + m->offset[0];
        combine_row(s->combined, s->response, n, 0, m->combine);
        store_row(job, y, s->combined, s->rounded, n);
    }
}

/* Values a chunk of the float passes keeps in its accumulator (in L1). */
#define FLOAT_CHUNK 512

/* The passes of GF_CPU_SEPARABLE_FLOAT (real float, 8-bit samples) and
 * GF_CPU_SEPARABLE_DOUBLE (real double, 16-bit samples), one text for both:
 *   add_pair_of_rows_R   sum[0..len) += w * (a[j] + b[j]), either row NULL
 *                        (the constant border's zeros)
 *   add_four_pairs_of_rows_R  four such terms, added to each sum in the
 *                        same order in one pass over the sums (the passes
 *                        below fuse four taps wherever they can: the sums
 *                        stay in L1 either way, but are loaded and stored
 *                        a quarter as often; a zero weight adds an exact 0)
 *   column_chunk_R       columns[i0..i0+len) = sum over my of column[my] *
 *                        source row y + my - ay
 *   row_chunk_R          response[i0..i0+len) = sum over mx of row[mx] *
 *                        padded[(x + mx) * ch + c], / scale + offset
 *   columns_first_band_R the column pass, the border, the row pass, a row
 *                        at a time. */
#define DEFINE_REAL_PASSES(real, sample)                                                      \
    static void add_pair_of_rows_##real(real *sum, real w, const sample *a, const sample *b, \
                                        int len)                                              \
    {                                                                                         \
        if (a && b)                                                                           \
            for (int j = 0; j < len; j++)                                                     \
                sum[j] += w * (real)(a[j] + b[j]);                                            \
        else if (a || b)                                                                      \
            for (int j = 0, k = 0; j < len; j++, k++)                                         \
                sum[j] += w * (a ? a : b)[k];                                                 \
    }                                                                                         \
                                                                                              \
    static void add_four_pairs_of_rows_##real(real *sum, const double *weights,              \
                                              const sample *const *r, int len)               \
    {                                                                                         \
        const real w0 = (real)weights[0], w1 = (real)weights[1];                              \
        const real w2 = (real)weights[2], w3 = (real)weights[3];                              \
        const sample *a0 = r[0], *b0 = r[1], *a1 = r[2], *b1 = r[3];                          \
        const sample *a2 = r[4], *b2 = r[5], *a3 = r[6], *b3 = r[7];                          \
        for (int j = 0; j < len; j++)                                                         \
            sum[j] = (((sum[j] + w0 * (real)(a0[j] + b0[j])) + w1 * (real)(a1[j] + b1[j])) + \
                      w2 * (real)(a2[j] + b2[j])) + w3 * (real)(a3[j] + b3[j]);               \
    }                                                                                         \
                                                                                              \
    static const sample *chunk_of_##real(const unsigned char *row, int i0)                    \
    {                                                                                         \
        return row ? (const sample *)(const void *)row + i0 : NULL;                           \
    }                                                                                         \
                                                                                              \
    /* r: the four pairs of rows from my on (row my + k, then its mirror),    */             \
    /* from value i0; 0 where one lies outside the image (constant border)   */              \
    static int four_pairs_of_rows_##real(const band_job *job, int y, int my, int i0,          \
                                         const sample **r)                                    \
    {                                                                                         \
        const int mh = job->mask->height, ay = mh / 2;                                        \
        for (int k = 0; k < 4; k++) {                                                         \
            const unsigned char *a = source_row(job, y + my + k - ay);                        \
            const unsigned char *b = source_row(job, y + mh - 1 - my - k - ay);               \
            if (!a || !b)                                                                     \
                return 0;                                                                     \
            r[2 * k] = chunk_of_##real(a, i0);                                                \
            r[2 * k + 1] = chunk_of_##real(b, i0);                                            \
        }                                                                                     \
        return 1;                                                                             \
    }                                                                                         \
                                                                                              \
    static void column_chunk_##real(const band_job *job, int y, int i0, int len, real *columns) \
    {                                                                                         \
        const gf_mask *m = job->mask;                                                         \
        const int mh = m->height, ay = mh / 2;                                                \
        const int pairs = job->plan->column_symmetric ? mh / 2 : 0;                           \
        real sum[FLOAT_CHUNK] = {0};                                                          \
        for (int my = 0; my < mh - pairs; my++) {                                             \
            const sample *r[8];                                                               \
            if (my + 3 < pairs && four_pairs_of_rows_##real(job, y, my, i0, r)) {             \
                add_four_pairs_of_rows_##real(sum, m->column + my, r, len);                   \
                my += 3;                                                                      \
                continue;                                                                     \
            }                                                                                 \
            const real w = (real)m->column[my];                                               \
            const unsigned char *p = source_row(job, y + my - ay);                            \
            /* the first pairs rows: each with its mirror image, mh - 1 - my */               \
            const unsigned char *mirror =                                                     \
                my < pairs ? source_row(job, y + mh - 1 - my - ay) : NULL;                    \
            if (w != 0)                                                                       \
                add_pair_of_rows_##real(sum, w, chunk_of_##real(p, i0),                       \
                                        chunk_of_##real(mirror, i0), len);                    \
        }                                                                                     \
        memcpy(columns + i0, sum, (size_t)len * sizeof *sum);                                 \
    }                                                                                         \
                                                                                              \
    static void row_chunk_##real(const band_job *job, const real *padded, int i0, int len,    \
                                 double *response)                                            \
    {                                                                                         \
        const gf_mask *m = job->mask;                                                         \
        const int ch = job->channels, mw = m->width;                                          \
        const int pairs = job->plan->row_symmetric ? mw / 2 : 0;                              \
        real sum[FLOAT_CHUNK] = {0};                                                          \
        for (int mx = 0; mx < mw - pairs; mx++) {                                             \
            const real w = (real)m->row[mx];                                                  \
            const real *q = padded + (size_t)mx * ch + i0;                                    \
            if (w == 0)                                                                       \
                continue;                                                                     \
            if (mx + 3 < pairs) {                                                             \
                /* four pairs in one pass over the sums, in order */                          \
                const real w1 = (real)m->row[mx + 1], w2 = (real)m->row[mx + 2];              \
                const real w3 = (real)m->row[mx + 3];                                         \
                const real *e = padded + (size_t)(mw - 1 - mx) * ch + i0;                     \
                const real *q1 = q + ch, *q2 = q + 2 * ch, *q3 = q + 3 * ch;                  \
                const real *e1 = e - ch, *e2 = e - 2 * ch, *e3 = e - 3 * ch;                  \
                for (int j = 0; j < len; j++)                                                 \
                    sum[j] = (((sum[j] + w * (q[j] + e[j])) + w1 * (q1[j] + e1[j])) +         \
                              w2 * (q2[j] + e2[j])) + w3 * (q3[j] + e3[j]);                   \
                mx += 3;                                                                      \
            } else if (mx < pairs) {                                                          \
                const real *mirror = padded + (size_t)(mw - 1 - mx) * ch + i0;                \
                for (int j = 0; j < len; j++)                                                 \
                    sum[j] += w * (q[j] + mirror[j]);                                         \
            } else {                                                                          \
                for (int j = 0; j < len; j++)                                                 \
                    sum[j] += w * q[j];                                                       \
            }                                                                                 \
        }                                                                                     \
        for (int j = 0; j < len; j++)                                                         \
            response[i0 + j] = sum[j] / m->scale[0] + m->offset[0];                           \
    }                                                                                         \
                                                                                              \
    static void columns_first_band_##real(const band_job *job, band_scratch *s)               \
    {                                                                                         \
        const int n = job->width * job->channels;                                             \
        real *columns = s->columns, *padded = s->padded_columns;                              \
        for (int y = job->y0; y < job->y1; y++) {                                             \
            for (int i0 = 0; i0 < n; i0 += FLOAT_CHUNK)                                       \
                column_chunk_##real(job, y, i0, n - i0 < FLOAT_CHUNK ? n - i0 : FLOAT_CHUNK,  \
                                    columns);                                                 \
            pad_##real##_columns(job, columns, padded);                                       \
            for (int i0 = 0; i0 < n; i0 += FLOAT_CHUNK)                                       \
                row_chunk_##real(job, padded, i0, n - i0 < FLOAT_CHUNK ? n - i0 : FLOAT_CHUNK, \
                                 s->response);                                                \
            combine_row(s->combined, s->response, n, 0, job->mask->combine);                  \
            store_row(job, y, s->combined, s->rounded, n);                                    \
        }                                                                                     \
    }
DEFINE_REAL_PASSES(float, unsigned char)
DEFINE_REAL_PASSES(double, uint16_t)

/* One body per instruction set, chosen when the program loads: flatten
 * inlines the whole band into each, so the row loops vectorize at the
 * machine's width (the baseline x86-64 has no 32-bit vector multiply). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BAND_CLONES __attribute__((flatten, target_clones("avx2", "default")))
#else
#define BAND_CLONES
#endif

/* The last source row (image index) that output rows [y0, y1) read. */
static int last_source_row(const band_job *job, int y0, int y1)
{
    const int mh = job->mask->height, ay = mh / 2;
    int last = 0;
    for (int v = y0 - ay; v <= y1 - 1 + mh - 1 - ay; v++) {
        const int sy = gf_border_index(v, job->height, job->border);
        if (sy > last)
            last = sy;
    }
    return last;
}

/* The next unit of job->units whose source rows are there, as job->y0 and
 * y1; 0 when none is left (or a wait failed). */
static int take_unit(band_job *job)
{
    unit_queue *q = job->units;
    pthread_mutex_lock(&q->lock);
    const int y0 = q->next, stopped = q->stopped;
    q->next = y0 + q->rows;
    pthread_mutex_unlock(&q->lock);
    if (q->rows == 0) {
        if (stopped || job->took++)
            return 0;
    } else {
        if (stopped || y0 >= job->height)
            return 0;
        job->y0 = y0;
        job->y1 = y0 + q->rows < job->height ? y0 + q->rows : job->height;
    }
    if (q->ready->wait(q->ready->ctx, last_source_row(job, job->y0, job->y1)) == 0)
        return 1;
    pthread_mutex_lock(&q->lock);
    q->stopped = 1;
    pthread_mutex_unlock(&q->lock);
    return 0;
}

BAND_CLONES static void *run_band(void *arg)
{
    band_job *job = arg;
    band_scratch s;
    if (alloc_scratch(job, &s) < 0) {
        job->failed = 1;
        return NULL;
    }
    while (!job->units || take_unit(job)) {
        switch (job->plan->path) {
        case GF_CPU_SEPARABLE:
            if (job->plan->columns_first)
                integer_columns_first_band(job, &s);
            else
                separable_band(job, &s);
            break;
        case GF_CPU_SEPARABLE_FLOAT: columns_first_band_float(job, &s); break;
        case GF_CPU_SEPARABLE_DOUBLE: columns_first_band_double(job, &s); break;
        case GF_CPU_INTEGER: integer_band(job, &s); break;
        default: double_band(job, &s); break;
        }
        if (!job->units)
            break;
    }
    free_scratch(&s);
    return NULL;
}

/* ---- threads ----------------------------------------------------------------- */

static int band_count(const band_job *base, int threads)
{
    const double work = (double)base->width * base->height * base->channels *
                        gf_cpu_plan_taps(base->mask, base->plan);
    int bands = threads;
    if (threads <= 0) {  /* every core, unless the work is too small to share */
        bands = gf_image_threads();
        if (work / WORK_PER_THREAD < bands)
            bands = (int)(work / WORK_PER_THREAD);
    }
    if (bands > base->height)
        bands = base->height;
    return bands > 1 ? bands : 1;
}

/* Rows a unit of a convolution beside its decode. The float and double
 * column passes start anywhere at no cost: 16. The other paths start a
 * band by summing or padding the mask's rows: units of the mask's height
 * up to 64 rows; past that, 0 (each band its own rows, as without a
 * decode beside: small units would sum the same rows over and over). */
static int unit_rows(const gf_mask *mask, const gf_cpu_plan *plan)
{
    if (plan->path == GF_CPU_SEPARABLE_FLOAT || plan->path == GF_CPU_SEPARABLE_DOUBLE)
        return 16;
    return mask->height <= 16 ? 16 : (mask->height <= 64 ? mask->height : 0);
}

static int conv2d_fast(const unsigned char *src, unsigned char *dst, int width, int height,
                       int channels, int channels_filtered, int depth, const gf_mask *mask,
                       gf_border border, int threads, const gf_rows_ready *ready)
{
    gf_cpu_plan *plan = malloc(sizeof *plan);
    if (!plan)
        return -1;
    gf_cpu_plan_make(mask, depth, plan);
    unit_queue units = {.ready = ready, .rows = unit_rows(mask, plan)};
    pthread_mutex_init(&units.lock, NULL);
    band_job base = {src, dst, width, height, channels, channels_filtered, depth, depth / 8,
                     mask, border, plan, 0, height, 0, ready ? &units : NULL, 0};
    const int bands = band_count(&base, threads);
    band_job *jobs = calloc((size_t)bands, sizeof *jobs);
    pthread_t *ids = calloc((size_t)bands, sizeof *ids);
    int failed = !jobs || !ids;
    int started = 0;
    for (int b = 0; b < bands && !failed; b++) {
        jobs[b] = base;
        jobs[b].y0 = (int)((long long)height * b / bands);
        jobs[b].y1 = (int)((long long)height * (b + 1) / bands);
    }
    /* bands 1.. on threads of their own, band 0 (and any that could not start) here */
    for (int b = 1; b < bands && !failed; b++, started++)
        if (pthread_create(&ids[b], NULL, run_band, &jobs[b]) != 0)
            break;
    for (int b = 0; b < bands && !failed; b++)
        if (b == 0 || b > started)
            run_band(&jobs[b]);
    for (int b = 1; b <= started; b++)
        pthread_join(ids[b], NULL);
    for (int b = 0; b < bands && !failed; b++)
        failed = jobs[b].failed;
    const int stopped = units.stopped;
    free(jobs);
    free(ids);
    pthread_mutex_destroy(&units.lock);
    gf_cpu_plan_free(plan);
    return stopped ? -2 : (failed ? -1 : bands);
}

int gf_conv2d_fast(const unsigned char *src, unsigned char *dst, int width, int height,
                   int channels, int channels_filtered, const gf_mask *mask, gf_border border,
                   int threads)
{
    return conv2d_fast(src, dst, width, height, channels, channels_filtered, 8, mask, border,
                       threads, NULL);
}

int gf_conv2d_fast_ahead(const unsigned char *src, unsigned char *dst, int width, int height,
                         int channels, int channels_filtered, const gf_mask *mask,
                         gf_border border, const gf_rows_ready *ready)
{
    return conv2d_fast(src, dst, width, height, channels, channels_filtered, 8, mask, border, 0,
                       ready);
}

int gf_conv2d_fast16(const uint16_t *src, uint16_t *dst, int width, int height, int channels,
                     int channels_filtered, const gf_mask *mask, gf_border border, int threads)
{
    return conv2d_fast((const unsigned char *)(const void *)src, (unsigned char *)(void *)dst,
                       width, height, channels, channels_filtered, 16, mask, border, threads,
                       NULL);
}
