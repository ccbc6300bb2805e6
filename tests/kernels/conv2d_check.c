/* conv2d_check.c - every conv2d kernel version and tile against the
 * double-precision reference backend, on awkward sizes, in one process.
 *
 *   build/conv2d-check [--backend cuda|cpu] [--quick] [--verbose]
 *
 * Cases: every built-in mask and masks made for each arithmetic path
 * (integer weights of -128..127, integer columns times byte rows, boxes of
 * ones, byte columns times byte rows for the tensor cores, float weights,
 * even and one-sided shapes, gradient pairs), each on 1x1, 1x7, 7x1, 2x3,
 * 33x9, 257x131 and 208x45 images (rows of 16-byte multiples: the paths
 * that copy rows with cp.async) of every channel layout (alpha passed
 * through or filtered) and every border mode. With --backend cuda (the GPU machine)
 * each case runs on every version of the conv2d ladder with the automatic
 * tile and a set of fixed tiles, one CUDA context for all of them; a version
 * that refuses a tile or mask (a usage error) is counted, not failed. With
 * --backend cpu the fast CPU path is checked the same way (no GPU needed).
 *
 * The rule is the CLI suite's: at most 1 level apart, and at most 0.1% of
 * the values (rounded down: a tiny image must match exactly) not counting
 * those whose exact value lies on a rounding boundary (at_rounding_tie);
 * alpha that passes through exactly. Inputs come from GF_TEST_SEED,
 * printed, else a fresh seed (tests/unit/test_rng.h). Exit 0 when every
 * case passes, 1 on a mismatch or a backend failure, 2 on bad usage. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/test_rng.h"
#include "backend.h"
#include "builtin_masks.h"
#include "util.h"

#define MAX_MASKS 96
#define MAX_BACKENDS 64

/* ---- masks --------------------------------------------------------------------- */

typedef struct {
    gf_mask masks[MAX_MASKS];
    int count;
} mask_set;

static char mask_text[64 * 1024];

static void add_parsed(mask_set *set, const char *name)
{
    if (set->count < MAX_MASKS && gf_mask_parse(mask_text, name, &set->masks[set->count]) == 0)
        set->count++;
    else
        fprintf(stderr, "conv2d-check: cannot make mask %s: %s\n", name, gf_error());
}

/* Appends "W H SCALE OFFSET" and the rows of weights to mask_text. */
static void append_matrix(int w, int h, const double *weights, double scale, double offset)
{
    size_t n = strlen(mask_text);
    n += (size_t)snprintf(mask_text + n, sizeof mask_text - n, "%d %d %g %g\n", w, h, scale, offset);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            n += (size_t)snprintf(mask_text + n, sizeof mask_text - n, "%s%.17g", x ? " " : "",
                                  weights[y * w + x]);
        n += (size_t)snprintf(mask_text + n, sizeof mask_text - n, "\n");
    }
}

static double total_of(const double *weights, int taps)
{
    double sum = 0.0;
    for (int i = 0; i < taps; i++)
        sum += weights[i];
    return sum;
}

/* One matrix of w x h: kind picks the weights. */
enum { INTEGER, SEPARABLE_INTEGER, BOX, BYTE_PRODUCT, FLOAT };

static void add_made(mask_set *set, int kind, int w, int h)
{
    static double weights[GF_MASK_SMALL_SIZE * GF_MASK_SMALL_SIZE];
    double column[GF_MASK_SMALL_SIZE], row[GF_MASK_SMALL_SIZE];
    for (int i = 0; i < GF_MASK_SMALL_SIZE; i++) {
        column[i] = kind == BYTE_PRODUCT ? rng_int(0, 255) : rng_int(-3, 3);
        row[i] = kind == BYTE_PRODUCT ? rng_int(0, 255) : rng_int(-128, 127);
    }
    column[0] = kind == BYTE_PRODUCT ? 255 : 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double *v = &weights[y * w + x];
            switch (kind) {
            case INTEGER: *v = rng_int(-128, 127); break;
            case BOX: *v = 1; break;
            case FLOAT: *v = (double)rng_int(-300, 1000) / 997.0; break;
            default: *v = column[y] * row[x]; break;
            }
        }
    double total = total_of(weights, w * h);
    double scale = kind == FLOAT ? total : (total > 0 ? total : w * h);
    if (kind == SEPARABLE_INTEGER)
        scale = 64;
    static const char *const kinds[] = {"integer", "separable", "box", "bytes", "float"};
    char name[64];
    snprintf(name, sizeof name, "%s%dx%d", kinds[kind], w, h);
    mask_text[0] = '\0';
    append_matrix(w, h, weights, scale == 0 ? 1 : scale, kind == INTEGER ? 3 : 0);
    add_parsed(set, name);
}

