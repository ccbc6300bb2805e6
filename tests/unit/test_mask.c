/* test_mask.c - cmocka unit tests for the mask parser (src/mask.c).
 *
 * Every run uses fresh random masks; the seed is printed first and can be
 * replayed with GF_TEST_SEED=N. GF_TEST_MASKS_DIR names the project's masks/
 * folder (the Makefile passes it; the fallback works from the repository root). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mask.h"
#include "util.h"

#ifndef GF_TEST_MASKS_DIR
#define GF_TEST_MASKS_DIR "masks"
#endif

#include "test_rng.h"

/* ---------------------------------------------------------------- helpers */


/* A random weight that is exactly representable and prints exactly with %.17g:
 * small integers, quarters, or arbitrary doubles. */
static double rng_weight(void)
{
    switch (rng_int(0, 3)) {
    case 0: return (double)rng_int(-20, 20);
    case 1: return rng_int(-400, 400) / 4.0;
    case 2: return ((double)(rng_next() >> 11) / 9007199254740992.0 - 0.5) * 2000.0;
    default: return rng_int(-1000000, 1000000) * 1e-3;
    }
}

typedef struct {
    char *buf;
    size_t len, cap;
} strbuf;

static void sb_printf(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, sb->buf ? sb->cap - sb->len : 0, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if (sb->buf && sb->len + (size_t)n < sb->cap) {
            sb->len += (size_t)n;
            return;
        }
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap <= sb->len + (size_t)n)
            cap *= 2;
        sb->buf = realloc(sb->buf, cap);
        assert_non_null(sb->buf);
        sb->cap = cap;
        sb->buf[sb->len] = '\0';
    }
}

static gf_mask *new_mask(void)
{
    gf_mask *m = malloc(sizeof *m);
    assert_non_null(m);
    memset(m, 0x5a, sizeof *m); /* the parser must set every field it reports */
    return m;
}

/* A mask that parsing or loading filled (or emptied on failure), and its struct. */
static void free_mask(gf_mask *m)
{
    gf_mask_release(m);
    free(m);
}

static gf_mask *parse_ok(const char *text, const char *name)
{
    gf_mask *m = new_mask();
    int rc = gf_mask_parse(text, name, m);
    if (rc != 0)
        print_error("gf_mask_parse(%s) failed: %s\n--- text ---\n%s\n---\n", name, gf_error(), text);
    assert_int_equal(rc, 0);
    return m;
}

static void assert_error_names(const char *name, int line)
{
    const char *msg = gf_error();
    assert_non_null(msg);
    if (strncmp(msg, "gpufilter: ", 11) != 0)
        print_error("message does not start with 'gpufilter: ': \"%s\"\n", msg);
    assert_true(strncmp(msg, "gpufilter: ", 11) == 0);
    if (!strstr(msg, name))
        print_error("message does not name \"%s\": \"%s\"\n", name, msg);
    assert_non_null(strstr(msg, name));
    if (line > 0) {
        char where[128];
        snprintf(where, sizeof where, "%s:%d:", name, line);
        if (!strstr(msg, where))
            print_error("message lacks \"%s\": \"%s\"\n", where, msg);
        assert_non_null(strstr(msg, where));
    }
}

/* Parse must fail, with "gpufilter: ", the name and (line > 0) "name:line:".
 * Returns 0 when it does; otherwise prints why and returns -1, so that a table
 * of cases reports every failing case, not only the first. */
static int check_parse_fails(const char *text, const char *name, int line)
{
    gf_mask *m = new_mask();
    gf_set_error("stale message from an earlier call");
    int rc = gf_mask_parse(text, name, m);
    free_mask(m);
    const char *msg = gf_error();
    char where[128];
    snprintf(where, sizeof where, "%s:%d:", name, line);
    const char *why = NULL;
    if (rc != -1)
        why = "expected -1";
    else if (strstr(msg, "stale message"))
        why = "no new message";
    else if (strncmp(msg, "gpufilter: ", 11) != 0)
        why = "message does not start with 'gpufilter: '";
    else if (!strstr(msg, name))
        why = "message does not name the mask";
    else if (line > 0 && !strstr(msg, where))
        why = "message does not name the line";
    if (!why)
        return 0;
    print_error("case %s: %s (rc %d, message \"%s\", want line %d)\n--- text ---\n%s\n---\n",
                name, why, rc, rc == -1 ? msg : "", line, text);
    return -1;
}

static void parse_fails(const char *text, const char *name, int line)
{
    assert_int_equal(check_parse_fails(text, name, line), 0);
}

static void assert_weights(const gf_mask *m, int k, const double *expect, int n)
{
    for (int i = 0; i < n; i++) {
        if (m->weights[k][i] != expect[i])
            print_error("matrix %d weight %d: got %.17g, want %.17g\n", k, i, m->weights[k][i], expect[i]);
        assert_true(m->weights[k][i] == expect[i]);
    }
}

/* separable == 1 and column[y] * row[x] reproduces every weight within 1e-9 */
static void assert_factors(const gf_mask *m)
{
    assert_int_equal(m->count, 1);
    assert_int_equal(m->separable, 1);
    for (int y = 0; y < m->height; y++)
        for (int x = 0; x < m->width; x++) {
            double w = m->weights[0][y * m->width + x];
            double p = m->column[y] * m->row[x];
            if (!(fabs(w - p) <= 1e-9))
                print_error("(%d,%d): weight %.17g, column*row %.17g\n", x, y, w, p);
            assert_true(fabs(w - p) <= 1e-9);
        }
}

