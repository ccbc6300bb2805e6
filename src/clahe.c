/* clahe.c - OpenCV's CLAHE (imgproc/src/clahe.cpp, CLAHE_Impl::apply) on
 * one plane of 8- or 16-bit samples, and its use on an image: the luma of
 * RGB through OpenCV's fixed-point YCrCb, or each colour channel.
 *
 * The arithmetic is OpenCV's, operation by operation, in float where it
 * uses float, never contracted to FMA, so the results are its bytes. Two
 * things differ, in memory only: the padded image (BORDER_REFLECT_101) is
 * read through index maps instead of copied, and the tile look-up tables
 * are built one tile row at a time, as the interpolation reaches them, two
 * rows held. */
#include "clahe.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tone.h"
#include "util.h"

/* gcc does not contract a * b + c under -std=c11; clang does unless told */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

typedef struct {
    const uint16_t *plane;      /* width * height samples */
    int width, height;
    int tiles_x, tiles_y;
    int tile_w, tile_h;         /* of the padded image */
    int bins;                   /* 256, or 65536 at 16 bits */
    int clip_limit;             /* per bin; 0: no clipping */
    float lut_scale, inv_tw, inv_th;
    int *xmap, *ymap;           /* padded coordinate -> the plane's */
    int *hist;
    uint16_t *luts[2];          /* tile rows, by row parity */
    int held[2];                /* the tile row each holds; -1 none */
    int *ind1, *ind2;           /* per column: the left and right tile's offset */
    float *xa, *xa1;            /* per column: the weights of those tiles */
} clahe_state;

/* OpenCV's borderInterpolate for BORDER_REFLECT_101, p >= 0. */
static int reflect_101(int p, int len)
{
    if (len == 1)
        return 0;
    while (p >= len || p < 0)
        p = p < 0 ? -p : 2 * (len - 1) - p;
    return p;
}

/* copyMakeBorder's size (bottom and right only), when a side is not a
 * multiple of the grid: both sides grow, by tiles - size % tiles. */
static void padded_size(const gf_clahe *how, int width, int height, int *w, int *h)
{
    *w = width;
    *h = height;
    if (width % how->tiles_x != 0 || height % how->tiles_y != 0) {
        *w += how->tiles_x - width % how->tiles_x;
        *h += how->tiles_y - height % how->tiles_y;
    }
}

/* Sizes, clip limit and scale as CLAHE_Impl::apply computes them. */
void gf_clahe_grid_of(const gf_clahe *how, int width, int height, int bins, gf_clahe_grid *g)
{
    int pw, ph;
    padded_size(how, width, height, &pw, &ph);
    g->tile_w = pw / how->tiles_x;
    g->tile_h = ph / how->tiles_y;
    const int total = g->tile_w * g->tile_h;
    g->lut_scale = (float)(bins - 1) / (float)total;
    g->clip_limit = 0;
    if (how->clip > 0.0) {
        /* OpenCV's int conversion; a limit past INT_MAX never clips */
        const double limit = how->clip * total / bins;
        g->clip_limit = limit >= (double)INT_MAX ? INT_MAX : (int)limit;
        if (g->clip_limit < 1)
            g->clip_limit = 1;
    }
    g->inv_tw = 1.0f / (float)g->tile_w;
    g->inv_th = 1.0f / (float)g->tile_h;
}

static void clip_histogram(int *hist, int bins, int limit)
{
    int clipped = 0;
    for (int i = 0; i < bins; i++)
        if (hist[i] > limit) {
            clipped += hist[i] - limit;
            hist[i] = limit;
        }
    const int batch = clipped / bins;
    int residual = clipped - batch * bins;
    for (int i = 0; i < bins; i++)
        hist[i] += batch;
    if (residual != 0) {
        const int step = bins / residual > 1 ? bins / residual : 1;
        for (int i = 0; i < bins && residual > 0; i += step, residual--)
            hist[i]++;
    }
}

static uint16_t saturate(float v, int max)
{
    const long r = lrintf(v);  /* cvRound: half to even */
    return (uint16_t)(r < 0 ? 0 : r > max ? max : r);
}