/* Two random 3x3 matrices combined by magnitude, as sobel is. */
static void add_gradient_pair(mask_set *set)
{
    double weights[9];
    strcpy(mask_text, "combine magnitude\n");
    for (int m = 0; m < 2; m++) {
        for (int i = 0; i < 9; i++)
            weights[i] = rng_int(-4, 4);
        append_matrix(3, 3, weights, 1, 0);
    }
    add_parsed(set, "pair3x3");
}

static void make_masks(mask_set *set, int quick)
{
    set->count = 0;
    for (int i = 0; i < gf_builtin_mask_count && set->count < MAX_MASKS; i++)
        if (gf_mask_load(gf_builtin_masks[i].name, &set->masks[set->count]) == 0)
            set->count++;
    static const int integer_sizes[] = {3, 5, 7, 15};
    static const int separable_sizes[] = {5, 7, 9, 11, 15};
    static const int box_sizes[] = {3, 9, 15, 31};
    static const int product_sizes[] = {11, 21, 31};
    for (size_t i = 0; i < sizeof integer_sizes / sizeof *integer_sizes; i++)
        add_made(set, INTEGER, integer_sizes[i], integer_sizes[i]);
    for (size_t i = 0; i < sizeof separable_sizes / sizeof *separable_sizes; i++)
        add_made(set, SEPARABLE_INTEGER, separable_sizes[i], separable_sizes[i]);
    for (size_t i = 0; i < sizeof box_sizes / sizeof *box_sizes; i++)
        add_made(set, BOX, box_sizes[i], box_sizes[i]);
    for (size_t i = 0; i < sizeof product_sizes / sizeof *product_sizes && !quick; i++)
        add_made(set, BYTE_PRODUCT, product_sizes[i], product_sizes[i]);
    add_made(set, FLOAT, 5, 5);
    add_made(set, FLOAT, 4, 6);
    add_made(set, FLOAT, 1, 5);
    add_made(set, FLOAT, 5, 1);
    if (!quick)
        add_made(set, FLOAT, 31, 31);
    add_gradient_pair(set);
}

/* ---- runs ----------------------------------------------------------------------- */

typedef struct {
    gf_conv_version version;
    int tile_width, tile_height;
    gf_backend *backend;
    long runs, refused, exact, off_by_one, failed;
} variant;

static const char *version_name(gf_conv_version v)
{
    static const char *const names[] = {"naive", "tiled", "blocked", "separable", "direct", "auto"};
    return names[v];
}

/* The variants under test: every version with the automatic tile and fixed
 * ones (cuda), or the CPU backend alone. */
static int make_variants(variant *out, const char *backend, int quick)
{
    if (strcmp(backend, "cpu") == 0) {
        out[0] = (variant){.version = GF_CONV_AUTO};
        return 1;
    }
    static const int tiles[][2] = {{0, 0}, {32, 8}, {16, 16}, {8, 8}, {64, 64}, {7, 3}, {64, 4}, {32, 32}};
    const int tile_count = quick ? 3 : (int)(sizeof tiles / sizeof *tiles);
    int n = 0;
    for (int v = GF_CONV_NAIVE; v <= GF_CONV_AUTO; v++)
        for (int t = 0; t < tile_count; t++)
            out[n++] = (variant){.version = (gf_conv_version)v, .tile_width = tiles[t][0],
                                 .tile_height = tiles[t][1]};
    return n;
}

static gf_backend *open_backend(const char *kind, const variant *v)
{
    gf_backend_options options = {.tile_width = v->tile_width, .tile_height = v->tile_height,
                                  .conv_version = v->version};
    if (strcmp(kind, "reference") == 0)
        return gf_backend_reference_new(&options);
    if (strcmp(kind, "cpu") == 0)
        return gf_backend_cpu_new(&options);
    return gf_backend_cuda_new(&options);
}

/* Filters a copy of input: 0 with out filled, -2 when the backend refuses
 * the case as a usage error, -1 on a failure. */
static int filter(gf_backend *backend, const gf_image *input, const gf_mask *mask,
                  gf_border border, int filtered, gf_image *out)
{
    gf_image *copy = gf_image_new(input->width, input->height, input->channels);
    if (!copy)
        return -1;
    memcpy(copy->pixels, input->pixels, gf_image_bytes(input));
    int status = backend->upload(backend, copy);
    if (status == 0)
        status = backend->convolve(backend, mask, border, filtered);
    if (status == 0 && (backend->finish(backend) < 0 || backend->download(backend, out) < 0))
        status = -1;
    gf_image_free(copy);
    return status;
}