/* ------------------------------------------------------------ valid parses */

static void test_sobel_two_matrices(void **state)
{
    (void)state;
    const char *text =
        "# Sobel gradient magnitude\n"
        "combine magnitude\n"
        "3 3 1 0\n"
        "-1 0 1\n"
        "-2 0 2\n"
        "-1 0 1\n"
        "3 3 2.5 -7\n"
        "-1 -2 -1\n"
        " 0  0  0\n"
        " 1  2  1\n";
    gf_mask *m = parse_ok(text, "sobel-test");
    assert_int_equal(m->count, 2);
    assert_int_equal(m->width, 3);
    assert_int_equal(m->height, 3);
    assert_int_equal(m->combine, GF_COMBINE_MAGNITUDE);
    assert_true(m->scale[0] == 1.0);
    assert_true(m->offset[0] == 0.0);
    assert_true(m->scale[1] == 2.5);
    assert_true(m->offset[1] == -7.0);
    static const double gx[9] = { -1, 0, 1, -2, 0, 2, -1, 0, 1 };
    static const double gy[9] = { -1, -2, -1, 0, 0, 0, 1, 2, 1 };
    assert_weights(m, 0, gx, 9);
    assert_weights(m, 1, gy, 9);
    assert_string_equal(m->description, "Sobel gradient magnitude");
    assert_int_equal(m->separable, 0);
    free_mask(m);
}

static void test_defaults(void **state)
{
    (void)state;
    gf_mask *m = parse_ok("2 2\n1 2\n3 4\n", "defaults");
    assert_int_equal(m->count, 1);
    assert_int_equal(m->width, 2);
    assert_int_equal(m->height, 2);
    assert_true(m->scale[0] == 1.0);
    assert_true(m->offset[0] == 0.0);
    assert_int_equal(m->combine, GF_COMBINE_NONE);
    assert_string_equal(m->description, ""); /* no comment: empty, not garbage */
    static const double w[4] = { 1, 2, 3, 4 };
    assert_weights(m, 0, w, 4);
    free_mask(m);

    /* scale given, offset defaulted */
    m = parse_ok("2 1 -4\n5 6\n", "scale-only");
    assert_true(m->scale[0] == -4.0);
    assert_true(m->offset[0] == 0.0);
    assert_int_equal(m->width, 2);
    assert_int_equal(m->height, 1);
    free_mask(m);
}

static void test_negative_fractional(void **state)
{
    (void)state;
    gf_mask *m = parse_ok("3 2 -2.5 0.25\n-0.5 1.25e-1 -3\n.75 -1e2 +2\n", "fractions");
    assert_true(m->scale[0] == -2.5);
    assert_true(m->offset[0] == 0.25);
    static const double w[6] = { -0.5, 0.125, -3, 0.75, -100, 2 };
    assert_weights(m, 0, w, 6);
    free_mask(m);
}

