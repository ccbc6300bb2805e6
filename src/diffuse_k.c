/* diffuse_k.c - K from a percentile of the gradient magnitudes (diffuse_k.h).
 *
 * The squared magnitudes are integers below 2^33 (samples of 16 bits at
 * most), so the values at two ranks are found exactly without sorting or a
 * copy of them: a histogram of their top 16 bits, then one of the low 17
 * bits inside the bucket that holds the rank. */
#include "diffuse_k.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "util.h"

#define FINE_BITS 17
#define COARSE_BINS (1u << 16)
#define FINE_BINS (1u << FINE_BITS)

static int64_t sample(const gf_image *img, int x, int y, int c, gf_border border)
{
    const int bx = gf_border_index(x, img->width, border), by = gf_border_index(y, img->height, border);
    if (bx < 0 || by < 0)
        return 0;
    const size_t i = ((size_t)by * (size_t)img->width + (size_t)bx) * (size_t)img->channels + (size_t)c;
    return img->depth == 16 ? gf_image_samples16(img)[i] : img->pixels[i];
}

static uint64_t squared_gradient(const gf_image *img, int x, int y, int c, gf_border border)
{
    const int64_t u = sample(img, x, y, c, border);
    const int64_t dx = sample(img, x + 1, y, c, border) - u, dy = sample(img, x, y + 1, c, border) - u;
    return (uint64_t)(dx * dx + dy * dy);
}

/* Counts of every squared magnitude: by its top bits (bucket < 0), or by
 * its low bits among those in the bucket. */
static void count(const gf_image *img, const gf_diffuse *how, long bucket, size_t *bins)
{
    for (int y = 0; y < img->height; y++)
        for (int x = 0; x < img->width; x++)
            for (int c = 0; c < how->channels_filtered; c++) {
                const uint64_t s = squared_gradient(img, x, y, c, how->border);
                if (bucket < 0)
                    bins[s >> FINE_BITS]++;
                else if ((long)(s >> FINE_BITS) == bucket)
                    bins[s & (FINE_BINS - 1)]++;
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

/* The squared magnitude of the given rank. */
static double value_at(const gf_image *img, const gf_diffuse *how, const size_t *coarse,
                       size_t rank, size_t *fine)
{
    const size_t bucket = find_bin(coarse, COARSE_BINS, &rank);
    for (size_t i = 0; i < FINE_BINS; i++)
        fine[i] = 0;
    count(img, how, (long)bucket, fine);
    return (double)((bucket << FINE_BITS) | find_bin(fine, FINE_BINS, &rank));
}

int gf_diffuse_percentile_k(const gf_image *img, const gf_diffuse *how, double *k)
{
    size_t *coarse = calloc(COARSE_BINS, sizeof(size_t)), *fine = malloc(FINE_BINS * sizeof(size_t));
    if (!coarse || !fine) {
        free(coarse);
        free(fine);
        gf_set_error("out of memory");
        return -1;
    }
    count(img, how, -1, coarse);
    const size_t n = (size_t)img->width * (size_t)img->height * (size_t)how->channels_filtered;
    /* numpy.percentile's default ('linear'), its interpolation included */
    const double at = how->percentile / 100.0 * (double)(n - 1);
    const size_t lo = (size_t)floor(at), hi = lo + 1 < n ? lo + 1 : lo;
    const double t = at - (double)lo;
    const double a = sqrt(value_at(img, how, coarse, lo, fine));
    const double b = hi == lo ? a : sqrt(value_at(img, how, coarse, hi, fine));
    const double diff = b - a;
    *k = t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
    free(coarse);
    free(fine);
    return 0;
}