/* The mask whose exact value is the size of mask's: sum |w p| / |scale| +
 * |offset| + 1 over its matrices (gftest.float_ties's). */
static void size_mask_of(const gf_mask *mask, gf_mask *size)
{
    gf_mask_release(size);
    if (gf_mask_copy(size, mask) < 0) {
        fprintf(stderr, "conv2d-check: %s\n", gf_error());
        exit(1);
    }
    size->combine = GF_COMBINE_SUM;
    for (int k = 0; k < mask->count; k++) {
        for (int i = 0; i < mask->width * mask->height; i++)
            size->weights[k][i] = fabs(mask->weights[k][i]);
        size->scale[k] = fabs(mask->scale[k]);
        size->offset[k] = fabs(mask->offset[k]) + 1.0;
    }
}

/* Whether the exact value of output value (x, y, ch) lies on a rounding
 * boundary, k + 1/2, to within the float error bound of its evaluation
 * (the CLI suite's gftest.rounding_ties and float_ties): there two correct
 * backends, one summing in float and one in double, may differ by one. */
static int at_rounding_tie(const gf_image *in, const gf_mask *m, const gf_mask *size,
                           gf_border border, int x, int y, int ch)
{
    const int taps = m->width * m->height;
    const double value = gf_conv2d_cpu_exact(in->pixels, in->width, in->height, in->channels, m,
                                             border, x, y, ch);
    const double bound = (taps + 8) * 0x1p-24 *
                             gf_conv2d_cpu_exact(in->pixels, in->width, in->height, in->channels,
                                                 size, border, x, y, ch) +
                         1e-6;
    return fabs(value - floor(value) - 0.5) < bound;
}

typedef struct {
    const gf_mask *mask, *size;  /* size: size_mask_of(mask) */
    int width, height, channels, filtered;
    gf_border border;
} check_case;

/* 0: within the rule (*differing: values off by one, ties included), 1:
 * outside it. Alpha that passes through must match exactly. */
static int compare(const check_case *c, const gf_image *input, const gf_image *got,
                   const gf_image *want, long *differing, int *worst)
{
    const size_t n = gf_image_bytes(want);
    long counted = 0;
    *differing = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        const int d = abs((int)got->pixels[i] - (int)want->pixels[i]);
        if (d == 0)
            continue;
        const int ch = (int)(i % (size_t)c->channels);
        const int x = (int)(i / (size_t)c->channels % (size_t)c->width);
        const int y = (int)(i / ((size_t)c->channels * (size_t)c->width));
        if (ch >= c->filtered)
            return *worst = d, 1;
        ++*differing;
        *worst = d > *worst ? d : *worst;
        counted += !(d == 1 && at_rounding_tie(input, c->mask, c->size, c->border, x, y, ch));
    }
    return *worst > 1 || counted > (long)(n / 1000);
}

static const char *const border_names[] = {"nearest", "constant", "reflect", "mirror", "wrap"};

static void report_failure(const variant *v, const check_case *c, const char *what)
{
    fprintf(stderr, "FAIL %s tile %dx%d: mask %s on %dx%dx%d (filtering %d), border %s: %s\n",
            version_name(v->version), v->tile_width, v->tile_height, c->mask->name, c->width,
            c->height, c->channels, c->filtered, border_names[c->border], what);
}

/* One case on every variant; the number of failures. */
static long run_case(variant *variants, int count, const check_case *c, gf_backend *reference,
                     int verbose)
{
    gf_image *input = gf_image_new(c->width, c->height, c->channels);
    gf_image *want = gf_image_new(c->width, c->height, c->channels);
    gf_image *got = gf_image_new(c->width, c->height, c->channels);
    long failures = 0;
    if (!input || !want || !got) {
        fprintf(stderr, "conv2d-check: out of memory\n");
        failures = 1;
        goto done;
    }
    for (size_t i = 0; i < gf_image_bytes(input); i++)
        input->pixels[i] = (unsigned char)rng_next();
    if (filter(reference, input, c->mask, c->border, c->filtered, want) != 0) {
        variant ref = {.version = GF_CONV_AUTO};
        report_failure(&ref, c, gf_error());
        failures = 1;
        goto done;
    }
    for (int i = 0; i < count; i++) {
        variant *v = &variants[i];
        memset(got->pixels, 0, gf_image_bytes(got));
        const int status = filter(v->backend, input, c->mask, c->border, c->filtered, got);
        v->runs++;
        if (status == -2) {
            v->refused++;
            continue;
        }
        long differing;
        int worst;
        char what[160];
        if (status != 0) {
            snprintf(what, sizeof what, "the backend failed: %s", gf_error());
        } else if (compare(c, input, got, want, &differing, &worst)) {
            snprintf(what, sizeof what, "%ld values differ, by up to %d", differing, worst);
        } else {
            v->exact += differing == 0;
            v->off_by_one += differing != 0;
            if (verbose && differing)
                fprintf(stderr, "note: %s %dx%d, %s on %dx%dx%d: %ld values off by one\n",
                        version_name(v->version), v->tile_width, v->tile_height, c->mask->name,
                        c->width, c->height, c->channels, differing);
            continue;
        }
        v->failed++;
        failures++;
        if (failures <= 20)
            report_failure(v, c, what);
    }
done:
    gf_image_free(input);
    gf_image_free(want);
    gf_image_free(got);
    return failures;
}