static void test_tabs_and_spaces(void **state)
{
    (void)state;
    gf_mask *m = parse_ok("  3\t3   1\t 0  \n\t1  2\t3\n4 5 6   \n  7\t8 9\n", "whitespace");
    static const double w[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    assert_weights(m, 0, w, 9);
    free_mask(m);
    /* no newline at the end of the file */
    m = parse_ok("1 2\n3\n4", "no-final-newline");
    assert_int_equal(m->width, 1);
    assert_int_equal(m->height, 2);
    static const double w2[2] = { 3, 4 };
    assert_weights(m, 0, w2, 2);
    free_mask(m);
}

static void test_one_by_one(void **state)
{
    (void)state;
    gf_mask *m = parse_ok("1 1\n7\n", "one");
    assert_int_equal(m->width, 1);
    assert_int_equal(m->height, 1);
    assert_int_equal(m->count, 1);
    assert_true(m->weights[0][0] == 7.0);
    assert_factors(m);
    free_mask(m);
}

static void test_31x31_random(void **state)
{
    (void)state;
    strbuf sb = { 0 };
    double *w = malloc(sizeof(double) * 31 * 31);
    assert_non_null(w);
    sb_printf(&sb, "# big one\n31 31 %d %d\n", rng_int(1, 5000), rng_int(-50, 50));
    for (int y = 0; y < 31; y++) {
        for (int x = 0; x < 31; x++) {
            w[y * 31 + x] = rng_weight();
            sb_printf(&sb, "%s%.17g", x ? " " : "", w[y * 31 + x]);
        }
        sb_printf(&sb, "\n");
    }
    gf_mask *m = parse_ok(sb.buf, "big31");
    assert_int_equal(m->width, 31);
    assert_int_equal(m->height, 31);
    assert_weights(m, 0, w, 31 * 31);
    assert_string_equal(m->description, "big one");
    free_mask(m);
    free(w);
    free(sb.buf);
}

static void test_non_square(void **state)
{
    (void)state;
    /* W=1, H=5: a column */
    gf_mask *m = parse_ok("1 5\n1\n4\n6\n4\n1\n", "col5");
    assert_int_equal(m->width, 1);
    assert_int_equal(m->height, 5);
    static const double c[5] = { 1, 4, 6, 4, 1 };
    assert_weights(m, 0, c, 5);
    assert_factors(m);
    free_mask(m);

    /* W=5, H=1: a row */
    m = parse_ok("5 1\n1 4 6 4 1\n", "row5");
    assert_int_equal(m->width, 5);
    assert_int_equal(m->height, 1);
    assert_weights(m, 0, c, 5);
    assert_factors(m);
    free_mask(m);

    /* W=4, H=6: row-major, width 4 */
    m = parse_ok("4 6\n"
                 "1 2 3 4\n5 6 7 8\n9 10 11 12\n13 14 15 16\n17 18 19 20\n21 22 23 24\n",
                 "four-by-six");
    assert_int_equal(m->width, 4);
    assert_int_equal(m->height, 6);
    for (int i = 0; i < 24; i++)
        assert_true(m->weights[0][i] == (double)(i + 1));
    assert_int_equal(m->separable, 0);
    free_mask(m);

    /* W=6, H=4 is a different shape */
    m = parse_ok("6 4\n"
                 "1 2 3 4 5 6\n7 8 9 10 11 12\n13 14 15 16 17 18\n19 20 21 22 23 24\n",
                 "six-by-four");
    assert_int_equal(m->width, 6);
    assert_int_equal(m->height, 4);
    assert_true(m->weights[0][6] == 7.0);
    free_mask(m);
}

static void test_description_and_comments(void **state)
{
    (void)state;
    const char *text =
        "\n"
        "# First comment wins\n"
        "# second comment\n"
        "\n"
        "combine max\n"
        "# between combine and header\n"
        "\n"
        "2 3 3 1\n"
        "# between header and rows\n"
        "1 2\n"
        "\n"
        "# between rows\n"
        "3 4\n"
        "   \n"
        "5 6\n"
        "# between matrices\n"
        "\n"
        "2 3\n"
        "-1 -2\n"
        "#\n"
        "-3 -4\n"
        "-5 -6\n"
        "# trailing comment\n"
        "\n";
    gf_mask *m = parse_ok(text, "commented");
    assert_string_equal(m->description, "First comment wins");
    assert_int_equal(m->combine, GF_COMBINE_MAX);
    assert_int_equal(m->count, 2);
    assert_int_equal(m->width, 2);
    assert_int_equal(m->height, 3);
    assert_true(m->scale[0] == 3.0);
    assert_true(m->offset[0] == 1.0);
    assert_true(m->scale[1] == 1.0);
    assert_true(m->offset[1] == 0.0);
    static const double a[6] = { 1, 2, 3, 4, 5, 6 };
    static const double b[6] = { -1, -2, -3, -4, -5, -6 };
    assert_weights(m, 0, a, 6);
    assert_weights(m, 1, b, 6);
    free_mask(m);

    /* a long comment must not overflow description: a terminated prefix of it */
    strbuf sb = { 0 };
    sb_printf(&sb, "# ");
    for (int i = 0; i < 400; i++)
        sb_printf(&sb, "%c", 'a' + i % 26);
    sb_printf(&sb, "\n1 1\n1\n");
    m = parse_ok(sb.buf, "long-comment");
    size_t n = strnlen(m->description, sizeof m->description);
    assert_true(n < sizeof m->description);
    assert_true(n > 0);
    assert_memory_equal(m->description, sb.buf + 2, n);
    free_mask(m);
    free(sb.buf);
}

/* "the first comment line is the description", wherever it stands */
static void test_description_after_matrix(void **state)
{
    (void)state;
    gf_mask *m = parse_ok("1 1\n2\n# afterwards\n", "late-comment");
    assert_string_equal(m->description, "afterwards");
    free_mask(m);
    m = parse_ok("3 1\n# between header and row\n1 2 1\n", "mid-comment");
    assert_string_equal(m->description, "between header and row");
    free_mask(m);
}

static void test_combine_words(void **state)
{
    (void)state;
    static const struct { const char *word; gf_combine c; } cases[] = {
        { "magnitude", GF_COMBINE_MAGNITUDE },
        { "max", GF_COMBINE_MAX },
        { "min", GF_COMBINE_MIN },
        { "sum", GF_COMBINE_SUM },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "combine %s\n1 2\n1\n2\n1 2 2\n3\n4\n", cases[i].word);
        gf_mask *m = parse_ok(text, cases[i].word);
        assert_int_equal(m->combine, cases[i].c);
        assert_int_equal(m->count, 2);
        assert_true(m->weights[1][1] == 4.0);
        assert_true(m->scale[1] == 2.0);
        assert_int_equal(m->separable, 0);
        free_mask(m);
        assert_string_equal(gf_combine_name(cases[i].c), cases[i].word);
    }
    /* one matrix may carry a combine line (magnitude of one matrix is |v|) */
    gf_mask *m = parse_ok("combine magnitude\n3 3\n-1 0 1\n-2 0 2\n-1 0 1\n", "single-magnitude");
    assert_int_equal(m->count, 1);
    assert_int_equal(m->combine, GF_COMBINE_MAGNITUDE);
    free_mask(m);
    /* four matrices is the limit */
    m = parse_ok("combine sum\n1 1\n1\n1 1\n2\n1 1\n3\n1 1 2 9\n4\n", "four");
    assert_int_equal(m->count, 4);
    for (int k = 0; k < 4; k++)
        assert_true(m->weights[k][0] == (double)(k + 1));
    assert_true(m->scale[3] == 2.0);
    assert_true(m->offset[3] == 9.0);
    free_mask(m);
}

