/* test_depth16.c - cmocka unit tests for the CPU backends at 16 bits a
 * sample: the reference convolution (gf_conv2d_cpu16) on hand-computed
 * values, the cpu backend's bytes against the reference's across borders,
 * channel counts, mask shapes and the fast paths, and the tone operations
 * and statistics on hand-computed values.
 *
 * Random pixels are seeded from the clock; the seed is printed first and
 * can be replayed with GF_TEST_SEED=N. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_conv.h"
#include "mask.h"
#include "tone_report.h"
#include "util.h"

#include "test_rng.h"

/* ---------------------------------------------------------------- helpers */

static gf_image *image16(int w, int h, int c, const uint16_t *values)
{
    gf_image *img = gf_image_new_depth(w, h, c, 16);
    assert_non_null(img);
    assert_int_equal(img->depth, 16);
    assert_int_equal(gf_image_bytes(img), (size_t)w * h * c * 2);
    if (values)
        memcpy(img->pixels, values, gf_image_bytes(img));
    return img;
}

static uint16_t *samples(gf_image *img)
{
    return (uint16_t *)(void *)img->pixels;
}

/* Random samples; a third of them at or next to 0 and 65535 (the clamps). */
static gf_image *random_image16(int w, int h, int c)
{
    gf_image *img = image16(w, h, c, NULL);
    uint16_t *s = samples(img);
    for (size_t i = 0; i < (size_t)w * h * c; i++) {
        switch (rng_int(0, 5)) {
        case 0: s[i] = (uint16_t)rng_int(0, 3); break;
        case 1: s[i] = (uint16_t)rng_int(65532, 65535); break;
        default: s[i] = (uint16_t)rng_int(0, 65535); break;
        }
    }
    return img;
}

static gf_image *copy_image(const gf_image *img)
{
    gf_image *copy = gf_image_new_depth(img->width, img->height, img->channels, img->depth);
    assert_non_null(copy);
    memcpy(copy->pixels, img->pixels, gf_image_bytes(img));
    return copy;
}

static gf_mask *parse_mask(const char *text)
{
    gf_mask *m = calloc(1, sizeof *m);
    assert_non_null(m);
    if (gf_mask_parse(text, "test", m) != 0)
        fail_msg("mask: %s", gf_error());
    return m;
}

static gf_mask *load_mask(const char *name)
{
    gf_mask *m = calloc(1, sizeof *m);
    assert_non_null(m);
    if (gf_mask_load(name, m) != 0)
        fail_msg("%s: %s", name, gf_error());
    return m;
}

static void free_mask(gf_mask *m)
{
    gf_mask_release(m);
    free(m);
}

/* A w x h matrix of random integers lo..hi as mask text, with scale and offset. */
static char *random_mask_text(int w, int h, int lo, int hi, double scale, double offset)
{
    size_t size = 64 + (size_t)w * h * 12;
    char *text = malloc(size);
    assert_non_null(text);
    size_t at = (size_t)snprintf(text, size, "%d %d %.17g %.17g\n", w, h, scale, offset);
    for (int i = 0; i < w * h; i++)
        at += (size_t)snprintf(text + at, size - at, "%d%c", rng_int(lo, hi),
                               i % w == w - 1 ? '\n' : ' ');
    return text;
}

typedef gf_backend *(*backend_maker)(const gf_backend_options *);

/* One convolution on a backend; the result, a new image of the same depth. */
static gf_image *run_convolve(backend_maker make, const gf_image *in, const gf_mask *m,
                              gf_border border, int filtered)
{
    gf_image *img = copy_image(in);
    gf_backend *b = make(NULL);
    assert_non_null(b);
    assert_int_equal(b->upload(b, img), 0);
    assert_int_equal(b->convolve(b, m, border, filtered), 0);
    assert_int_equal(b->download(b, img), 0);
    b->destroy(b);
    assert_int_equal(img->depth, 16);
    return img;
}

static const gf_border borders[] = {GF_BORDER_NEAREST, GF_BORDER_CONSTANT, GF_BORDER_REFLECT,
                                    GF_BORDER_MIRROR, GF_BORDER_WRAP};

/* The cpu backend's result equals the reference's, and the reference's is
 * gf_conv2d_cpu_exact16 rounded half to even and clamped. Off by one is
 * allowed only where the exact value lies within 1e-6 of k + 1/2 (the
 * separable double passes add in another order), as the 8-bit tests allow
 * at rounding ties. */