static void tile_lut(clahe_state *s, int tx, int ty, uint16_t *lut)
{
    memset(s->hist, 0, (size_t)s->bins * sizeof *s->hist);
    for (int y = ty * s->tile_h; y < (ty + 1) * s->tile_h; y++) {
        const uint16_t *row = s->plane + (size_t)s->ymap[y] * s->width;
        for (int x = tx * s->tile_w; x < (tx + 1) * s->tile_w; x++)
            s->hist[row[s->xmap[x]]]++;
    }
    if (s->clip_limit > 0)
        clip_histogram(s->hist, s->bins, s->clip_limit);
    int sum = 0;
    for (int i = 0; i < s->bins; i++) {
        sum += s->hist[i];
        lut[i] = saturate((float)sum * s->lut_scale, s->bins - 1);
    }
}

/* The look-up tables of tile row ty, built on first use. */
static const uint16_t *tile_row_luts(clahe_state *s, int ty)
{
    uint16_t *luts = s->luts[ty & 1];
    if (s->held[ty & 1] != ty) {
        for (int tx = 0; tx < s->tiles_x; tx++)
            tile_lut(s, tx, ty, luts + (size_t)tx * s->bins);
        s->held[ty & 1] = ty;
    }
    return luts;
}

/* CLAHE_Interpolation_Body's per-column part, with its float order. */
static void column_weights(clahe_state *s)
{
    const float inv_tw = s->inv_tw;
    for (int x = 0; x < s->width; x++) {
        const float txf = (float)x * inv_tw - 0.5f;
        int tx1 = (int)floorf(txf);
        int tx2 = tx1 + 1;
        s->xa[x] = txf - (float)tx1;
        s->xa1[x] = 1.0f - s->xa[x];
        tx1 = tx1 > 0 ? tx1 : 0;
        tx2 = tx2 < s->tiles_x - 1 ? tx2 : s->tiles_x - 1;
        s->ind1[x] = tx1 * s->bins;
        s->ind2[x] = tx2 * s->bins;
    }
}

/* Row y of the result into out. */
static void clahe_row(clahe_state *s, int y, uint16_t *out)
{
    const float inv_th = s->inv_th;
    const float tyf = (float)y * inv_th - 0.5f;
    int ty1 = (int)floorf(tyf);
    int ty2 = ty1 + 1;
    const float ya = tyf - (float)ty1, ya1 = 1.0f - ya;
    ty1 = ty1 > 0 ? ty1 : 0;
    ty2 = ty2 < s->tiles_y - 1 ? ty2 : s->tiles_y - 1;
    const uint16_t *lut1 = tile_row_luts(s, ty1);
    const uint16_t *lut2 = tile_row_luts(s, ty2);
    const uint16_t *src = s->plane + (size_t)y * s->width;
    for (int x = 0; x < s->width; x++) {
        const int v = src[x];
        const int i1 = s->ind1[x] + v, i2 = s->ind2[x] + v;
        const float res = ((float)lut1[i1] * s->xa1[x] + (float)lut1[i2] * s->xa[x]) * ya1 +
                          ((float)lut2[i1] * s->xa1[x] + (float)lut2[i2] * s->xa[x]) * ya;
        out[x] = saturate(res, s->bins - 1);
    }
}

static void state_free(clahe_state *s)
{
    free(s->xmap);
    free(s->ymap);
    free(s->hist);
    free(s->luts[0]);
    free(s->luts[1]);
    free(s->ind1);
    free(s->ind2);
    free(s->xa);
    free(s->xa1);
}

/* The state of one plane: gf_clahe_grid_of's numbers and the buffers. */
static int state_init(clahe_state *s, const gf_clahe *how)
{
    gf_clahe_grid g;
    gf_clahe_grid_of(how, s->width, s->height, s->bins, &g);
    s->tile_w = g.tile_w;
    s->tile_h = g.tile_h;
    s->clip_limit = g.clip_limit;
    s->lut_scale = g.lut_scale;
    s->inv_tw = g.inv_tw;
    s->inv_th = g.inv_th;
    const int pw = s->tile_w * s->tiles_x, ph = s->tile_h * s->tiles_y;
    const size_t luts = (size_t)s->tiles_x * (size_t)s->bins;
    s->xmap = malloc((size_t)pw * sizeof *s->xmap);
    s->ymap = malloc((size_t)ph * sizeof *s->ymap);
    s->hist = malloc((size_t)s->bins * sizeof *s->hist);
    s->luts[0] = malloc(luts * sizeof *s->luts[0]);
    s->luts[1] = malloc(luts * sizeof *s->luts[1]);
    s->ind1 = malloc((size_t)s->width * sizeof *s->ind1);
    s->ind2 = malloc((size_t)s->width * sizeof *s->ind2);
    s->xa = malloc((size_t)s->width * sizeof *s->xa);
    s->xa1 = malloc((size_t)s->width * sizeof *s->xa1);
    if (!s->xmap || !s->ymap || !s->hist || !s->luts[0] || !s->luts[1] || !s->ind1 ||
        !s->ind2 || !s->xa || !s->xa1) {
        gf_set_error("out of memory for --clahe");
        return -1;
    }
    for (int x = 0; x < pw; x++)
        s->xmap[x] = reflect_101(x, s->width);
    for (int y = 0; y < ph; y++)
        s->ymap[y] = reflect_101(y, s->height);
    s->held[0] = s->held[1] = -1;
    column_weights(s);
    return 0;
}

