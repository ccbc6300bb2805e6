/* diffuse_k.c - K from a percentile of the gradient magnitudes (diffuse_k.h).
 *
 * The squared magnitudes are integers below 2^33 (samples of 16 bits at
 * most), so the values at two ranks are found exactly without sorting or a
 * copy of them: a histogram of their top 16 bits, then, in a second pass,
 * one of the low 17 bits inside each bucket that holds one of the ranks.
 * A pass reads the image a row at a time, the border mode applied once a
 * row, on the threads the image may take (16 at most). */
#include "diffuse_k.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "util.h"

#define FINE_BITS 17
#define COARSE_BINS (1u << 16)
#define FINE_BINS (1u << FINE_BITS)

/* Channel c of image row y read through the border mode (zeros outside
 * for constant) into row[0..w - 1], and row[w]: the sample right of the
 * last one. */
static void load_row(const gf_image *img, int y, int c, gf_border border, int64_t *row)
{
    const int w = img->width, by = gf_border_index(y, img->height, border);
    const size_t step = (size_t)img->channels, first = (size_t)(by < 0 ? 0 : by) * (size_t)w * step + (size_t)c;
    if (by < 0)
        for (int x = 0; x < w; x++)
            row[x] = 0;
    else if (img->depth == 16)
        for (int x = 0; x < w; x++)
            row[x] = gf_image_samples16(img)[first + (size_t)x * step];
    else
        for (int x = 0; x < w; x++)
            row[x] = img->pixels[first + (size_t)x * step];
    const int bx = gf_border_index(w, w, border);
    row[w] = bx < 0 ? 0 : row[bx];
}

/* A pass's counts: of every squared magnitude (integers below 2^33) by
 * its top bits (buckets[0] < 0), or by its low bits among those in bucket
 * buckets[i] into histogram i (i = 0, 1; buckets[1] < 0: one bucket).
 * Threads take bands of rows, each counting into its own histograms, which
 * are summed at the end (the same counts for any number of threads). */
typedef struct {
    const gf_image *img;
    const gf_diffuse *how;
    long buckets[2];
    size_t bins;           /* a histogram's bins */
    int bands;             /* of BAND_ROWS rows */
    atomic_int next_band, next_slot;
    size_t *counts;        /* slot s: its two histograms at counts + 2 s bins */
    int64_t *rows;         /* slot s: two rows of w + 1 samples */
} count_job;

#define BAND_ROWS 64

/* Rows y0..y1-1 of each channel; each image row is loaded once, the row
 * below becoming the next one's row. */
static void count_band(const count_job *j, int y0, int y1, size_t *first, size_t *second, int64_t *rows)
{
    const int w = j->img->width;
    for (int c = 0; c < j->how->channels_filtered; c++) {
        int64_t *row = rows, *below = rows + w + 1;
        load_row(j->img, y0, c, j->how->border, row);
        for (int y = y0; y < y1; y++) {
            load_row(j->img, y + 1, c, j->how->border, below);
            for (int x = 0; x < w; x++) {
                const int64_t dx = row[x + 1] - row[x], dy = below[x] - row[x];
                const uint64_t s = (uint64_t)(dx * dx + dy * dy);
                const long top = (long)(s >> FINE_BITS);
                if (j->buckets[0] < 0)
                    first[top]++;
                else if (top == j->buckets[0])
                    first[s & (FINE_BINS - 1)]++;
                else if (top == j->buckets[1])
                    second[s & (FINE_BINS - 1)]++;
            }
            int64_t *next = row;
            row = below;
            below = next;
        }
    }
}

static void *count_worker(void *arg)
{
    count_job *j = arg;
    const int slot = atomic_fetch_add(&j->next_slot, 1);
    size_t *first = j->counts + 2 * (size_t)slot * j->bins;
    int64_t *row = j->rows + 2 * (size_t)slot * ((size_t)j->img->width + 1);
    for (int band; (band = atomic_fetch_add(&j->next_band, 1)) < j->bands;) {
        const int y0 = band * BAND_ROWS;
        count_band(j, y0, j->img->height - y0 > BAND_ROWS ? y0 + BAND_ROWS : j->img->height, first,
                   first + j->bins, row);
    }
    return NULL;
}