static void check_cpu_matches_reference(const gf_image *in, const gf_mask *m, gf_border border,
                                        int filtered)
{
    gf_image *ref = run_convolve(gf_backend_reference_new, in, m, border, filtered);
    gf_image *cpu = run_convolve(gf_backend_cpu_new, in, m, border, filtered);
    const uint16_t *r = samples(ref), *f = samples(cpu), *s = gf_image_samples16(in);
    const int w = in->width, h = in->height, ch = in->channels;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ch; c++) {
                const size_t at = ((size_t)y * w + x) * ch + c;
                if (c >= filtered) {
                    assert_int_equal(r[at], s[at]);
                    assert_int_equal(f[at], s[at]);
                    continue;
                }
                const double exact =
                    gf_conv2d_cpu_exact16(s, w, h, ch, m, border, x, y, c);
                const double want = nearbyint(exact) < 0 ? 0 : nearbyint(exact) > 65535 ? 65535
                                                                                    : nearbyint(exact);
                if (r[at] != want)
                    fail_msg("%s %dx%dx%d border %d at (%d,%d,%d): reference %u, exact %.17g",
                             m->name, w, h, ch, border, x, y, c, r[at], exact);
                if (f[at] != r[at]) {
                    const int tie = fabs(exact - floor(exact) - 0.5) < 1e-6;
                    if (!tie || abs((int)f[at] - (int)r[at]) != 1)
                        fail_msg("%s %dx%dx%d border %d at (%d,%d,%d): cpu %u, reference %u "
                                 "(exact %.17g)",
                                 m->name, w, h, ch, border, x, y, c, f[at], r[at], exact);
                }
            }
    gf_image_free(ref);
    gf_image_free(cpu);
}

/* Every border, channel counts 1-4 (alpha passing through at 2 and 4). */
static void check_all_layouts(const gf_mask *m, int w, int h)
{
    for (int ch = 1; ch <= 4; ch++) {
        gf_image *img = random_image16(w, h, ch);
        const int filtered = ch == 2 || ch == 4 ? ch - 1 : ch;
        for (size_t b = 0; b < sizeof borders / sizeof borders[0]; b++)
            check_cpu_matches_reference(img, m, borders[b], filtered);
        gf_image_free(img);
    }
}

/* ------------------------------------------------------- the reference */

static void test_reference_hand_values(void **state)
{
    (void)state;
    /* 1x2 mean, anchor (1, 0): out[x] = (in[x - 1] + in[x]) / 2, nearest */
    const uint16_t in[3] = {65534, 65531, 7};
    uint16_t out[4];
    gf_mask *m = parse_mask("2 1 2\n1 1\n");
    gf_conv2d_cpu16(in, out, 3, 1, 1, 1, m, GF_BORDER_NEAREST);
    assert_int_equal(out[0], 65534);
    assert_int_equal(out[1], 65532);  /* 65532.5: half to even */
    assert_int_equal(out[2], 32769);  /* 32769 exactly */
    free_mask(m);

    /* twice the centre clamps at 65535, its negative at 0 */
    const uint16_t big[4] = {40000, 1, 65535, 0};
    m = parse_mask("1 1\n2\n");
    gf_conv2d_cpu16(big, out, 4, 1, 1, 1, m, GF_BORDER_NEAREST);
    assert_int_equal(out[0], 65535);
    assert_int_equal(out[1], 2);
    free_mask(m);
    m = parse_mask("1 1 1 100\n-1\n");
    gf_conv2d_cpu16(big, out, 3, 1, 1, 1, m, GF_BORDER_NEAREST);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 99);
    assert_int_equal(out[2], 0);
    free_mask(m);

    /* gray + alpha: the alpha sample passes through unchanged */
    const uint16_t ga[4] = {1000, 65535, 3000, 12345};
    uint16_t ga_out[4];
    m = parse_mask("3 1 4\n1 2 1\n");
    gf_conv2d_cpu16(ga, ga_out, 2, 1, 2, 1, m, GF_BORDER_CONSTANT);
    assert_int_equal(ga_out[0], 1250);  /* (0 + 2000 + 3000) / 4 */
    assert_int_equal(ga_out[1], 65535);
    assert_int_equal(ga_out[2], 1750);  /* (1000 + 6000 + 0) / 4 */
    assert_int_equal(ga_out[3], 12345);
    free_mask(m);
}