/* Random masks: every size, count, optional field and comment placement. */
static void test_random_roundtrip(void **state)
{
    (void)state;
    static const char *words[] = { "magnitude", "max", "min", "sum" };
    static const gf_combine combines[] = { GF_COMBINE_MAGNITUDE, GF_COMBINE_MAX, GF_COMBINE_MIN, GF_COMBINE_SUM };
    double *w = malloc(sizeof(double) * GF_MASK_MAX_MATRICES * (31 * 31));
    assert_non_null(w);
    for (int iter = 0; iter < 200; iter++) {
        int W = rng_int(1, 31), H = rng_int(1, 31), count = rng_int(1, 4);
        if (iter < 4) { W = iter < 2 ? 1 : 31; H = iter % 2 ? 31 : 1; }
        int cw = rng_int(0, 3);
        int has_combine = count > 1 || rng_int(0, 1);
        double scale[4], offset[4];
        strbuf sb = { 0 };
        char desc[64];
        snprintf(desc, sizeof desc, "random mask %d", iter);
        int has_desc = rng_int(0, 3) != 0;
        if (has_desc)
            sb_printf(&sb, "# %s\n", desc);
        if (rng_int(0, 1))
            sb_printf(&sb, "\n# more\n");
        if (has_combine)
            sb_printf(&sb, "combine %s\n", words[cw]);
        for (int k = 0; k < count; k++) {
            int fields = rng_int(0, 2);
            scale[k] = 1.0;
            offset[k] = 0.0;
            if (fields >= 1) {
                do scale[k] = rng_weight(); while (scale[k] == 0.0);
            }
            if (fields >= 2)
                offset[k] = rng_weight();
            sb_printf(&sb, "%d %d", W, H);
            if (fields >= 1) sb_printf(&sb, " %.17g", scale[k]);
            if (fields >= 2) sb_printf(&sb, " %.17g", offset[k]);
            sb_printf(&sb, "\n");
            for (int y = 0; y < H; y++) {
                if (rng_int(0, 9) == 0)
                    sb_printf(&sb, "%s", rng_int(0, 1) ? "\n" : "# row comment\n");
                for (int x = 0; x < W; x++) {
                    double v = rng_weight();
                    w[k * (31 * 31) + y * W + x] = v;
                    sb_printf(&sb, "%s%.17g", x ? (rng_int(0, 4) ? " " : " \t ") : "", v);
                }
                sb_printf(&sb, "\n");
            }
        }
        char name[32];
        snprintf(name, sizeof name, "rand%d", iter);
        gf_mask *m = parse_ok(sb.buf, name);
        assert_int_equal(m->width, W);
        assert_int_equal(m->height, H);
        assert_int_equal(m->count, count);
        assert_int_equal(m->combine, has_combine ? combines[cw] : GF_COMBINE_NONE);
        /* the description is the first comment line, wherever it stands */
        const char *first = strstr(sb.buf, "# ");
        char want[64] = "";
        if (first)
            sscanf(first + 2, "%63[^\n]", want);
        assert_string_equal(m->description, want);
        for (int k = 0; k < count; k++) {
            assert_true(m->scale[k] == scale[k]);
            assert_true(m->offset[k] == offset[k]);
            assert_weights(m, k, w + k * (31 * 31), W * H);
        }
        if (count > 1)
            assert_int_equal(m->separable, 0);
        free_mask(m);
        free(sb.buf);
    }
    free(w);
}

/* A fresh parse (of a released mask) must not keep anything from the previous one. */
static void test_reuse_struct(void **state)
{
    (void)state;
    gf_mask *m = new_mask();
    assert_int_equal(gf_mask_parse("# first\ncombine sum\n3 3 2 1\n1 1 1\n1 1 1\n1 1 1\n3 3\n1 1 1\n1 1 1\n1 1 1\n", "a", m), 0);
    assert_int_equal(m->count, 2);
    gf_mask_release(m);
    assert_int_equal(gf_mask_parse("2 1\n5 6\n", "b", m), 0);
    assert_int_equal(m->count, 1);
    assert_int_equal(m->width, 2);
    assert_int_equal(m->height, 1);
    assert_int_equal(m->combine, GF_COMBINE_NONE);
    assert_string_equal(m->description, "");
    assert_true(m->scale[0] == 1.0);
    assert_true(m->offset[0] == 0.0);
    assert_true(m->weights[0][0] == 5.0 && m->weights[0][1] == 6.0);
    assert_factors(m);
    free_mask(m);
}

/* ----------------------------------------------------------- separability */