/* One pass into out[0] (and out[1] for a second bucket), bins each; 0, or
 * -1 when out of memory. */
static int count(const gf_image *img, const gf_diffuse *how, const long *buckets, size_t bins,
                 size_t **out)
{
    count_job j = {.img = img, .how = how, .buckets = {buckets[0], buckets[1]}, .bins = bins,
                   .bands = (img->height + BAND_ROWS - 1) / BAND_ROWS};
    int threads = gf_image_threads();
    threads = threads < j.bands ? threads : j.bands;
    threads = threads < 16 ? threads : 16;  /* 2 MiB of histograms a thread */
    j.counts = calloc(2 * (size_t)threads * bins, sizeof(size_t));
    j.rows = malloc(2 * (size_t)threads * ((size_t)img->width + 1) * sizeof(int64_t));
    if (!j.counts || !j.rows) {
        free(j.counts);
        free(j.rows);
        gf_set_error("out of memory");
        return -1;
    }
    atomic_init(&j.next_band, 0);
    atomic_init(&j.next_slot, 0);
    gf_run_shared(count_worker, &j, threads);
    for (int h = 0; h < 2; h++)
        if (out[h])
            for (int t = 0; t < threads; t++)
                for (size_t i = 0; i < bins; i++)
                    out[h][i] += j.counts[(2 * (size_t)t + (size_t)h) * bins + i];
    free(j.counts);
    free(j.rows);
    return 0;
}

/* The bin holding the rank-th value (from 0) of the counts; *rank becomes
 * its rank inside the bin. */
static size_t find_bin(const size_t *bins, size_t count_bins, size_t *rank)
{
    size_t b = 0;
    while (b + 1 < count_bins && *rank >= bins[b])
        *rank -= bins[b++];
    return b;
}

/* The squared magnitudes of ranks lo and hi: their buckets from the
 * coarse counts, then one pass for the fine counts of both. 0 or -1. */
static int values_at(const gf_image *img, const gf_diffuse *how, const size_t *coarse, size_t lo,
                     size_t hi, size_t **fine, double *a, double *b)
{
    const long bucket_lo = (long)find_bin(coarse, COARSE_BINS, &lo);
    const long bucket_hi = (long)find_bin(coarse, COARSE_BINS, &hi);
    const long buckets[2] = {bucket_lo, bucket_hi == bucket_lo ? -1 : bucket_hi};
    if (count(img, how, buckets, FINE_BINS, fine) != 0)
        return -1;
    *a = (double)(((size_t)bucket_lo << FINE_BITS) | find_bin(fine[0], FINE_BINS, &lo));
    *b = (double)(((size_t)bucket_hi << FINE_BITS) |
                  find_bin(fine[bucket_hi == bucket_lo ? 0 : 1], FINE_BINS, &hi));
    return 0;
}

int gf_diffuse_percentile_k(const gf_image *img, const gf_diffuse *how, double *k)
{
    size_t *coarse = calloc(COARSE_BINS, sizeof(size_t));
    size_t *fine[2] = {calloc(FINE_BINS, sizeof(size_t)), calloc(FINE_BINS, sizeof(size_t))};
    size_t *coarse_out[2] = {coarse, NULL};
    const long all[2] = {-1, -1};
    double a2 = 0.0, b2 = 0.0;
    int status = -1;
    if (!coarse || !fine[0] || !fine[1])
        gf_set_error("out of memory");
    else if (count(img, how, all, COARSE_BINS, coarse_out) == 0) {
        const size_t n = (size_t)img->width * (size_t)img->height * (size_t)how->channels_filtered;
        /* numpy.percentile's default ('linear'), its interpolation included */
        const double at = how->percentile / 100.0 * (double)(n - 1);
        const size_t lo = (size_t)floor(at), hi = lo + 1 < n ? lo + 1 : lo;
        const double t = at - (double)lo;
        status = values_at(img, how, coarse, lo, hi, fine, &a2, &b2);
        const double a = sqrt(a2), b = sqrt(b2), diff = b - a;
        if (status == 0)
            *k = t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
    }
    free(coarse);
    free(fine[0]);
    free(fine[1]);
    return status;
}
