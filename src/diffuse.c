/* diffuse.c - the float64 reference of --diffuse (see docs/diffuse.md).
 *
 * Each filtered channel is one plane of doubles; an iteration writes the
 * next plane from the current one with the explicit 4-neighbour scheme
 *   u' = u + step * sum over n in N, S, W, E of g(|u_n - u|) (u_n - u),
 * neighbours read through the border mode. A flux g(|d|) d is computed once
 * per edge and negated for the pixel across it (exact), so that each value
 * costs two conductances, not four. Bands of rows run on the image's
 * threads: every output reads only the previous plane, so the result is
 * the same for any number of threads. One rounding at the end. */
#include "diffuse.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "diffuse_k.h"
#include "util.h"

#define BAND_ROWS 32

typedef struct {
    gf_diffuse_kind kind;
    double k, step;
    int width, height;
    gf_border border;
    const double *cur;
    double *next;
    double *scratch;      /* SCRATCH_ROWS rows of width + 2 for each runner */
    int bands;
    atomic_int next_band, next_slot;
} step_job;

enum { SCRATCH_ROWS = 5 };

/* out[i] = g(|d|) d with d = b[i] - a[i], for i < n. */
static void flux_row(const step_job *j, const double *a, const double *b, double *out, int n)
{
    const double k = j->k;
    switch (j->kind) {
    case GF_DIFFUSE_HEAT:
        for (int i = 0; i < n; i++)
            out[i] = b[i] - a[i];
        break;
    case GF_DIFFUSE_PM_EXP:
        for (int i = 0; i < n; i++) {
            const double d = b[i] - a[i], r = d / k;
            out[i] = exp(-(r * r)) * d;
        }
        break;
    case GF_DIFFUSE_PM_RATIONAL:
        for (int i = 0; i < n; i++) {
            const double d = b[i] - a[i], r = d / k;
            out[i] = 1.0 / (1.0 + r * r) * d;
        }
        break;
    }
}

/* Row y of the current plane through the border mode; zero: the constant border's row. */
static const double *plane_row(const step_job *j, int y, const double *zero)
{
    const int r = gf_border_index(y, j->height, j->border);
    return r < 0 ? zero : j->cur + (size_t)r * (size_t)j->width;
}

/* Row y with one value more each side, read through the border mode. */
static void extend_row(const step_job *j, const double *row, double *ext)
{
    const int w = j->width;
    const int left = gf_border_index(-1, w, j->border), right = gf_border_index(w, w, j->border);
    ext[0] = left < 0 ? 0.0 : row[left];
    for (int x = 0; x < w; x++)
        ext[x + 1] = row[x];
    ext[w + 1] = right < 0 ? 0.0 : row[right];
}

/* Rows y0..y1-1 of the next plane. up: the flux into each pixel from the row
 * above (its north term negated); down: to the row below (its south term). */
static void step_band(const step_job *j, int y0, int y1, double *s)
{
    const int w = j->width;
    const size_t stride = (size_t)w + 2;
    double *zero = s, *up = s + stride, *down = s + 2 * stride, *ext = s + 3 * stride,
           *h = s + 4 * stride;
    flux_row(j, plane_row(j, y0 - 1, zero), plane_row(j, y0, zero), up, w);
    for (int y = y0; y < y1; y++) {
        const double *row = j->cur + (size_t)y * (size_t)w;
        double *out = j->next + (size_t)y * (size_t)w;
        flux_row(j, row, plane_row(j, y + 1, zero), down, w);
        extend_row(j, row, ext);
        flux_row(j, ext, ext + 1, h, w + 1);  /* h[x]: from x-1 to x */
        for (int x = 0; x < w; x++)
            out[x] = row[x] + j->step * (((-up[x] + down[x]) + -h[x]) + h[x + 1]);
        double *t = up;  /* the flux down from y is the flux into y + 1 */
        up = down;
        down = t;
    }
}

static void *step_worker(void *arg)
{
    step_job *j = arg;
    const int slot = atomic_fetch_add(&j->next_slot, 1);
    double *s = j->scratch + (size_t)slot * SCRATCH_ROWS * ((size_t)j->width + 2);
    for (int band; (band = atomic_fetch_add(&j->next_band, 1)) < j->bands;) {
        const int y0 = band * BAND_ROWS;
        step_band(j, y0, j->height - y0 > BAND_ROWS ? y0 + BAND_ROWS : j->height, s);
    }
    return NULL;
}

/* 'iterations' steps from planes[0]; the result in the plane returned. */
static double *iterate(step_job *j, double *planes[2], int iterations, int threads)
{
    int current = 0;
    for (int i = 0; i < iterations; i++) {
        j->cur = planes[current];
        j->next = planes[!current];
        atomic_store(&j->next_band, 0);
        atomic_store(&j->next_slot, 0);
        gf_run_shared(step_worker, j, threads);
        current = !current;
    }
    return planes[current];
}