static void test_reference_exact_values(void **state)
{
    (void)state;
    /* sobel's magnitude over a step of 60000: sqrt(240000^2) clamps */
    const uint16_t step[9] = {0, 0, 60000, 0, 0, 60000, 0, 0, 60000};
    gf_mask *m = parse_mask("combine magnitude\n3 3\n-1 0 1\n-2 0 2\n-1 0 1\n"
                            "3 3\n-1 -2 -1\n0 0 0\n1 2 1\n");
    assert_true(gf_conv2d_cpu_exact16(step, 3, 3, 1, m, GF_BORDER_NEAREST, 1, 1, 0) == 240000.0);
    assert_true(gf_conv2d_cpu_exact16(step, 3, 3, 1, m, GF_BORDER_CONSTANT, 0, 0, 0) ==
                sqrt(0.0 * 0 + 0.0 * 0) + 0.0);
    free_mask(m);
}

/* ---------------------------------------------- cpu against reference */

static void test_small_masks(void **state)
{
    (void)state;
    static const int shapes[][2] = {{3, 3}, {4, 2}, {2, 4}, {1, 5}, {5, 1}, {1, 1}, {6, 6}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        /* integer weights (the integer paths) and the same shape fractional (double) */
        char *text = random_mask_text(shapes[i][0], shapes[i][1], -3, 4, 5, 7);
        gf_mask *m = parse_mask(text);
        check_all_layouts(m, 13, 9);
        free_mask(m);
        free(text);
        text = random_mask_text(shapes[i][0], shapes[i][1], -300, 400, 777.25, -3.5);
        m = parse_mask(text);
        check_all_layouts(m, 11, 7);
        free_mask(m);
        free(text);
    }
}

static void test_mask_larger_than_image(void **state)
{
    (void)state;
    char *text = random_mask_text(9, 7, -2, 3, 11, 0);
    gf_mask *m = parse_mask(text);
    check_all_layouts(m, 3, 2);
    free_mask(m);
    free(text);
    m = load_mask("box:radius=20");  /* 41x41 on a 5x4 image: several periods */
    check_all_layouts(m, 5, 4);
    free_mask(m);
}

static void test_combines(void **state)
{
    (void)state;
    static const char *const masks[] = {
        "combine magnitude\n3 3\n-1 0 1\n-2 0 2\n-1 0 1\n3 3\n-1 -2 -1\n0 0 0\n1 2 1\n",
        "combine max\n3 3 2\n1 0 -1\n1 0 -1\n1 0 -1\n3 3 3 100\n0 1 0\n1 -4 1\n0 1 0\n",
        "combine min\n2 2\n1 2\n3 -1\n2 2 0.5\n-1 0\n0 2\n",
        "combine sum\n3 1 3\n1 1 1\n3 1 2 -50\n-1 0 1\n",
        "unsharp:sigma=1,amount=1.5,threshold=200",
        "sharpen:2",
    };
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        gf_mask *m = strchr(masks[i], '\n') ? parse_mask(masks[i]) : load_mask(masks[i]);
        check_all_layouts(m, 12, 8);
        free_mask(m);
    }
}

/* Integer weights whose sums pass 32 bits at 16 bits a sample (27000 x
 * 65535) but not at 8: the integer path is refused at 16 bits. */
static void test_integer_bound(void **state)
{
    (void)state;
    gf_mask *m = parse_mask("3 3 27000\n3000 3000 3000\n3000 3000 3000\n3000 3000 3000\n");
    assert_int_equal(gf_cpu_conv_path_depth(m, 8, NULL), GF_CPU_SEPARABLE);
    assert_int_equal(gf_cpu_conv_path_depth(m, 16, NULL), GF_CPU_DOUBLE);
    gf_image *img = image16(4, 3, 1, NULL);
    for (int i = 0; i < 12; i++)
        samples(img)[i] = 65535;
    gf_image *out = run_convolve(gf_backend_cpu_new, img, m, GF_BORDER_NEAREST, 1);
    for (int i = 0; i < 12; i++)
        assert_int_equal(samples(out)[i], 65535);  /* 9 x 3000 x 65535 / 27000 */
    gf_image_free(out);
    gf_image_free(img);
    check_all_layouts(m, 7, 5);
    free_mask(m);
}