static void test_separable_masks(void **state)
{
    (void)state;
    static const struct { const char *name, *text; int separable; } cases[] = {
        { "gaussian5", "5 5 256 0\n1 4 6 4 1\n4 16 24 16 4\n6 24 36 24 6\n4 16 24 16 4\n1 4 6 4 1\n", 1 },
        { "box3", "3 3 9\n1 1 1\n1 1 1\n1 1 1\n", 1 },
        { "box9", "9 9 81\n1 1 1 1 1 1 1 1 1\n1 1 1 1 1 1 1 1 1\n1 1 1 1 1 1 1 1 1\n"
                  "1 1 1 1 1 1 1 1 1\n1 1 1 1 1 1 1 1 1\n1 1 1 1 1 1 1 1 1\n"
                  "1 1 1 1 1 1 1 1 1\n1 1 1 1 1 1 1 1 1\n1 1 1 1 1 1 1 1 1\n", 1 },
        { "identity", "1 1\n1\n", 1 },
        { "identity3", "3 3\n0 0 0\n0 1 0\n0 0 0\n", 1 },
        { "row", "5 1\n1 -2 0 3.5 1\n", 1 },
        { "col", "1 5\n1\n-2\n0\n3.5\n1\n", 1 },
        { "sobel-x", "3 3 8 128\n-1 0 1\n-2 0 2\n-1 0 1\n", 1 },
        /* zeros in the first row and column: a divide-by-w[0][0] factoriser fails here */
        { "zero-corner", "3 3\n0 0 0\n0 2 4\n0 3 6\n", 1 },
        { "neg-frac", "3 3\n1.5 -0.125 0.5\n-3 0.25 -1\n6 -0.5 2\n", 1 },
        { "sharpen", "3 3\n0 -1 0\n-1 5 -1\n0 -1 0\n", 0 },
        { "laplacian", "3 3\n0 1 0\n1 -4 1\n0 1 0\n", 0 },
        { "emboss", "3 3\n-2 -1 0\n-1 1 1\n0 1 2\n", 0 },
        { "motion", "3 3\n1 0 0\n0 1 0\n0 0 1\n", 0 },
        { "almost", "2 2\n1 2\n2 4.000001\n", 0 },
        { "sobel", "combine magnitude\n3 3\n-1 0 1\n-2 0 2\n-1 0 1\n3 3\n-1 -2 -1\n0 0 0\n1 2 1\n", 0 },
        { "sobel-x-twice", "combine sum\n3 3\n-1 0 1\n-2 0 2\n-1 0 1\n3 3\n-1 0 1\n-2 0 2\n-1 0 1\n", 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gf_mask *m = parse_ok(cases[i].text, cases[i].name);
        if (m->separable != cases[i].separable)
            print_error("%s: separable = %d, want %d\n", cases[i].name, m->separable, cases[i].separable);
        assert_int_equal(m->separable, cases[i].separable);
        if (cases[i].separable)
            assert_factors(m);
        free_mask(m);
    }
}

/* random rank-1 masks (separable) and the same with one weight nudged (not) */
static void test_separable_random(void **state)
{
    (void)state;
    for (int iter = 0; iter < 100; iter++) {
        int W = rng_int(1, 31), H = rng_int(1, 31);
        int col[31], row[31];
        for (int y = 0; y < H; y++) col[y] = rng_int(-9, 9);
        for (int x = 0; x < W; x++) row[x] = rng_int(-9, 9);
        col[rng_int(0, H - 1)] = rng_int(1, 9); /* not all zero */
        row[rng_int(0, W - 1)] = -rng_int(1, 9);
        int nudge = iter % 2 && W > 1 && H > 1;
        int ny = rng_int(0, H - 1), nx = rng_int(0, W - 1);
        strbuf sb = { 0 };
        sb_printf(&sb, "%d %d %d\n", W, H, rng_int(1, 100));
        for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) {
                int v = col[y] * row[x];
                if (nudge && y == ny && x == nx)
                    v += 1;
                sb_printf(&sb, "%s%d", x ? " " : "", v);
            }
            sb_printf(&sb, "\n");
        }
        gf_mask *m = parse_ok(sb.buf, "rank1");
        /* oracle: an integer matrix has rank <= 1 iff every 2x2 minor is zero */
        int rank1 = 1, nonzero = 0;
        for (int i = 0; i < W * H; i++) {
            double wi = m->weights[0][i];
            nonzero |= wi != 0.0;
            for (int j = 0; j < W * H && rank1; j++) {
                long long a = (long long)wi, d = (long long)m->weights[0][j];
                long long b = (long long)m->weights[0][(i / W) * W + j % W];
                long long c = (long long)m->weights[0][(j / W) * W + i % W];
                if (a * d != b * c)
                    rank1 = 0;
            }
        }
        if (nonzero) {
            if (m->separable != rank1)
                print_error("rank-1 %d but separable %d:\n%s\n", rank1, m->separable, sb.buf);
            assert_int_equal(m->separable, rank1);
            if (rank1)
                assert_factors(m);
        }
        if (!nudge)
            assert_int_equal(rank1, 1); /* the oracle agrees with the construction */
        free_mask(m);
        free(sb.buf);
    }
}

/* ------------------------------------------------------------ malformed */

typedef struct {
    const char *name;
    const char *text;
    int line; /* 0: only the name is required in the message */
} bad_case;

#define ROW3 "1 2 3\n"
#define M33 "3 3\n" ROW3 ROW3 ROW3

