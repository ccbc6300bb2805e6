/* mask_params.c - masks built from parameters (see mask_params.h). */
#include "mask_params.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define MAX_PARAMS 4
#define MAX_RADIUS ((GF_MASK_MAX_SIZE - 1) / 2)

typedef struct {
    const char *key;
    double fallback;          /* NAN: derived from the others (radius, sigma2) */
    double low, high;         /* the accepted range, inclusive */
    int whole;                /* a whole number (a radius) */
} param_info;

typedef struct kind_info kind_info;
typedef int (*mask_builder)(const kind_info *kind, const double *v, gf_mask *mask);

struct kind_info {
    const char *name;
    const char *summary;
    mask_builder build;
    int count;
    param_info params[MAX_PARAMS];
};

/* ---- building ------------------------------------------------------------ */

/* Radius rule shared by every gaussian-based mask: ceil(3 sigma), at least 1. */
static int gaussian_radius(double sigma, double asked)
{
    if (!isnan(asked))
        return (int)asked;
    const double r = ceil(3.0 * sigma);
    return r < 1.0 ? 1 : (r > MAX_RADIUS ? MAX_RADIUS : (int)r);
}

/* exp(-i^2 / 2 sigma^2) for i = -radius..radius, normalized to sum 1. */
static void gaussian_taps(double sigma, int radius, double *taps)
{
    double total = 0.0;
    for (int i = -radius; i <= radius; i++)
        total += taps[i + radius] = exp(-(double)i * i / (2.0 * sigma * sigma));
    for (int i = 0; i <= 2 * radius; i++)
        taps[i] /= total;
}

/* One matrix of (2 radius + 1)^2 zeroed taps, scale 1, offset 0. */
static int square_mask(int radius, gf_mask *mask)
{
    const int size = 2 * radius + 1;  /* at most GF_MASK_MAX_SIZE: MAX_RADIUS */
    if (gf_mask_allocate(mask, size, size, 1) < 0)
        return -1;
    mask->count = 1;
    mask->scale[0] = 1.0;
    return 0;
}

/* The gaussian as column x row: weights[y][x] = g[y] * g[x] exactly. */
static int separable_gaussian(double sigma, int radius, gf_mask *mask)
{
    if (square_mask(radius, mask) < 0)
        return -1;
    const int size = mask->width;
    gaussian_taps(sigma, radius, mask->row);
    memcpy(mask->column, mask->row, (size_t)size * sizeof(double));
    for (int y = 0; y < size; y++)
        for (int x = 0; x < size; x++)
            mask->weights[0][y * size + x] = mask->column[y] * mask->row[x];
    mask->separable = 1;
    return 0;
}

/* (2 radius + 1)^2 ones over their count. */
static int box_of(int radius, gf_mask *mask)
{
    const int size = 2 * radius + 1;
    if (square_mask(radius, mask) < 0)
        return -1;
    for (int i = 0; i < size * size; i++)
        mask->weights[0][i] = 1.0;
    mask->scale[0] = (double)size * size;
    gf_mask_find_factors(mask);
    return 0;
}

static int build_box(const kind_info *kind, const double *v, gf_mask *mask)
{
    const int size = 2 * (int)v[0] + 1;
    snprintf(mask->description, sizeof mask->description, "%s, %dx%d", kind->summary, size, size);
    return box_of((int)v[0], mask);
}

/* The radii of n boxes whose cascade has about the variance of a gaussian
 * of sigma (Kovesi, "Fast almost-Gaussian filtering", 2010): odd widths
 * wl and wl + 2 around sqrt(12 sigma^2 / n + 1), the first m of them wl,
 * m = the rounded (half up) solution of sum (w_i^2 - 1) / 12 = sigma^2. */