/* at_rounding_tie on values known to lie on k + 1/2 and beside it. */
static int ties_found_where_they_are(void)
{
    static gf_mask half, size;
    gf_image *img = gf_image_new(2, 1, 1);
    if (!img || gf_mask_parse("2 1 2 0\n1 1\n", "half", &half) != 0)
        return 0;
    size_mask_of(&half, &size);
    img->pixels[0] = 3;
    img->pixels[1] = 4;  /* the anchor is the right tap: x reads x - 1 and x */
    const int found = !at_rounding_tie(img, &half, &size, GF_BORDER_NEAREST, 0, 0, 0) &&  /* 3 */
                      at_rounding_tie(img, &half, &size, GF_BORDER_NEAREST, 1, 0, 0) &&   /* 3.5 */
                      at_rounding_tie(img, &half, &size, GF_BORDER_CONSTANT, 0, 0, 0);    /* 1.5 */
    gf_image_free(img);
    return found;
}

static void print_table(const variant *variants, int count)
{
    printf("%-10s %-7s %8s %8s %8s %10s %7s\n", "version", "tile", "runs", "refused", "exact",
           "off-by-1", "failed");
    for (int i = 0; i < count; i++) {
        const variant *v = &variants[i];
        char tile[16];
        snprintf(tile, sizeof tile, v->tile_width ? "%dx%d" : "auto", v->tile_width, v->tile_height);
        printf("%-10s %-7s %8ld %8ld %8ld %10ld %7ld\n", version_name(v->version), tile, v->runs,
               v->refused, v->exact, v->off_by_one, v->failed);
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: conv2d-check [--backend cuda|cpu] [--quick] [--verbose]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *backend = "cuda";
    int quick = 0, verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
            backend = argv[++i];
        else if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--verbose") == 0)
            verbose = 1;
        else
            return usage();
    }
    if (strcmp(backend, "cuda") != 0 && strcmp(backend, "cpu") != 0)
        return usage();
    rng_seed("conv2d-check");
    printf("conv2d-check: backend %s\n", backend);
    fflush(stdout);  /* before any message on stderr */
    if (!ties_found_where_they_are()) {
        fprintf(stderr, "conv2d-check: the rounding-tie test is wrong\n");
        return 1;
    }
    static mask_set set;
    make_masks(&set, quick);
    static variant variants[MAX_BACKENDS];
    const int count = make_variants(variants, backend, quick);
    variant plain = {.version = GF_CONV_AUTO};
    gf_backend *reference = open_backend("reference", &plain);
    for (int i = 0; i < count; i++)
        if (!reference || !(variants[i].backend = open_backend(backend, &variants[i]))) {
            fprintf(stderr, "conv2d-check: no %s backend: %s\n", reference ? backend : "reference",
                    gf_error());
            return 1;
        }

    static const int sizes[][2] = {{1, 1}, {1, 7}, {7, 1}, {2, 3}, {33, 9}, {257, 131}, {208, 45}};
    static const int layouts[][2] = {{1, 1}, {2, 1}, {3, 3}, {4, 3}, {4, 4}};  /* channels, filtered */
    long failures = 0, cases = 0;
    static gf_mask size;
    for (int m = 0; m < set.count; m++) {
        size_mask_of(&set.masks[m], &size);
        for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++)
            for (int b = 0; b < 5; b++)
                for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
                    const check_case c = {&set.masks[m], &size, sizes[s][0], sizes[s][1],
                                          layouts[l][0], layouts[l][1], (gf_border)b};
                    failures += run_case(variants, count, &c, reference, verbose);
                    cases++;
                }
    }
    print_table(variants, count);
    printf("conv2d-check: %d masks, %ld cases, %d variants each: %s (%ld failed runs)\n", set.count,
           cases, count, failures ? "FAILED" : "all within the rule", failures);
    for (int i = 0; i < count; i++)
        variants[i].backend->destroy(variants[i].backend);
    reference->destroy(reference);
    return failures ? 1 : 0;
}