static const bad_case bad_cases[] = {
    { "empty", "", 0 },
    { "only-comments", "# just a comment\n# and another\n\n", 0 },
    { "only-blank", "\n\n   \n", 0 },
    { "header-one-number", "# c\n3\n" ROW3, 2 },
    { "width-zero", "0 3\n\n\n\n", 1 },
    { "height-zero", "3 0\n", 1 },
    { "width-4096", "4096 1\n1\n", 1 },
    { "large-cut-short", "# c\n300 300\n1 2 3\n", 2 },
    { "height-4096", "1 4096\n1\n", 1 },
    { "negative-size", "-3 3\n" ROW3 ROW3 ROW3, 1 },
    { "negative-height", "3 -3\n" ROW3 ROW3 ROW3, 1 },
    { "fractional-size", "3.5 3\n" ROW3 ROW3 ROW3, 1 },
    { "huge-size", "99999999999 3\n" ROW3 ROW3 ROW3, 1 },
    { "size-garbage", "3x 3\n" ROW3 ROW3 ROW3, 1 },
    { "scale-zero", "# c\n\n3 3 0\n" ROW3 ROW3 ROW3, 3 },
    { "scale-minus-zero", "3 3 -0.0\n" ROW3 ROW3 ROW3, 1 },
    { "scale-nan", "3 3 nan\n" ROW3 ROW3 ROW3, 1 },
    { "scale-inf", "3 3 inf\n" ROW3 ROW3 ROW3, 1 },
    { "scale-huge", "3 3 1e400\n" ROW3 ROW3 ROW3, 1 },
    { "scale-garbage", "3 3 abc\n" ROW3 ROW3 ROW3, 1 },
    { "offset-nan", "3 3 1 nan\n" ROW3 ROW3 ROW3, 1 },
    { "offset-inf", "3 3 1 -inf\n" ROW3 ROW3 ROW3, 1 },
    { "weight-nan", "3 3\n" ROW3 "4 nan 6\n" ROW3, 3 },
    { "weight-NaN-paren", "3 3\n" ROW3 ROW3 "4 5 NAN(1)\n", 4 },
    { "weight-inf", "# x\n3 3\n" ROW3 ROW3 "1 -inf 3\n", 5 },
    { "weight-infinity", "3 3\n" ROW3 "1 infinity 3\n" ROW3, 3 },
    { "weight-huge", "3 3\n" ROW3 ROW3 "1 1e400 3\n", 4 },
    { "weight-garbage", "3 3\n" ROW3 "1 x 1\n" ROW3, 3 },
    { "weight-suffix", "3 3\n" "1 2 3x\n" ROW3 ROW3, 2 },
    { "row-too-few", "3 3\n" ROW3 "1 2\n" ROW3, 3 },
    { "row-too-many", "3 3\n" ROW3 ROW3 "1 2 3 4\n", 4 },
    { "missing-rows", "3 3\n" ROW3 ROW3, 0 },
    { "missing-rows-comment", "# c\n3 3\n" ROW3 ROW3 "# end\n\n", 0 },
    { "header-only", "# c\n3 3 1 0\n", 0 },
    { "trailing-garbage", M33 "hello\n", 5 },
    { "trailing-row", "combine sum\n" M33 M33 ROW3, 0 },
    { "five-matrices", "combine sum\n1 1\n1\n1 1\n2\n1 1\n3\n1 1\n4\n1 1\n5\n", 10 },
    { "different-sizes", "combine max\n" M33 "2 2\n1 2\n3 4\n", 6 },
    { "no-combine", M33 M33, 0 },
    { "unknown-combine", "combine average\n" M33 M33, 1 },
    { "combine-no-word", "combine\n" M33 M33, 1 },
    { "combine-two-words", "combine sum max\n" M33 M33, 1 },
    { "combine-twice", "combine sum\ncombine max\n" M33 M33, 2 },
    { "combine-after-matrix", M33 "combine sum\n" M33, 5 },
    { "header-five-numbers", "3 3 1 0 7\n" ROW3 ROW3 ROW3, 1 },
};

static void test_malformed(void **state)
{
    (void)state;
    int failed = 0, n = (int)(sizeof bad_cases / sizeof bad_cases[0]);
    for (int i = 0; i < n; i++)
        failed += check_parse_fails(bad_cases[i].text, bad_cases[i].name, bad_cases[i].line) != 0;
    print_message("%d malformed masks, %d not rejected as specified\n", n, failed);
    assert_int_equal(failed, 0);
}

/* Random valid masks with one random defect; the defect's line must be named. */
static void test_malformed_random(void **state)
{
    (void)state;
    static const char *bad_numbers[] = { "nan", "inf", "-inf", "1e400", "-1e999", "x", "1..2", "--1", "0x", "1e", "#" };
    for (int iter = 0; iter < 100; iter++) {
        int W = rng_int(1, 8), H = rng_int(1, 8);
        int by = rng_int(0, H - 1), bx = rng_int(0, W - 1);
        const char *bad = bad_numbers[rng_int(0, (int)(sizeof bad_numbers / sizeof bad_numbers[0]) - 1)];
        if (bad[0] == '#' && bx == 0)
            bad = "nan"; /* a row starting with '#' is a comment line */
        strbuf sb = { 0 };
        int line = 1;
        int pre = rng_int(0, 3);
        for (int i = 0; i < pre; i++, line++)
            sb_printf(&sb, "%s", i % 2 ? "\n" : "# comment\n");
        sb_printf(&sb, "%d %d\n", W, H);
        line++;
        int bad_line = 0;
        for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) {
                if (y == by && x == bx)
                    sb_printf(&sb, "%s%s", x ? " " : "", bad);
                else
                    sb_printf(&sb, "%s%d", x ? " " : "", rng_int(-9, 9));
            }
            sb_printf(&sb, "\n");
            if (y == by)
                bad_line = line;
            line++;
        }
        char name[32];
        snprintf(name, sizeof name, "randbad%d", iter);
        parse_fails(sb.buf, name, bad_line);
        free(sb.buf);
    }
}