static void cascade_radii(double sigma, int n, int *radii)
{
    int wl = (int)floor(sqrt(12.0 * sigma * sigma / n + 1.0));
    if (wl % 2 == 0)
        wl--;
    const double m_ideal = (12.0 * sigma * sigma - n * (double)wl * wl - 4.0 * n * wl - 3.0 * n) /
                           (-4.0 * wl - 4.0);
    const double rounded = floor(m_ideal + 0.5);
    const int m = rounded < 0 ? 0 : rounded > n ? n : (int)rounded;
    for (int i = 0; i < n; i++) {
        const int width = i < m ? wl : wl + 2, radius = (width - 1) / 2;
        radii[i] = radius < MAX_RADIUS ? radius : MAX_RADIUS;
    }
}

/* boxes = n > 0 is no one mask but n of them, which the pipeline takes
 * from gf_mask_params_cascade. */
static int build_gaussian(const kind_info *kind, const double *v, gf_mask *mask)
{
    if (v[2] > 0) {
        gf_set_error("mask %s: boxes=%d is a chain of box masks, not one mask", mask->name, (int)v[2]);
        return -1;
    }
    const int radius = gaussian_radius(v[0], v[1]);
    snprintf(mask->description, sizeof mask->description, "%s, sigma %g, %dx%d", kind->summary,
             v[0], 2 * radius + 1, 2 * radius + 1);
    return separable_gaussian(v[0], radius, mask);
}

/* unsharp and sharpen: the gaussian blur, combined with the source. */
static int blur_and_combine(const kind_info *kind, double sigma, double amount, double threshold,
                            double radius_asked, gf_mask *mask)
{
    const int radius = gaussian_radius(sigma, radius_asked);
    snprintf(mask->description, sizeof mask->description,
             "%s, sigma %g, amount %g, threshold %g, %dx%d", kind->summary, sigma, amount,
             threshold, 2 * radius + 1, 2 * radius + 1);
    if (separable_gaussian(sigma, radius, mask) < 0)
        return -1;
    mask->combine = GF_COMBINE_UNSHARP;
    mask->amount = amount;
    mask->threshold = threshold;
    return 0;
}

static int build_unsharp(const kind_info *kind, const double *v, gf_mask *mask)
{
    return blur_and_combine(kind, v[0], v[1], v[2], v[3], mask);
}

static int build_sharpen(const kind_info *kind, const double *v, gf_mask *mask)
{
    return blur_and_combine(kind, v[0], v[1], 0.0, v[2], mask);
}

/* Shift the weights to sum 0 (a flat image gives the offset). */
static void zero_sum(gf_mask *mask)
{
    const int taps = mask->width * mask->height;
    double total = 0.0;
    for (int i = 0; i < taps; i++)
        total += mask->weights[0][i];
    for (int i = 0; i < taps; i++)
        mask->weights[0][i] -= total / taps;
}

static int build_log(const kind_info *kind, const double *v, gf_mask *mask)
{
    const double sigma = v[0];
    const int radius = gaussian_radius(sigma, v[2]), size = 2 * radius + 1;
    snprintf(mask->description, sizeof mask->description, "%s, sigma %g, %dx%d", kind->summary,
             sigma, size, size);
    if (square_mask(radius, mask) < 0)
        return -1;
    double total = 0.0;
    for (int y = -radius; y <= radius; y++)
        for (int x = -radius; x <= radius; x++)
            total += exp(-(double)(x * x + y * y) / (2.0 * sigma * sigma));
    for (int y = -radius; y <= radius; y++)
        for (int x = -radius; x <= radius; x++) {
            const double r2 = (double)(x * x + y * y) / (sigma * sigma);
            mask->weights[0][(y + radius) * size + x + radius] = (2.0 - r2) * exp(-r2 / 2.0) / total;
        }
    zero_sum(mask);
    mask->offset[0] = v[1];
    gf_mask_find_factors(mask);
    return 0;
}

