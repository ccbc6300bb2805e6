/* diffuse_k.c - K from a percentile of the gradient magnitudes (diffuse_k.h).
 *
 * The squared magnitudes are integers below 2^33 (samples of 16 bits at
 * most), so the values at two ranks are found exactly without sorting or a
 * copy of them: a histogram of their top 16 bits, then, in a second pass,
 * one of the low 17 bits inside each bucket that holds one of the ranks.
 * A pass reads the image a row at a time, the border mode applied once a
 * row. */
#include "diffuse_k.h"

#include <math.h>
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

/* Counts of every squared magnitude (integers below 2^33) by its top bits
 * (buckets[0] < 0), or by its low bits among those in bucket buckets[i]
 * into fine[i] (i = 0, 1; buckets[1] < 0: one bucket). */
static void count(const gf_image *img, const gf_diffuse *how, const long *buckets, size_t **bins,
                  int64_t *rows)
{
    const int w = img->width;
    int64_t *row = rows, *below = rows + w + 1;
    for (int y = 0; y < img->height; y++)
        for (int c = 0; c < how->channels_filtered; c++) {
            load_row(img, y, c, how->border, row);
            load_row(img, y + 1, c, how->border, below);
            for (int x = 0; x < w; x++) {
                const int64_t dx = row[x + 1] - row[x], dy = below[x] - row[x];
                const uint64_t s = (uint64_t)(dx * dx + dy * dy);
                const long top = (long)(s >> FINE_BITS);
                if (buckets[0] < 0)
                    bins[0][top]++;
                else if (top == buckets[0])
                    bins[0][s & (FINE_BINS - 1)]++;
                else if (top == buckets[1])
                    bins[1][s & (FINE_BINS - 1)]++;
            }
        }
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
 * coarse counts, then one pass for the fine counts of both. */
static void values_at(const gf_image *img, const gf_diffuse *how, const size_t *coarse, size_t lo,
                      size_t hi, size_t **fine, int64_t *rows, double *a, double *b)
{
    const long bucket_lo = (long)find_bin(coarse, COARSE_BINS, &lo);
    const long bucket_hi = (long)find_bin(coarse, COARSE_BINS, &hi);
    const long buckets[2] = {bucket_lo, bucket_hi == bucket_lo ? -1 : bucket_hi};
    count(img, how, buckets, fine, rows);
    *a = (double)(((size_t)bucket_lo << FINE_BITS) | find_bin(fine[0], FINE_BINS, &lo));
    *b = (double)(((size_t)bucket_hi << FINE_BITS) |
                  find_bin(fine[bucket_hi == bucket_lo ? 0 : 1], FINE_BINS, &hi));
}

int gf_diffuse_percentile_k(const gf_image *img, const gf_diffuse *how, double *k)
{
    size_t *coarse = calloc(COARSE_BINS, sizeof(size_t));
    size_t *fine[2] = {calloc(FINE_BINS, sizeof(size_t)), calloc(FINE_BINS, sizeof(size_t))};
    int64_t *rows = malloc(2 * ((size_t)img->width + 1) * sizeof(int64_t));
    if (!coarse || !fine[0] || !fine[1] || !rows) {
        free(coarse);
        free(fine[0]);
        free(fine[1]);
        free(rows);
        gf_set_error("out of memory");
        return -1;
    }
    const long all[2] = {-1, -1};
    count(img, how, all, &coarse, rows);
    const size_t n = (size_t)img->width * (size_t)img->height * (size_t)how->channels_filtered;
    /* numpy.percentile's default ('linear'), its interpolation included */
    const double at = how->percentile / 100.0 * (double)(n - 1);
    const size_t lo = (size_t)floor(at), hi = lo + 1 < n ? lo + 1 : lo;
    const double t = at - (double)lo;
    double a2, b2;
    values_at(img, how, coarse, lo, hi, fine, rows, &a2, &b2);
    const double a = sqrt(a2), b = sqrt(b2);
    const double diff = b - a;
    *k = t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
    free(coarse);
    free(fine[0]);
    free(fine[1]);
    free(rows);
    return 0;
}