/* ------------------------------------------------------------ files */

static void test_load_missing(void **state)
{
    (void)state;
    gf_mask *m = new_mask();
    char path[256];
    snprintf(path, sizeof path, "/nonexistent-gf-%d/%x/missing.mask", (int)getpid(), (unsigned)rng_next());
    gf_set_error("stale");
    assert_int_equal(gf_mask_load_file(path, m), -1);
    assert_error_names(path, 0);
    gf_set_error("stale");
    assert_int_equal(gf_mask_load(path, m), -1);
    assert_error_names(path, 0);
    free_mask(m);
}

/* the first line that starts with '#', "# " stripped */
static void first_comment(const char *path, char *out, size_t size)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    out[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        if (line[0] != '#')
            continue;
        const char *p = line + 1;
        if (*p == ' ')
            p++;
        snprintf(out, size, "%s", p);
        out[strcspn(out, "\r\n")] = '\0';
        break;
    }
    fclose(f);
}

static void test_project_masks(void **state)
{
    (void)state;
    /* expected separability of the masks shipped today; others just must parse */
    static const struct { const char *name; int separable, count; } known[] = {
        { "box3", 1, 1 }, { "box5", 1, 1 }, { "box9", 1, 1 },
        { "gaussian3", 1, 1 }, { "gaussian5", 1, 1 }, { "gaussian7", 1, 1 },
        { "identity", 1, 1 }, { "sobel-x", 1, 1 }, { "sobel-y", 1, 1 },
        { "emboss", 0, 1 }, { "laplacian", 0, 1 }, { "laplacian8", 0, 1 },
        { "motion9", 0, 1 }, { "outline", 0, 1 }, { "sharpen", 0, 1 },
        { "prewitt", 0, 2 }, { "scharr", 0, 2 }, { "sobel", 0, 2 },
    };
    DIR *d = opendir(GF_TEST_MASKS_DIR);
    if (!d)
        print_error("cannot open GF_TEST_MASKS_DIR \"%s\"\n", GF_TEST_MASKS_DIR);
    assert_non_null(d);
    int files = 0, checked = 0;
    struct dirent *e;
    gf_mask *m = new_mask();
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n <= 5 || strcmp(e->d_name + n - 5, ".mask") != 0)
            continue;
        char path[4096], want_name[256], want_desc[1024];
        snprintf(path, sizeof path, "%s/%s", GF_TEST_MASKS_DIR, e->d_name);
        snprintf(want_name, sizeof want_name, "%.*s", (int)(n - 5), e->d_name);
        files++;
        memset(m, 0x5a, sizeof *m);
        if (gf_mask_load_file(path, m) != 0)
            print_error("%s: %s\n", path, gf_error());
        gf_mask_release(m);
        assert_int_equal(gf_mask_load_file(path, m), 0);
        assert_string_equal(m->name, want_name);
        first_comment(path, want_desc, sizeof want_desc);
        assert_true(m->description[0] != '\0');
        assert_true(strncmp(m->description, want_desc, sizeof m->description - 1) == 0);
        assert_in_range(m->width, 1, GF_MASK_MAX_SIZE);
        assert_in_range(m->height, 1, GF_MASK_MAX_SIZE);
        assert_in_range(m->count, 1, GF_MASK_MAX_MATRICES);
        if (m->separable)
            assert_factors(m);
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
            if (strcmp(known[k].name, want_name) != 0)
                continue;
            if (m->separable != known[k].separable)
                print_error("%s: separable %d, want %d\n", want_name, m->separable, known[k].separable);
            assert_int_equal(m->separable, known[k].separable);
            assert_int_equal(m->count, known[k].count);
            if (known[k].count == 2)
                assert_int_equal(m->combine, GF_COMBINE_MAGNITUDE);
            checked++;
        }
        /* the same file through gf_mask_load (a path ends in ".mask") */
        gf_mask *m2 = new_mask();
        assert_int_equal(gf_mask_load(path, m2), 0);
        assert_string_equal(m2->name, want_name);
        assert_int_equal(m2->count, m->count);
        for (int k = 0; k < m->count; k++)
            assert_memory_equal(m2->weights[k], m->weights[k],
                                sizeof(double) * m->width * m->height);
        free_mask(m2);
        gf_mask_release(m);
    }
    closedir(d);
    free_mask(m);
    print_message("%d mask files parsed (%d with known separability)\n", files, checked);
    assert_true(files > 0);
}

static char env_dir[64], env_path[256];

/* removes the scratch folder even when an assertion failed half way */
static int remove_env_dir(void **state)
{
    (void)state;
    if (env_path[0])
        unlink(env_path);
    if (env_dir[0])
        rmdir(env_dir);
    return 0;
}