static void test_large_masks_fast_paths(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        gf_cpu_path path16;
    } cases[] = {
        {"box:radius=40", GF_CPU_SEPARABLE},          /* 81x81: exact running sums */
        {"gaussian:sigma=20", GF_CPU_SEPARABLE_DOUBLE}, /* non-integer: 1-D passes */
        {"box:radius=100", GF_CPU_SEPARABLE_DOUBLE},  /* 201^2 x 65535 past the bound */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gf_mask *m = load_mask(cases[i].name);
        int taps = 0;
        assert_int_equal(gf_cpu_conv_path_depth(m, 16, &taps), cases[i].path16);
        assert_true(taps <= m->width + m->height);  /* never the 2-D sum */
        gf_image *img = random_image16(37, 23, 3);
        check_cpu_matches_reference(img, m, GF_BORDER_REFLECT, 3);
        gf_image_free(img);
        img = random_image16(19, 29, 4);
        check_cpu_matches_reference(img, m, GF_BORDER_CONSTANT, 3);
        gf_image_free(img);
        free_mask(m);
    }
}

/* A large integer mask that factors into a non-constant column x row (the
 * exact separable passes, columns first). */
static void test_large_integer_separable(void **state)
{
    (void)state;
    const int w = 41, h = 35;
    char *text = malloc(64 + (size_t)w * h * 8);
    assert_non_null(text);
    int column[35], row[41], at = sprintf(text, "%d %d 4000\n", w, h);
    for (int y = 0; y < h; y++)
        column[y] = rng_int(1, 3);
    for (int x = 0; x < w; x++)
        row[x] = rng_int(-1, 2);
    row[0] = 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            at += sprintf(text + at, "%d%c", column[y] * row[x], x == w - 1 ? '\n' : ' ');
    gf_mask *m = parse_mask(text);
    free(text);
    assert_int_equal(gf_cpu_conv_path_depth(m, 16, NULL), GF_CPU_SEPARABLE);
    gf_image *img = random_image16(45, 40, 2);
    for (size_t b = 0; b < sizeof borders / sizeof borders[0]; b++)
        check_cpu_matches_reference(img, m, borders[b], 1);
    gf_image_free(img);
    free_mask(m);
}

/* ------------------------------------------------------ tone operations */

static void test_statistics(void **state)
{
    (void)state;
    const uint16_t values[8] = {0, 7, 65535, 7, 65535, 7, 1000, 65535};
    gf_image *img = image16(2, 2, 2, values);
    gf_channel_stats *stats = calloc(2, sizeof *stats);
    assert_non_null(stats);
    gf_statistics_cpu16(gf_image_samples16(img), 4, 2, stats);
    assert_int_equal(stats[0].depth, 16);
    assert_int_equal(gf_stats_bins(&stats[0]), 65536);
    assert_int_equal(stats[0].min, 0);
    assert_int_equal(stats[0].max, 65535);
    assert_true(stats[0].sum == 0 + 65535 + 65535 + 1000);
    assert_true(stats[0].sum_squares == 2ULL * 65535 * 65535 + 1000ULL * 1000);
    assert_true(stats[0].histogram[65535] == 2 && stats[0].histogram[1000] == 1 &&
                stats[0].histogram[0] == 1);
    assert_int_equal(stats[1].min, 7);
    assert_int_equal(stats[1].max, 65535);
    assert_true(stats[1].histogram[7] == 3);
    gf_channel_summary s;
    gf_stats_summarize(&stats[0], &s);
    assert_int_equal(s.median, 1000);  /* 2 of 4 at or below 1000 */
    assert_true(fabs(s.mean - 33017.5) < 1e-9);
    /* the 8-bit statistics still say depth 8 */
    const unsigned char bytes[2] = {3, 250};
    gf_statistics_cpu(bytes, 2, 1, stats);
    assert_int_equal(stats[0].depth, 8);
    assert_int_equal(gf_stats_bins(&stats[0]), 256);
    free(stats);
    gf_image_free(img);
}

static void test_equalize_channels(void **state)
{
    (void)state;
    /* N 4, hist[100] 2: (cdf - 2) * 65535 / 2: 0, 32767.5 -> 32768 (even), 65535 */
    uint16_t gray[8] = {100, 1, 200, 2, 100, 3, 300, 65535};
    assert_int_equal(gf_equalize_cpu16(gray, 4, 2, GF_EQUALIZE_LUMINANCE, 1), 0);
    const uint16_t want[8] = {0, 1, 32768, 2, 0, 3, 65535, 65535};
    assert_memory_equal(gray, want, sizeof want);
}