/* What becomes of one row of results: a channel's samples, or the luma. */
typedef struct {
    gf_image *img;
    int channel;                /* -1: the luma of RGB */
    void *lut;                  /* 256 or 65536 entries, for the luma */
} clahe_sink;

static void store_row(const clahe_sink *k, int y, const uint16_t *out)
{
    const gf_image *img = k->img;
    const size_t first = (size_t)y * img->width * img->channels;
    for (int x = 0; x < img->width; x++) {
        const size_t at = first + (size_t)x * img->channels;
        if (img->depth == 16) {
            uint16_t *p = (uint16_t *)(void *)img->pixels + at;
            if (k->channel >= 0) {
                p[k->channel] = out[x];
            } else {
                /* gf_map_luma16 reads lut[Y] only: Y -> this pixel's result */
                ((unsigned short *)k->lut)[gf_luma(p[0], p[1], p[2])] = out[x];
                gf_map_luma16(p, k->lut);
            }
        } else {
            unsigned char *p = img->pixels + at;
            if (k->channel >= 0) {
                p[k->channel] = (unsigned char)out[x];
            } else {
                ((unsigned char *)k->lut)[gf_luma(p[0], p[1], p[2])] = (unsigned char)out[x];
                gf_map_luma(p, k->lut);
            }
        }
    }
}

/* The plane CLAHE reads: a channel's samples, or the luma of RGB. */
static void fill_plane(const clahe_sink *k, uint16_t *plane)
{
    const gf_image *img = k->img;
    const size_t count = (size_t)img->width * img->height;
    for (size_t i = 0; i < count; i++) {
        const size_t at = i * img->channels;
        if (img->depth == 16) {
            const uint16_t *p = gf_image_samples16(img) + at;
            plane[i] = (uint16_t)(k->channel >= 0 ? p[k->channel] : gf_luma(p[0], p[1], p[2]));
        } else {
            const unsigned char *p = img->pixels + at;
            plane[i] = (uint16_t)(k->channel >= 0 ? p[k->channel] : gf_luma(p[0], p[1], p[2]));
        }
    }
}

static int clahe_plane(const gf_clahe *how, const clahe_sink *k, uint16_t *plane, uint16_t *row)
{
    gf_image *img = k->img;
    fill_plane(k, plane);
    clahe_state s = {.plane = plane, .width = img->width, .height = img->height,
                     .tiles_x = how->tiles_x, .tiles_y = how->tiles_y,
                     .bins = img->depth == 16 ? 65536 : 256};
    int status = state_init(&s, how);
    for (int y = 0; status == 0 && y < img->height; y++) {
        clahe_row(&s, y, row);
        store_row(k, y, row);
    }
    state_free(&s);
    return status;
}

int gf_clahe_image(gf_image *img, const void *clahe)
{
    const gf_clahe *how = clahe;
    const int colour = img->channels >= 3 ? 3 : 1;
    size_t count;
    if (gf_mul_size((size_t)img->width, (size_t)img->height, &count) < 0) {
        gf_set_error("image too large for --clahe");
        return -1;
    }
    uint16_t *plane = gf_malloc_large(count * sizeof *plane);
    uint16_t *row = malloc((size_t)img->width * sizeof *row);
    void *lut = malloc(65536 * sizeof(unsigned short));
    int status = 0;
    if (!plane || !row || !lut) {
        gf_set_error("out of memory for --clahe");
        status = -1;
    } else if (colour == 3 && !how->per_channel) {
        status = clahe_plane(how, &(clahe_sink){img, -1, lut}, plane, row);
    } else {
        for (int c = 0; status == 0 && c < colour; c++)
            status = clahe_plane(how, &(clahe_sink){img, c, lut}, plane, row);
    }
    free(plane);
    free(row);
    free(lut);
    return status;
}