static void load_channel(const gf_image *img, int c, double *plane)
{
    const size_t n = (size_t)img->width * (size_t)img->height, ch = (size_t)img->channels;
    if (img->depth == 16) {
        const uint16_t *in = gf_image_samples16(img);
        for (size_t i = 0; i < n; i++)
            plane[i] = in[i * ch + (size_t)c];
    } else {
        for (size_t i = 0; i < n; i++)
            plane[i] = img->pixels[i * ch + (size_t)c];
    }
}

/* The one rounding: half to even (nearbyint), clamped to the depth's range. */
static void store_channel(const double *plane, int c, gf_image *img)
{
    const size_t n = (size_t)img->width * (size_t)img->height, ch = (size_t)img->channels;
    const double top = img->depth == 16 ? 65535.0 : 255.0;
    for (size_t i = 0; i < n; i++) {
        double v = nearbyint(plane[i]);
        v = v < 0.0 ? 0.0 : (v > top ? top : v);
        if (img->depth == 16)
            ((uint16_t *)(void *)img->pixels)[i * ch + (size_t)c] = (uint16_t)v;
        else
            img->pixels[i * ch + (size_t)c] = (unsigned char)v;
    }
}

int gf_diffuse_check(const gf_diffuse *how)
{
    if (how->iterations < 1 || !(how->step > 0.0 && how->step <= GF_DIFFUSE_MAX_STEP) ||
        !(how->k >= 0.0) || !(how->percentile >= 0.0 && how->percentile <= 100.0)) {
        gf_set_error("diffuse: iterations must be 1 or more, the step over 0 and at most "
                     "%g (the explicit scheme's stability bound), K 0 or more, the percentile 0-100",
                     GF_DIFFUSE_MAX_STEP);
        return -1;
    }
    return 0;
}

void gf_diffuse_report(const gf_diffuse *how, double k, double ms)
{
    static const char *const names[] = {"heat", "pm-exp", "pm-rational"};
    fprintf(how->log, "gpufilter: diffuse: %s, %d iteration%s, step %g", names[how->kind],
            how->iterations, how->iterations == 1 ? "" : "s", how->step);
    if (how->kind != GF_DIFFUSE_HEAT) {
        if (how->k > 0.0)
            fprintf(how->log, ", K %g", k);
        else
            fprintf(how->log, ", K %.6g (percentile %g of the gradient magnitudes)", k,
                    how->percentile);
    }
    fprintf(how->log, ", %.1f ms\n", ms);
}

/* Runs the channels one after another on two planes and the runners' scratch. */
static void diffuse_channels(gf_image *img, const gf_diffuse *how, step_job *j, double *planes[2],
                             int threads)
{
    for (int c = 0; c < how->channels_filtered; c++) {
        load_channel(img, c, planes[0]);
        /* K 0 (a flat percentile): every conductance is 0, nothing moves */
        const double *result = j->kind != GF_DIFFUSE_HEAT && j->k == 0.0
                                   ? planes[0]
                                   : iterate(j, planes, how->iterations, threads);
        store_channel(result, c, img);
    }
}

int gf_diffuse_image(gf_image *img, const void *arg)
{
    const gf_diffuse *how = arg;
    if (gf_diffuse_check(how) < 0)
        return -1;
    const double t0 = gf_now_ms();
    double k = how->k;
    if (how->kind != GF_DIFFUSE_HEAT && k == 0.0 && gf_diffuse_percentile_k(img, how, &k) < 0)
        return -1;
    const int bands = (img->height + BAND_ROWS - 1) / BAND_ROWS, cores = gf_image_threads();
    const int threads = cores < bands ? cores : bands;
    const size_t n = (size_t)img->width * (size_t)img->height;
    const size_t scratch = (size_t)threads * SCRATCH_ROWS * ((size_t)img->width + 2);
    double *planes[2] = {gf_malloc_large(n * sizeof(double)), gf_malloc_large(n * sizeof(double))};
    double *rows = calloc(scratch, sizeof(double));
    int status = 0;
    if (!planes[0] || !planes[1] || !rows) {
        gf_set_error("diffuse: out of memory for two planes of %dx%d doubles",
                     img->width, img->height);
        status = -1;
    } else {
        step_job j = {.kind = how->kind, .k = k, .step = how->step, .width = img->width,
                      .height = img->height, .border = how->border, .scratch = rows,
                      .bands = bands};
        diffuse_channels(img, how, &j, planes, threads);
    }
    free(planes[0]);
    free(planes[1]);
    free(rows);
    if (status == 0 && how->log)
        gf_diffuse_report(how, k, gf_now_ms() - t0);
    return status;
}