/* a named mask is found through $GPUFILTER_MASKS */
static void test_named_via_env(void **state)
{
    (void)state;
    snprintf(env_dir, sizeof env_dir, "/tmp/gf-mask-test-XXXXXX");
    assert_non_null(mkdtemp(env_dir));
    const char *dir = env_dir;
    char *path = env_path;
    char name[64];
    snprintf(name, sizeof name, "zz-unit-%08x", (unsigned)rng_next());
    snprintf(env_path, sizeof env_path, "%s/%s.mask", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("# unit test mask\n2 1 3 4\n-5 6\n", f);
    fclose(f);
    const char *old = getenv("GPUFILTER_MASKS");
    char *saved = old ? strdup(old) : NULL;
    char env[512];
    snprintf(env, sizeof env, "/nonexistent-gf-folder:%s", dir);
    setenv("GPUFILTER_MASKS", env, 1);
    gf_mask *m = new_mask();
    int rc = gf_mask_load(name, m);
    if (rc != 0)
        print_error("gf_mask_load(%s): %s\n", name, gf_error());
    assert_int_equal(rc, 0);
    assert_string_equal(m->name, name);
    assert_string_equal(m->description, "unit test mask");
    assert_true(m->weights[0][0] == -5.0 && m->weights[0][1] == 6.0);
    assert_true(m->scale[0] == 3.0 && m->offset[0] == 4.0);
    /* an unknown name fails and is named */
    char missing[80];
    snprintf(missing, sizeof missing, "%s-nope", name);
    gf_mask_release(m);
    assert_int_equal(gf_mask_load(missing, m), -1);
    assert_error_names(missing, 0);
    /* a malformed file reports the file and the line */
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("# broken\n2 1\n1 nan\n", f);
    fclose(f);
    assert_int_equal(gf_mask_load_file(path, m), -1);
    assert_error_names(":3:", 0);
    assert_non_null(strstr(gf_error(), name));
    free_mask(m);
    if (saved) {
        setenv("GPUFILTER_MASKS", saved, 1);
        free(saved);
    } else {
        unsetenv("GPUFILTER_MASKS");
    }
}

/* ------------------------------------------------------------ main */

/* A 255x255 file: parsed whole, its factors found (column x row). */
static void test_large_file(void **state)
{
    (void)state;
    enum { N = 255 };
    strbuf sb = {0};
    sb_printf(&sb, "# large\n%d %d 7 1\n", N, N);
    for (int y = 0; y < N; y++)
        for (int x = 0; x < N; x++)
            sb_printf(&sb, "%d%s", (y % 5 + 1) * (x % 7 - 3), x == N - 1 ? "\n" : " ");
    gf_mask *m = parse_ok(sb.buf, "large");
    assert_int_equal(m->width, N);
    assert_int_equal(m->height, N);
    assert_true(m->weights[0][N * N - 1] == (double)((N - 1) % 5 + 1) * ((N - 1) % 7 - 3));
    assert_int_equal(m->separable, 1);
    assert_factors(m);
    assert_true(gf_mask_is_large(m));
    free_mask(m);
    free(sb.buf);
}

/* gaussian:sigma=S: exp(-i^2 / 2 S^2) on -ceil(3 S)..ceil(3 S), sum 1, as
 * column x row; box and unsharp; the errors name the parameter. */
static void test_parametric(void **state)
{
    (void)state;
    gf_mask *m = new_mask();
    assert_int_equal(gf_mask_load("gaussian:sigma=1.5", m), 0);
    assert_int_equal(m->width, 11);
    assert_int_equal(m->height, 11);
    assert_int_equal(m->separable, 1);
    double total = 0.0;
    for (int i = -5; i <= 5; i++)
        total += exp(-i * i / 4.5);
    for (int i = 0; i < 11; i++)
        assert_true(fabs(m->row[i] - exp(-(i - 5) * (i - 5) / 4.5) / total) < 1e-15);
    assert_true(m->weights[0][3 * 11 + 7] == m->column[3] * m->row[7]);
    assert_false(gf_mask_is_large(m));
    gf_mask_release(m);
    assert_int_equal(gf_mask_load("box:40", m), 0);
    assert_int_equal(m->width, 81);
    assert_true(m->scale[0] == 81.0 * 81.0 && m->weights[0][0] == 1.0);
    assert_true(gf_mask_is_large(m));
    gf_mask_release(m);
    assert_int_equal(gf_mask_load("unsharp:sigma=2,threshold=3", m), 0);
    assert_int_equal(m->combine, GF_COMBINE_UNSHARP);
    assert_true(m->amount == 1.0 && m->threshold == 3.0);
    assert_int_equal(m->width, 13);
    assert_true(gf_mask_is_large(m));
    gf_mask_release(m);
    assert_int_equal(gf_mask_load("gaussian:sigma=-1", m), -1);
    assert_non_null(strstr(gf_error(), "sigma must be a number from"));
    assert_int_equal(gf_mask_load("nosuch:1", m), -1);
    assert_non_null(strstr(gf_error(), "no parametric mask 'nosuch'"));
    free_mask(m);
}

int main(void)
{
    rng_seed("test_mask");

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sobel_two_matrices),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_negative_fractional),
        cmocka_unit_test(test_tabs_and_spaces),
        cmocka_unit_test(test_one_by_one),
        cmocka_unit_test(test_31x31_random),
        cmocka_unit_test(test_non_square),
        cmocka_unit_test(test_description_and_comments),
        cmocka_unit_test(test_description_after_matrix),
        cmocka_unit_test(test_combine_words),
        cmocka_unit_test(test_random_roundtrip),
        cmocka_unit_test(test_reuse_struct),
        cmocka_unit_test(test_separable_masks),
        cmocka_unit_test(test_separable_random),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_malformed_random),
        cmocka_unit_test(test_load_missing),
        cmocka_unit_test(test_project_masks),
        cmocka_unit_test(test_large_file),
        cmocka_unit_test(test_parametric),
        cmocka_unit_test_teardown(test_named_via_env, remove_env_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