static int build_dog(const kind_info *kind, const double *v, gf_mask *mask)
{
    const double sigma = v[0], sigma2 = isnan(v[1]) ? 1.6 * v[0] : v[1];
    const int radius = gaussian_radius(sigma > sigma2 ? sigma : sigma2, v[3]), size = 2 * radius + 1;
    snprintf(mask->description, sizeof mask->description, "%s, sigma %g - %g, %dx%d",
             kind->summary, sigma, sigma2, size, size);
    double *g1 = malloc((size_t)size * sizeof *g1), *g2 = malloc((size_t)size * sizeof *g2);
    int status = g1 && g2 ? square_mask(radius, mask) : -1;
    if (status == 0) {
        gaussian_taps(sigma, radius, g1);
        gaussian_taps(sigma2, radius, g2);
        for (int y = 0; y < size; y++)
            for (int x = 0; x < size; x++)
                mask->weights[0][y * size + x] = g1[y] * g1[x] - g2[y] * g2[x];
        mask->offset[0] = v[2];
        gf_mask_find_factors(mask);
    } else if (!g1 || !g2) {
        gf_set_error("out of memory");
    }
    free(g1);
    free(g2);
    return status;
}

/* ---- the table ------------------------------------------------------------- */

#define SIGMA_MAX 682.0  /* 3 sigma within MAX_RADIUS */
/* the half-width of every gaussian-based mask; default ceil(3 sigma) */
#define RADIUS {"radius", NAN, 0, MAX_RADIUS, 1}
#define SIGMA(key, fallback) {key, fallback, 1e-3, SIGMA_MAX, 0}
#define OFFSET {"offset", 0.0, -1e6, 1e6, 0}
#define AMOUNT {"amount", 1.0, 0, 1000, 0}

static const kind_info kinds[] = {
    {"gaussian", "gaussian blur", build_gaussian, 3,
     {SIGMA("sigma", 1.0), RADIUS, {"boxes", 0, 0, GF_MASK_MAX_BOXES, 1}}},
    {"box", "box blur", build_box, 1, {{"radius", 1.0, 0, MAX_RADIUS, 1}}},
    {"unsharp", "unsharp mask", build_unsharp, 4,
     {SIGMA("sigma", 1.0), AMOUNT, {"threshold", 0.0, 0, 65535, 0}, RADIUS}},
    {"sharpen", "sharpen", build_sharpen, 3, {SIGMA("sigma", 1.0), AMOUNT, RADIUS}},
    {"log", "Laplacian of gaussian", build_log, 3, {SIGMA("sigma", 1.0), OFFSET, RADIUS}},
    {"dog", "difference of gaussians", build_dog, 4,
     {SIGMA("sigma", 1.0), SIGMA("sigma2", NAN), OFFSET, RADIUS}},
};
#define KIND_COUNT ((int)(sizeof kinds / sizeof kinds[0]))

/* ---- parsing ---------------------------------------------------------------- */

static const kind_info *find_kind(const char *name, size_t length)
{
    for (int i = 0; i < KIND_COUNT; i++)
        if (strlen(kinds[i].name) == length && strncmp(kinds[i].name, name, length) == 0)
            return &kinds[i];
    return NULL;
}

static int param_index(const kind_info *kind, const char *key, size_t length)
{
    for (int i = 0; i < kind->count; i++)
        if (strlen(kind->params[i].key) == length && strncmp(kind->params[i].key, key, length) == 0)
            return i;
    return -1;
}

static void key_list(const kind_info *kind, char *out, size_t size)
{
    out[0] = '\0';
    for (int i = 0; i < kind->count; i++) {
        const size_t used = strlen(out);
        snprintf(out + used, size - used, "%s%s", i ? ", " : "", kind->params[i].key);
    }
}

/* One "key=value" or "value" (the index-th) item into v[]. */
static int parse_item(const kind_info *kind, const char *spec, char *item, int index, int *keyed,
                      double *v, int *given)
{
    char *equals = strchr(item, '='), *text = equals ? equals + 1 : item;
    int at = index;
    if (equals) {
        *keyed = 1;
        at = param_index(kind, item, (size_t)(equals - item));
    } else if (*keyed) {
        gf_set_error("mask %s: a value without its key after a 'key=value'", spec);
        return -1;
    }
    char keys[128];
    key_list(kind, keys, sizeof keys);
    if (at < 0 || at >= kind->count) {
        gf_set_error("mask %s: %s takes %s", spec, kind->name, keys);
        return -1;
    }
    const param_info *param = &kind->params[at];
    char *end;
    errno = 0;
    const double value = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(value) ||
        value < param->low || value > param->high || (param->whole && value != floor(value))) {
        gf_set_error("mask %s: %s must be a %s from %g to %g", spec, param->key,
                     param->whole ? "whole number" : "number", param->low, param->high);
        return -1;
    }
    if (given[at]) {
        gf_set_error("mask %s: %s given twice", spec, param->key);
        return -1;
    }
    given[at] = 1;
    v[at] = value;
    return 0;
}