static void test_equalize_luminance(void **state)
{
    (void)state;
    /* lumas 1815, 41850, 20000 (OpenCV's CV_16U YCrCb): mapped to 0, 65535
     * and 32767.5 -> 32768; the RGB values are OpenCV's YCrCb -> RGB */
    uint16_t rgba[12] = {1000, 2000, 3000, 11, 50000, 40000, 30000, 22, 20000, 20000, 20000, 33};
    assert_int_equal(gf_equalize_cpu16(rgba, 3, 4, GF_EQUALIZE_LUMINANCE, 3), 0);
    const uint16_t want[12] = {0, 185, 1184, 11, 65535, 63685, 53684, 22,
                               32768, 32768, 32768, 33};
    assert_memory_equal(rgba, want, sizeof want);
    /* a constant image is left as it is */
    uint16_t flat[6] = {1000, 2000, 3000, 1000, 2000, 3000};
    const uint16_t flat_want[6] = {1000, 2000, 3000, 1000, 2000, 3000};
    assert_int_equal(gf_equalize_cpu16(flat, 2, 3, GF_EQUALIZE_LUMINANCE, 3), 0);
    assert_memory_equal(flat, flat_want, sizeof flat_want);
}

static void test_normalize(void **state)
{
    (void)state;
    /* 100 values i * 600: 1% each end: lo 600, hi 58800 */
    uint16_t gray[100];
    for (int i = 0; i < 100; i++)
        gray[i] = (uint16_t)(i * 600);
    gray[50] = 30000;
    const gf_stretch how = {GF_STRETCH_NORMALIZE, 1.0, 1.0};
    assert_int_equal(gf_stretch_cpu16(gray, 100, 1, &how, 1), 0);
    assert_int_equal(gray[0], 0);
    assert_int_equal(gray[1], 0);
    assert_int_equal(gray[98], 65535);
    assert_int_equal(gray[99], 65535);
    assert_int_equal(gray[50], 33105);  /* 29400 * 65535 / 58200 = 33105.31 */
}

static void test_auto_level(void **state)
{
    (void)state;
    /* min 1000 and max 51000 over R, G, B (not alpha): x -> (x - 1000) * 65535 / 50000 */
    uint16_t rgba[8] = {1000, 26000, 51000, 5, 11000, 1001, 2000, 65535};
    const gf_stretch how = {GF_STRETCH_AUTO_LEVEL, 0, 0};
    assert_int_equal(gf_stretch_cpu16(rgba, 2, 4, &how, 3), 0);
    const uint16_t want[8] = {0, 32768, 65535, 5, 13107, 1, 1311, 65535};
    assert_memory_equal(rgba, want, sizeof want);
}

/* The backends' tone operations follow the image's depth. */
static void test_backend_tone(void **state)
{
    (void)state;
    const uint16_t values[4] = {100, 100, 200, 300};
    backend_maker makers[2] = {gf_backend_reference_new, gf_backend_cpu_new};
    for (int i = 0; i < 2; i++) {
        gf_image *img = image16(2, 2, 1, values);
        gf_backend *b = makers[i](NULL);
        assert_int_equal(b->upload(b, img), 0);
        assert_int_equal(b->equalize(b, GF_EQUALIZE_CHANNELS, 1), 0);
        gf_channel_stats *stats = calloc(1, sizeof *stats);
        assert_non_null(stats);
        assert_int_equal(b->statistics(b, stats), 0);
        assert_int_equal(stats->depth, 16);
        assert_int_equal(stats->max, 65535);
        assert_true(stats->histogram[32768] == 1 && stats->histogram[0] == 2);
        assert_int_equal(b->download(b, img), 0);
        const uint16_t want[4] = {0, 0, 32768, 65535};
        assert_memory_equal(img->pixels, want, sizeof want);
        free(stats);
        b->destroy(b);
        gf_image_free(img);
    }
}

int main(void)
{
    rng_seed("test_depth16");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_hand_values),
        cmocka_unit_test(test_reference_exact_values),
        cmocka_unit_test(test_small_masks),
        cmocka_unit_test(test_mask_larger_than_image),
        cmocka_unit_test(test_combines),
        cmocka_unit_test(test_integer_bound),
        cmocka_unit_test(test_large_masks_fast_paths),
        cmocka_unit_test(test_large_integer_separable),
        cmocka_unit_test(test_statistics),
        cmocka_unit_test(test_equalize_channels),
        cmocka_unit_test(test_equalize_luminance),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_auto_level),
        cmocka_unit_test(test_backend_tone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