static int parse_values(const kind_info *kind, const char *spec, const char *values, double *v)
{
    int given[MAX_PARAMS] = {0}, keyed = 0, index = 0, status = 0;
    for (int i = 0; i < kind->count; i++)
        v[i] = kind->params[i].fallback;
    char *copy = strdup(values);
    if (!copy) {
        gf_set_error("out of memory");
        return -1;
    }
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && status == 0;
         item = strtok_r(NULL, ",", &save))
        status = parse_item(kind, spec, item, index++, &keyed, v, given);
    free(copy);
    return status;
}

int gf_mask_from_params(const char *spec, gf_mask *mask)
{
    const char *colon = strchr(spec, ':');
    const size_t length = colon ? (size_t)(colon - spec) : strlen(spec);
    const kind_info *kind = find_kind(spec, length);
    if (!kind) {
        if (!colon)
            return 0;
        gf_set_error("no parametric mask '%.*s' (gaussian, box, unsharp, sharpen, log, dog)",
                     (int)length, spec);
        return -1;
    }
    memset(mask, 0, sizeof *mask);
    double v[MAX_PARAMS];
    if (parse_values(kind, spec, colon ? colon + 1 : "", v) < 0)
        return -1;
    snprintf(mask->name, sizeof mask->name, "%s", spec);
    if (kind->build(kind, v, mask) < 0) {
        gf_mask_release(mask);
        return -1;
    }
    return 1;
}

int gf_mask_params_cascade(const char *spec, int radii[GF_MASK_MAX_BOXES])
{
    const char *colon = strchr(spec, ':');
    if (!colon || find_kind(spec, (size_t)(colon - spec)) != &kinds[0])
        return 0;
    double v[MAX_PARAMS];
    if (parse_values(&kinds[0], spec, colon + 1, v) < 0)
        return -1;
    if (v[2] == 0)
        return 0;
    if (!isnan(v[1])) {
        gf_set_error("mask %s: radius and boxes exclude each other (the boxes' widths follow from sigma)",
                     spec);
        return -1;
    }
    cascade_radii(v[0], (int)v[2], radii);
    return (int)v[2];
}

int gf_mask_box(int radius, gf_mask *mask)
{
    memset(mask, 0, sizeof *mask);
    const int size = 2 * radius + 1;
    snprintf(mask->name, sizeof mask->name, "box:%d", radius);
    snprintf(mask->description, sizeof mask->description, "box blur, %dx%d", size, size);
    if (box_of(radius, mask) < 0) {
        gf_mask_release(mask);
        return -1;
    }
    return 0;
}

void gf_mask_params_list(void)
{
    printf("# parametric: NAME:KEY=VALUE,... or NAME:VALUE,... in this order\n");
    for (int i = 0; i < KIND_COUNT; i++) {
        const kind_info *kind = &kinds[i];
        char usage[160];
        snprintf(usage, sizeof usage, "%s:", kind->name);
        for (int p = 0; p < kind->count; p++) {
            const size_t used = strlen(usage);
            const param_info *param = &kind->params[p];
            if (isnan(param->fallback))
                snprintf(usage + used, sizeof usage - used, "%s%s=auto", p ? "," : "", param->key);
            else
                snprintf(usage + used, sizeof usage - used, "%s%s=%g", p ? "," : "", param->key,
                         param->fallback);
        }
        printf("%-52s %s\n", usage, kind->summary);
    }
}
