/* test_image.c - cmocka unit tests for image I/O (src/image.c, with the
 * input checks of src/decode_checks.c and the PNM decoder of src/pnm.c) and
 * the size arithmetic in src/util.c.
 *
 * Every run uses fresh random pixels; the seed is printed first and can be
 * replayed with GF_TEST_SEED=N. Files are written under a mkdtemp folder
 * that is removed at the end. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <stb_image.h>
#include <stb_image_write.h>

#include "image.h"
#include "jpeg_rows.h"
#include "jpeg_strips.h"
#include "jpeg_turbo.h"
#include "png_codec.h"
#include "zlib_bands.h"
#include "util.h"

#include "test_rng.h"

/* ---------------------------------------------------------------- helpers */

static char tmpdir[64];

static gf_image *new_image(int w, int h, int c)
{
    gf_image *img = gf_image_new(w, h, c);
    if (!img)
        print_error("gf_image_new(%d, %d, %d): %s\n", w, h, c, gf_error());
    assert_non_null(img);
    assert_int_equal(img->width, w);
    assert_int_equal(img->height, h);
    assert_int_equal(img->channels, c);
    assert_non_null(img->pixels);
    return img;
}

/* random pixels, never all one value */
static gf_image *random_image(int w, int h, int c)
{
    gf_image *img = new_image(w, h, c);
    size_t n = gf_image_bytes(img);
    for (size_t i = 0; i < n; i++)
        img->pixels[i] = (unsigned char)rng_next();
    if (n > 1 && img->pixels[0] == img->pixels[1])
        img->pixels[1] ^= 0x5a;
    return img;
}

/* a smooth RGB image (JPEG-friendly) with a random phase */
static gf_image *gradient_image(int w, int h)
{
    gf_image *img = new_image(w, h, 3);
    int dx = rng_int(0, 40), dy = rng_int(0, 40);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            unsigned char *p = img->pixels + ((size_t)y * w + x) * 3;
            p[0] = (unsigned char)(20 + 200 * x / (w > 1 ? w - 1 : 1));
            p[1] = (unsigned char)(20 + 200 * y / (h > 1 ? h - 1 : 1));
            p[2] = (unsigned char)(30 + (100 * (x + dx) + 80 * (y + dy)) / (w + h + 80));
        }
    return img;
}

static void assert_same_image(const gf_image *want, const gf_image *got, const char *what)
{
    assert_non_null(got);
    if (got->width != want->width || got->height != want->height || got->channels != want->channels)
        print_error("%s: got %dx%dx%d, want %dx%dx%d\n", what, got->width, got->height, got->channels,
                    want->width, want->height, want->channels);
    assert_int_equal(got->width, want->width);
    assert_int_equal(got->height, want->height);
    assert_int_equal(got->channels, want->channels);
    size_t n = gf_image_bytes(want);
    for (size_t i = 0; i < n; i++)
        if (got->pixels[i] != want->pixels[i]) {
            print_error("%s: byte %zu (pixel %zu channel %zu) is %d, want %d\n", what, i,
                        i / (size_t)want->channels, i % (size_t)want->channels, got->pixels[i], want->pixels[i]);
            fail();
        }
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        print_error("cannot open %s: %s\n", path, strerror(errno));
    assert_non_null(f);
    size_t cap = 1 << 16, used = 0;
    unsigned char *buf = malloc(cap);
    assert_non_null(buf);
    size_t got;
    while ((got = fread(buf + used, 1, cap - used, f)) > 0) {
        used += got;
        if (used == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    fclose(f);
    *n = used;
    return buf;
}

static void tmp_path(char *out, size_t size, const char *name)
{
    int n = snprintf(out, size, "%s/%s", tmpdir, name);
    assert_true(n > 0 && (size_t)n < size);
}

static int path_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* entries of a folder, not counting . and .. ; names printed on request */
static int count_entries(const char *dir, int print)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (print)
            print_message("  %s/%s\n", dir, e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

static void assert_entries(const char *dir, int want)
{
    int n = count_entries(dir, 0);
    if (n != want) {
        print_error("%s holds %d entries, want %d (a temporary file left behind?):\n", dir, n, want);
        count_entries(dir, 1);
    }
    assert_int_equal(n, want);
}

static int remove_children(const char *folder);

static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0700);
        remove_children(path);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* remove everything inside folder; -1 if it cannot be opened */
static int remove_children(const char *folder)
{
    DIR *d = opendir(folder);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char child[4096];
        snprintf(child, sizeof child, "%s/%s", folder, e->d_name);
        remove_tree(child);
    }
    closedir(d);
    return 0;
}

/* empty the scratch folder between tests */
static int clean_tmpdir(void **state)
{
    (void)state;
    return remove_children(tmpdir);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gf-image-test-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    remove_tree(tmpdir);
    return 0;
}

static void assert_message(const char *must_contain)
{
    const char *msg = gf_error();
    assert_non_null(msg);
    if (strncmp(msg, "gpufilter: ", 11) != 0 || (must_contain && !strstr(msg, must_contain)))
        print_error("message \"%s\" should start with \"gpufilter: \" and contain \"%s\"\n", msg,
                    must_contain ? must_contain : "");
    assert_true(strncmp(msg, "gpufilter: ", 11) == 0);
    if (must_contain)
        assert_non_null(strstr(msg, must_contain));
}

static gf_image *load_ok(const char *path)
{
    gf_image *img = gf_image_load(path);
    if (!img)
        print_error("gf_image_load(%s): %s\n", path, gf_error());
    assert_non_null(img);
    return img;
}

static void save_ok(const gf_image *img, const char *path, gf_format format, int quality)
{
    int rc = gf_image_save(img, path, format, quality);
    if (rc != 0)
        print_error("gf_image_save(%s): %s\n", path, gf_error());
    assert_int_equal(rc, 0);
}

static void encode_ok(const gf_image *img, gf_format format, int quality, unsigned char **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    int rc = gf_image_encode(img, format, quality, data, size);
    if (rc != 0)
        print_error("gf_image_encode(%s): %s\n", gf_format_name(format), gf_error());
    assert_int_equal(rc, 0);
    assert_non_null(*data);
    assert_true(*size > 0);
}

static void assert_magic(const unsigned char *data, size_t size, gf_format format)
{
    switch (format) {
    case GF_FORMAT_PNG:
        assert_true(size > 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0);
        break;
    case GF_FORMAT_JPEG:
        assert_true(size > 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF);
        break;
    case GF_FORMAT_BMP:
        assert_true(size > 2 && data[0] == 'B' && data[1] == 'M');
        break;
    case GF_FORMAT_TGA:
        assert_true(size > 18); /* no magic; image type 2/3 (raw) or 10/11 (RLE) */
        assert_true(data[2] == 2 || data[2] == 3 || data[2] == 10 || data[2] == 11);
        break;
    default:
        fail();
    }
}

static const struct { int w, h; } odd_sizes[] = {
    { 1, 1 }, { 257, 131 }, { 1, 7 }, { 7, 1 }, { 2, 2 }, { 3, 5 },
};
#define N_ODD (sizeof odd_sizes / sizeof odd_sizes[0])

/* Encode to memory and through a file; the decoded image must equal
 * expect (the original, or what the format keeps of it). */
static void roundtrip(const gf_image *img, const gf_image *expect, gf_format format, const char *ext)
{
    char what[128];
    snprintf(what, sizeof what, "%s %dx%dx%d", ext, img->width, img->height, img->channels);

    unsigned char *data;
    size_t size;
    encode_ok(img, format, 90, &data, &size);
    assert_magic(data, size, format);
    gf_image *back = gf_image_load_memory(data, size, what);
    if (!back)
        print_error("%s: gf_image_load_memory: %s\n", what, gf_error());
    assert_same_image(expect, back, what);
    gf_image_free(back);

    char path[256], name[64];
    snprintf(name, sizeof name, "rt-%dx%dx%d.%s", img->width, img->height, img->channels, ext);
    tmp_path(path, sizeof path, name);
    int before = count_entries(tmpdir, 0);
    save_ok(img, path, gf_format_from_path(path), 90);
    assert_entries(tmpdir, before + 1);
    size_t fsize;
    unsigned char *fdata = read_bytes(path, &fsize);
    /* the file holds exactly what gf_image_encode produces, with the mark
     * where the format has room for it */
    assert_int_equal(gf_image_mark(format, &data, &size), 0);
    assert_int_equal(fsize, size);
    assert_memory_equal(fdata, data, size);
    assert_int_equal(gf_image_has_mark(fdata, fsize),
                     format == GF_FORMAT_PNG || format == GF_FORMAT_JPEG);
    free(fdata);
    free(data);
    back = load_ok(path);
    assert_same_image(expect, back, path);
    gf_image_free(back);
    unlink(path);
}

/* ----------------------------------------------------------- allocation */

static void test_new_and_bytes(void **state)
{
    (void)state;
    for (int c = 1; c <= 4; c++) {
        for (size_t i = 0; i < N_ODD; i++) {
            gf_image *img = new_image(odd_sizes[i].w, odd_sizes[i].h, c);
            size_t n = (size_t)odd_sizes[i].w * (size_t)odd_sizes[i].h * (size_t)c;
            assert_int_equal(gf_image_bytes(img), n);
            memset(img->pixels, 0xab, n); /* the whole buffer is writable */
            gf_image_free(img);
        }
    }
    gf_image_free(NULL);
    static const int bad[][3] = {
        { 0, 5, 3 }, { 5, 0, 3 }, { -1, 5, 3 }, { 5, -7, 1 }, { 5, 5, 0 }, { 5, 5, 5 },
        { 5, 5, -1 }, { INT_MAX, INT_MAX, 4 }, { INT_MIN, 2, 1 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gf_set_error("stale");
        gf_image *img = gf_image_new(bad[i][0], bad[i][1], bad[i][2]);
        if (img)
            print_error("gf_image_new(%d, %d, %d) should fail\n", bad[i][0], bad[i][1], bad[i][2]);
        assert_null(img);
        assert_message(NULL);
        assert_null(strstr(gf_error(), "stale"));
    }
}

static void test_mul_size(void **state)
{
    (void)state;
    size_t out;
    static const struct { size_t a, b; int ok; } cases[] = {
        { 0, 0, 1 }, { 0, SIZE_MAX, 1 }, { SIZE_MAX, 0, 1 }, { 1, SIZE_MAX, 1 }, { SIZE_MAX, 1, 1 },
        { SIZE_MAX, 2, 0 }, { 2, SIZE_MAX, 0 }, { SIZE_MAX / 2 + 1, 2, 0 }, { SIZE_MAX / 2, 2, 1 },
        { (size_t)1 << 32, (size_t)1 << 32, 0 }, { ((size_t)1 << 32) - 1, ((size_t)1 << 32) + 1, 1 },
        { (size_t)1 << 32, ((size_t)1 << 31) + 1, 1 }, { (size_t)1 << 32, ((size_t)1 << 32) + 1, 0 },
        { ((size_t)1 << 32) + 1, (size_t)1 << 32, 0 }, { (size_t)1 << 63, 2, 0 }, { (size_t)1 << 63, 1, 1 }, { SIZE_MAX / 3, 3, 1 }, { SIZE_MAX / 3 + 1, 3, 0 },
        { SIZE_MAX, SIZE_MAX, 0 }, { 65536, 65536, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        out = 12345;
        int rc = gf_mul_size(cases[i].a, cases[i].b, &out);
        if (rc != (cases[i].ok ? 0 : -1))
            print_error("gf_mul_size(%zu, %zu) = %d\n", cases[i].a, cases[i].b, rc);
        assert_int_equal(rc, cases[i].ok ? 0 : -1);
        if (cases[i].ok)
            assert_true(out == cases[i].a * cases[i].b);
    }
    /* random operands of random bit lengths, against the compiler's check */
    for (int i = 0; i < 100000; i++) {
        size_t a = (size_t)rng_next() >> rng_int(0, 63);
        size_t b = (size_t)rng_next() >> rng_int(0, 63);
        size_t want;
        int overflow = __builtin_mul_overflow(a, b, &want);
        int rc = gf_mul_size(a, b, &out);
        if (rc != (overflow ? -1 : 0))
            print_error("gf_mul_size(%zu, %zu) = %d, overflow %d\n", a, b, rc, overflow);
        assert_int_equal(rc, overflow ? -1 : 0);
        if (!overflow)
            assert_true(out == want);
    }
}

/* ----------------------------------------------------------- round trips */

static void test_png_roundtrip(void **state)
{
    (void)state;
    for (int c = 1; c <= 4; c++) {
        for (size_t i = 0; i < N_ODD; i++) {
            gf_image *img = random_image(odd_sizes[i].w, odd_sizes[i].h, c);
            roundtrip(img, img, GF_FORMAT_PNG, "png");
            gf_image_free(img);
        }
        gf_image *img = random_image(rng_int(1, 300), rng_int(1, 300), c);
        roundtrip(img, img, GF_FORMAT_PNG, "PNG");
        gf_image_free(img);
    }
}

/* what a 1- or 2-channel image becomes in a format that stores RGB only */
static gf_image *gray_as_rgb(const gf_image *img)
{
    gf_image *rgb = new_image(img->width, img->height, 3);
    size_t n = (size_t)img->width * (size_t)img->height;
    for (size_t i = 0; i < n; i++)
        memset(rgb->pixels + 3 * i, img->pixels[i * (size_t)img->channels], 3);
    return rgb;
}

static void test_bmp_roundtrip(void **state)
{
    (void)state;
    for (int c = 1; c <= 4; c++) {
        for (size_t i = 0; i < N_ODD + 1; i++) {
            int w = i < N_ODD ? odd_sizes[i].w : rng_int(1, 300);
            int h = i < N_ODD ? odd_sizes[i].h : rng_int(1, 300);
            gf_image *img = random_image(w, h, c);
            if (c >= 3) {
                roundtrip(img, img, GF_FORMAT_BMP, i % 2 ? "BMP" : "bmp");
            } else {
                /* stb writes gray (and gray+alpha, dropping alpha) as 24-bit
                 * RGB: it comes back as 3 equal channels */
                gf_image *rgb = gray_as_rgb(img);
                roundtrip(img, rgb, GF_FORMAT_BMP, "bmp");
                gf_image_free(rgb);
            }
            gf_image_free(img);
        }
    }
}

static void test_tga_roundtrip(void **state)
{
    (void)state;
    /* stb writes every channel count exactly (type 3 gray, 16-bit gray+alpha,
     * RGB, RGBA; run-length encoded) */
    for (int c = 1; c <= 4; c++) {
        for (size_t i = 0; i < N_ODD + 1; i++) {
            int w = i < N_ODD ? odd_sizes[i].w : rng_int(1, 300);
            int h = i < N_ODD ? odd_sizes[i].h : rng_int(1, 300);
            gf_image *img = random_image(w, h, c);
            roundtrip(img, img, GF_FORMAT_TGA, i % 2 ? "TGA" : "tga");
            gf_image_free(img);
        }
        /* runs of equal pixels exercise the RLE packets */
        gf_image *img = random_image(100, 9, c);
        for (int y = 0; y < 9; y++)
            for (int x = 10 * y; x < 100; x++)
                memcpy(img->pixels + ((size_t)y * 100 + x) * c, img->pixels + (size_t)y * 100 * c, (size_t)c);
        roundtrip(img, img, GF_FORMAT_TGA, "tga");
        gf_image_free(img);
    }
}

static double mean_abs_error(const gf_image *a, const gf_image *b)
{
    assert_int_equal(a->width, b->width);
    assert_int_equal(a->height, b->height);
    assert_int_equal(a->channels, b->channels);
    size_t n = gf_image_bytes(a);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += abs((int)a->pixels[i] - (int)b->pixels[i]);
    return sum / (double)n;
}

/* gf_jpeg_rows_sound, the check that keeps damaged JPEGs off nvJPEG, says
 * "damaged" exactly where the whole-image decoder refuses the file: random
 * bytes and runs of bytes overwritten in the entropy-coded data of 4:4:4
 * and 4:2:0 files; some stay decodable, most do not. */
static void test_jpeg_sound_agrees_with_the_decoder(void **state)
{
    (void)state;
    if (!gf_jpeg_rows_available() || !gf_jpeg_turbo_available())
        skip();
    int damaged = 0, sound = 0;
    for (int quality = 80; quality <= 95; quality += 15) {  /* 4:2:0, then 4:4:4 */
        gf_image *img = gradient_image(96, 64);
        for (size_t i = 0; i < gf_image_bytes(img); i++)
            img->pixels[i] = (unsigned char)(img->pixels[i] + rng_int(0, 15));
        unsigned char *data, *copy;
        size_t n;
        assert_int_equal(gf_jpeg_turbo_encode(img->pixels, 96, 64, 3, quality, &data, &n), 0);
        assert_int_equal(gf_jpeg_rows_sound(data, n), 1);
        assert_non_null(copy = malloc(n));
        for (int trial = 0; trial < 80; trial++) {
            memcpy(copy, data, n);
            const size_t at = n / 4 + (size_t)rng_int(0, (int)(n / 2));
            const int run = trial % 2 ? rng_int(2, 16) : 1;
            for (int i = 0; i < run && at + (size_t)i < n; i++)
                copy[at + (size_t)i] = (unsigned char)rng_next();
            int w, h, c;
            unsigned char *pixels = gf_jpeg_turbo_decode(copy, n, &w, &h, &c);
            const int verdict = gf_jpeg_rows_sound(copy, n);
            if (verdict == -1) {  /* the damage made it a kind of file it does not take */
                free(pixels);
                continue;
            }
            if (verdict != (pixels != NULL))
                print_error("quality %d, %d bytes at %zu: sound %d, decoder %s\n", quality, run,
                            at, verdict, pixels ? "decodes it" : "refuses it");
            assert_int_equal(verdict, pixels != NULL);
            damaged += pixels == NULL;
            sound += pixels != NULL;
            free(pixels);
        }
        free(copy);
        free(data);
        gf_image_free(img);
    }
    assert_true(damaged > 0 && sound > 0);  /* both answers were tested */
}

/* The strips a JPEG is joined from must share their tables and layout:
 * strips of two qualities, a progressive or arithmetic-coded one, or a
 * file that is no JPEG are refused (1: the caller encodes it whole). */
static void test_jpeg_join_refuses_unlike_strips(void **state)
{
    (void)state;
    if (!gf_jpeg_turbo_available())
        skip();
    gf_image *img = gradient_image(40, 16);
    unsigned char *a, *b, *joined = NULL;
    size_t na, nb, n;
    assert_int_equal(gf_jpeg_turbo_encode(img->pixels, 40, 16, img->channels, 80, &a, &na), 0);
    assert_int_equal(gf_jpeg_turbo_encode(img->pixels, 40, 16, img->channels, 60, &b, &nb), 0);
    unsigned char *strips[2] = {a, a};
    size_t sizes[2] = {na, na};
    /* quality 80: 4:2:0 for colour (16x16 MCUs: 3 a strip), 8x8 for gray (10) */
    const int restart = img->channels >= 3 ? 3 : 10;
    assert_int_equal(gf_jpeg_join_strips(strips, sizes, 2, 32, restart, &joined, &n), 0);
    gf_image *back = gf_image_load_memory(joined, n, "joined.jpg");
    assert_non_null(back);
    assert_int_equal(back->height, 32);
    gf_image_free(back);
    free(joined);
    strips[1] = b;
    sizes[1] = nb;
    assert_int_equal(gf_jpeg_join_strips(strips, sizes, 2, 32, 10, &joined, &n), 1);
    unsigned char *cut = malloc(na);
    memcpy(cut, a, na);
    cut[na - 1] = 0;  /* no EOI */
    strips[1] = cut;
    sizes[1] = na;
    assert_int_equal(gf_jpeg_join_strips(strips, sizes, 2, 32, 10, &joined, &n), 1);
    for (size_t i = 2; i + 1 < na; i++)  /* the frame marked progressive */
        if (cut[i] == 0xFF && cut[i + 1] == 0xC0)
            cut[i + 1] = 0xC2;
    cut[na - 1] = 0xD9;
    strips[0] = strips[1] = cut;
    assert_int_equal(gf_jpeg_join_strips(strips, sizes, 2, 32, 10, &joined, &n), 1);
    free(cut);
    free(a);
    free(b);
    gf_image_free(img);
}

static void test_jpeg(void **state)
{
    (void)state;
    static const struct { int w, h; } sizes[] = { { 257, 131 }, { 64, 64 }, { 17, 3 }, { 1, 1 } };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        gf_image *img = gradient_image(sizes[i].w, sizes[i].h);
        unsigned char *q95, *q10;
        size_t n95, n10;
        encode_ok(img, GF_FORMAT_JPEG, 95, &q95, &n95);
        encode_ok(img, GF_FORMAT_JPEG, 10, &q10, &n10);
        assert_magic(q95, n95, GF_FORMAT_JPEG);
        assert_magic(q10, n10, GF_FORMAT_JPEG);
        gf_image *back = gf_image_load_memory(q95, n95, "q95.jpg");
        if (!back)
            print_error("q95.jpg: %s\n", gf_error());
        assert_non_null(back);
        double mae = mean_abs_error(img, back);
        print_message("jpeg %dx%d: q95 %zu bytes, MAE %.3f; q10 %zu bytes\n", sizes[i].w, sizes[i].h, n95, mae, n10);
        assert_true(mae < 3.0);
        gf_image_free(back);
        if (sizes[i].w * sizes[i].h >= 64)
            assert_true(n10 < n95);
        free(q95);
        free(q10);

        /* the same through files, by extension */
        char path[256];
        tmp_path(path, sizeof path, i % 2 ? "gradient.JPEG" : "gradient.jpg");
        assert_int_equal(gf_format_from_path(path), GF_FORMAT_JPEG);
        save_ok(img, path, gf_format_from_path(path), 95);
        size_t fsize;
        unsigned char *fdata = read_bytes(path, &fsize);
        assert_magic(fdata, fsize, GF_FORMAT_JPEG);
        free(fdata);
        back = load_ok(path);
        assert_true(mean_abs_error(img, back) < 3.0);
        gf_image_free(back);
        unlink(path);
        gf_image_free(img);
    }
    /* random noise: a low quality must also be smaller, and a poorer match */
    gf_image *noise = random_image(64, 48, 3);
    unsigned char *a, *b;
    size_t na, nb;
    encode_ok(noise, GF_FORMAT_JPEG, 95, &a, &na);
    encode_ok(noise, GF_FORMAT_JPEG, 10, &b, &nb);
    assert_true(nb < na);
    gf_image *ba = gf_image_load_memory(a, na, "noise95");
    gf_image *bb = gf_image_load_memory(b, nb, "noise10");
    assert_non_null(ba);
    assert_non_null(bb);
    assert_true(mean_abs_error(noise, ba) < mean_abs_error(noise, bb));
    gf_image_free(ba);
    gf_image_free(bb);
    gf_image_free(noise);
    free(a);
    free(b);
}

/* A PNG is written with the format asked for, whatever the extension says. */
static void test_explicit_format_wins(void **state)
{
    (void)state;
    gf_image *img = random_image(rng_int(1, 50), rng_int(1, 50), 3);
    char path[256];
    tmp_path(path, sizeof path, "really-a-png.jpg");
    save_ok(img, path, GF_FORMAT_PNG, 95);
    size_t n;
    unsigned char *data = read_bytes(path, &n);
    assert_magic(data, n, GF_FORMAT_PNG);
    free(data);
    gf_image *back = load_ok(path);
    assert_same_image(img, back, path);
    gf_image_free(back);
    gf_image_free(img);
}

static void test_encode_without_format(void **state)
{
    (void)state;
    gf_image *img = random_image(4, 4, 3);
    unsigned char *data = NULL;
    size_t size = 0;
    gf_set_error("stale");
    assert_int_equal(gf_image_encode(img, GF_FORMAT_NONE, 90, &data, &size), -1);
    assert_message(NULL);
    assert_null(strstr(gf_error(), "stale"));
    gf_image_free(img);
}

/* ------------------------------------------------------ hand-made PNGs */

static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static size_t png_chunk(unsigned char *out, const char *type, const unsigned char *data, size_t n)
{
    put32(out, (uint32_t)n);
    memcpy(out + 4, type, 4);
    if (n)
        memcpy(out + 8, data, n);
    put32(out + 8 + n, crc32_of(out + 4, n + 4));
    return n + 12;
}

/* A PNG built by hand (stored deflate blocks, filter 0): an oracle that
 * does not depend on stb_image_write. raw: height rows of width*samples
 * samples, bytes or big-endian 16-bit. */
static unsigned char *make_png(int w, int h, int depth, int color_type, const unsigned char *raw,
                               size_t row_bytes, size_t *out_size)
{
    size_t filtered = (row_bytes + 1) * (size_t)h;
    unsigned char *scan = malloc(filtered);
    assert_non_null(scan);
    for (int y = 0; y < h; y++) {
        scan[(size_t)y * (row_bytes + 1)] = 0;
        memcpy(scan + (size_t)y * (row_bytes + 1) + 1, raw + (size_t)y * row_bytes, row_bytes);
    }
    size_t blocks = filtered / 65535 + 1;
    size_t zsize = 2 + filtered + 5 * blocks + 4;
    unsigned char *z = malloc(zsize);
    assert_non_null(z);
    size_t zi = 0;
    z[zi++] = 0x78;
    z[zi++] = 0x01;
    size_t left = filtered, pos = 0;
    do {
        size_t len = left > 65535 ? 65535 : left;
        z[zi++] = left == len ? 1 : 0;
        z[zi++] = (unsigned char)(len & 0xff);
        z[zi++] = (unsigned char)(len >> 8);
        z[zi++] = (unsigned char)(~len & 0xff);
        z[zi++] = (unsigned char)((~len >> 8) & 0xff);
        memcpy(z + zi, scan + pos, len);
        zi += len;
        pos += len;
        left -= len;
    } while (left > 0);
    uint32_t s1 = 1, s2 = 0;
    for (size_t i = 0; i < filtered; i++) {
        s1 = (s1 + scan[i]) % 65521;
        s2 = (s2 + s1) % 65521;
    }
    put32(z + zi, s2 << 16 | s1);
    zi += 4;
    unsigned char *png = malloc(8 + 25 + zi + 12 + 12);
    assert_non_null(png);
    memcpy(png, "\x89PNG\r\n\x1a\n", 8);
    unsigned char ihdr[13];
    put32(ihdr, (uint32_t)w);
    put32(ihdr + 4, (uint32_t)h);
    ihdr[8] = (unsigned char)depth;
    ihdr[9] = (unsigned char)color_type;
    ihdr[10] = ihdr[11] = ihdr[12] = 0;
    size_t n = 8;
    n += png_chunk(png + n, "IHDR", ihdr, 13);
    n += png_chunk(png + n, "IDAT", z, zi);
    n += png_chunk(png + n, "IEND", NULL, 0);
    free(z);
    free(scan);
    *out_size = n;
    return png;
}

static void test_handmade_png(void **state)
{
    (void)state;
    /* color types: 0 gray, 4 gray+alpha, 2 RGB, 6 RGBA */
    static const int types[5] = { 0, 0, 4, 2, 6 };
    for (int c = 1; c <= 4; c++) {
        int w = rng_int(1, 200), h = rng_int(1, 200);
        if (c == 1) { w = 257; h = 131; }
        /* 8 bits: exact */
        gf_image *img = random_image(w, h, c);
        size_t size;
        unsigned char *png = make_png(w, h, 8, types[c], img->pixels, (size_t)w * c, &size);
        gf_image *back = gf_image_load_memory(png, size, "handmade8.png");
        if (!back)
            print_error("handmade 8-bit PNG (%dx%dx%d): %s\n", w, h, c, gf_error());
        assert_same_image(img, back, "handmade 8-bit PNG");
        gf_image_free(back);
        free(png);

        /* 16 bits: decoded at 16, every sample as it is */
        size_t samples = (size_t)w * h * c;
        unsigned char *raw16 = malloc(samples * 2);
        uint16_t *v = malloc(samples * sizeof *v);
        assert_non_null(raw16);
        assert_non_null(v);
        for (size_t i = 0; i < samples; i++) {
            v[i] = i % 3 == 0 ? (uint16_t)(img->pixels[i] * 257) : (uint16_t)rng_next();
            raw16[2 * i] = (unsigned char)(v[i] >> 8);
            raw16[2 * i + 1] = (unsigned char)v[i];
        }
        png = make_png(w, h, 16, types[c], raw16, (size_t)w * c * 2, &size);
        char path[256];
        tmp_path(path, sizeof path, "handmade16.png");
        write_bytes(path, png, size);
        back = load_ok(path);
        assert_int_equal(back->width, w);
        assert_int_equal(back->height, h);
        assert_int_equal(back->channels, c);
        assert_int_equal(back->depth, 16);
        for (size_t i = 0; i < samples; i++) {
            const unsigned got = gf_image_samples16(back)[i];
            if (got != v[i]) {
                print_error("16-bit sample %zu = %u decoded to %u\n", i, v[i], got);
                fail();
            }
        }
        gf_image_free(back);
        unlink(path);
        free(png);
        free(raw16);
        free(v);
        gf_image_free(img);
    }
}

/* ------------------------------------------------------------ formats */

typedef struct { const char *s; gf_format f; } format_case;

/* fn(s) == f for every case; prints the case that fails. */
static void check_format_cases(gf_format (*fn)(const char *), const char *fn_name,
                               const format_case *cases, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (fn(cases[i].s) != cases[i].f)
            print_error("%s(\"%s\") = %d, want %d\n", fn_name, cases[i].s, fn(cases[i].s),
                        cases[i].f);
        assert_int_equal(fn(cases[i].s), cases[i].f);
    }
}

static void test_format_names(void **state)
{
    (void)state;
    static const format_case names[] = {
        { "png", GF_FORMAT_PNG }, { "PNG", GF_FORMAT_PNG }, { "Png", GF_FORMAT_PNG },
        { "jpg", GF_FORMAT_JPEG }, { "jpeg", GF_FORMAT_JPEG }, { "JPG", GF_FORMAT_JPEG },
        { "JPEG", GF_FORMAT_JPEG }, { "bmp", GF_FORMAT_BMP }, { "BMP", GF_FORMAT_BMP },
        { "tga", GF_FORMAT_TGA }, { "TGA", GF_FORMAT_TGA },
        { "gif", GF_FORMAT_NONE }, { "", GF_FORMAT_NONE }, { "pn", GF_FORMAT_NONE },
        { "pngx", GF_FORMAT_NONE }, { ".png", GF_FORMAT_NONE }, { "jpe", GF_FORMAT_NONE },
        { "webp", GF_FORMAT_NONE }, { "png ", GF_FORMAT_NONE },
    };
    check_format_cases(gf_format_from_name, "gf_format_from_name", names,
                       sizeof names / sizeof names[0]);
    static const format_case paths[] = {
        { "out.png", GF_FORMAT_PNG }, { "OUT.PNG", GF_FORMAT_PNG }, { "/a/b/c.jpg", GF_FORMAT_JPEG },
        { "photo.jpeg", GF_FORMAT_JPEG }, { "x.JPG", GF_FORMAT_JPEG }, { "dir/x.bmp", GF_FORMAT_BMP },
        { "x.tga", GF_FORMAT_TGA }, { "archive.tar.png", GF_FORMAT_PNG }, { "a.png.gif", GF_FORMAT_NONE },
        { "noext", GF_FORMAT_NONE }, { "dir.png/noext", GF_FORMAT_NONE }, { "x.gif", GF_FORMAT_NONE },
        { "-", GF_FORMAT_NONE }, { "", GF_FORMAT_NONE }, { "./out.png", GF_FORMAT_PNG },
        { "x.", GF_FORMAT_NONE }, { "../pictures/x.tga", GF_FORMAT_TGA },
    };
    check_format_cases(gf_format_from_path, "gf_format_from_path", paths,
                       sizeof paths / sizeof paths[0]);
    /* every known format's name maps back to it */
    static const gf_format all[] = { GF_FORMAT_PNG, GF_FORMAT_JPEG, GF_FORMAT_BMP, GF_FORMAT_TGA };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *name = gf_format_name(all[i]);
        assert_non_null(name);
        assert_int_equal(gf_format_from_name(name), all[i]);
    }
}

/* ------------------------------------------------------------ load errors */

static void load_fails(const char *path)
{
    gf_set_error("stale");
    gf_image *img = gf_image_load(path);
    if (img)
        print_error("gf_image_load(%s) should fail, got %dx%dx%d\n", path, img->width, img->height, img->channels);
    assert_null(img);
    assert_message(path);
    assert_null(strstr(gf_error(), "stale"));
}

static void test_load_errors(void **state)
{
    (void)state;
    char path[256];

    tmp_path(path, sizeof path, "does-not-exist.png");
    load_fails(path);

    tmp_path(path, sizeof path, "empty.png");
    write_bytes(path, "", 0);
    load_fails(path);

    tmp_path(path, sizeof path, "text.png");
    const char *text = "hello, this is not an image\nsecond line\n";
    write_bytes(path, text, strlen(text));
    load_fails(path);

    tmp_path(path, sizeof path, "a-folder.png");
    assert_int_equal(mkdir(path, 0700), 0);
    load_fails(path);

    /* truncated PNGs: cut in the signature, the header, the data, before IEND */
    gf_image *img = random_image(rng_int(40, 120), rng_int(40, 120), rng_int(1, 4));
    unsigned char *data;
    size_t size;
    encode_ok(img, GF_FORMAT_PNG, 0, &data, &size);
    size_t cuts[] = { 4, 8, 20, 33, 40, size / 2, size - 13, size - 1 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "cut-%zu-of-%zu.png", cuts[i], size);
        tmp_path(path, sizeof path, name);
        write_bytes(path, data, cuts[i]);
        load_fails(path);
        /* and from memory, named by the name argument */
        gf_set_error("stale");
        assert_null(gf_image_load_memory(data, cuts[i], name));
        assert_message(name);
    }
    free(data);

    /* a truncated JPEG */
    gf_image_free(img);
    img = gradient_image(200, 150);
    encode_ok(img, GF_FORMAT_JPEG, 90, &data, &size);
    tmp_path(path, sizeof path, "cut.jpg");
    write_bytes(path, data, size / 2);
    load_fails(path);
    free(data);
    gf_image_free(img);

    /* random bytes from memory */
    unsigned char junk[1000];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)rng_next();
    junk[0] = 'J'; /* not a PNM, PNG, JPEG, BMP, GIF, PSD, HDR or PIC signature */
    junk[2] = 0x7f; /* an invalid TGA image type */
    gf_set_error("stale");
    assert_null(gf_image_load_memory(junk, sizeof junk, "junk-buffer"));
    assert_message("junk-buffer");
    gf_set_error("stale");
    assert_null(gf_image_load_memory(junk, 0, "zero-bytes"));
    assert_message("zero-bytes");
}

/* ------------------------------------------------- hostile and odd inputs */

/* A growing byte buffer for files built by hand. */
typedef struct {
    unsigned char *data;
    size_t size, capacity;
} bytes;

static void put(bytes *b, const void *p, size_t n)
{
    if (b->size + n > b->capacity) {
        b->capacity = (b->size + n) * 2 + 64;
        b->data = realloc(b->data, b->capacity);
        assert_non_null(b->data);
    }
    if (n)
        memcpy(b->data + b->size, p, n);
    b->size += n;
}

static void put8(bytes *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    put(b, &c, 1);
}

/* A BMP's pixel rows: bottom row first, each padded with zeros to stride. */
static void put_bottom_up_rows(bytes *b, const unsigned char *rows, int h, size_t row_bytes,
                               size_t stride)
{
    for (int y = h - 1; y >= 0; y--) {
        put(b, rows + (size_t)y * row_bytes, row_bytes);
        for (size_t k = row_bytes; k < stride; k++)
            put8(b, 0);
    }
}

static void put16le(bytes *b, unsigned v)
{
    put8(b, v & 255);
    put8(b, v >> 8 & 255);
}

static void put16be(bytes *b, unsigned v)
{
    put8(b, v >> 8 & 255);
    put8(b, v & 255);
}

static void put32le(bytes *b, uint32_t v)
{
    put16le(b, v & 0xffff);
    put16le(b, v >> 16);
}

static void put32be(bytes *b, uint32_t v)
{
    put16be(b, v >> 16);
    put16be(b, v & 0xffff);
}

static void put_text(bytes *b, const char *s)
{
    put(b, s, strlen(s));
}

static void append_to_bytes(void *context, void *data, int size)
{
    put(context, data, (size_t)size);
}

/* The decode of data (copied to a buffer of exactly its size, so that a
 * sanitizer build catches a read past the end). */
static gf_image *decode_exact_copy(const unsigned char *data, size_t size, const char *name)
{
    unsigned char *copy = malloc(size ? size : 1);
    assert_non_null(copy);
    memcpy(copy, data, size);
    gf_set_error("stale");
    gf_image *img = gf_image_load_memory(copy, size, name);
    free(copy);
    return img;
}

static gf_image *decode_ok(const unsigned char *data, size_t size, const char *name)
{
    gf_image *img = decode_exact_copy(data, size, name);
    if (!img)
        print_error("%s: %s\n", name, gf_error());
    assert_non_null(img);
    return img;
}

/* Refused, with a message naming the file and holding must_contain. */
static void assert_refused(const unsigned char *data, size_t size, const char *name,
                           const char *must_contain)
{
    gf_image *img = decode_exact_copy(data, size, name);
    if (img)
        print_error("%s (%zu bytes) should be refused, got %dx%dx%d\n", name, size, img->width,
                    img->height, img->channels);
    assert_null(img);
    assert_message(name);
    assert_message(must_contain);
}

/* Every cut of data to from .. size - 1 bytes is refused as truncated. */
static void assert_cuts_truncated(const unsigned char *data, size_t from, size_t size,
                                  const char *what)
{
    for (size_t cut = from; cut < size; cut++) {
        char name[128];
        snprintf(name, sizeof name, "%s cut to %zu of %zu bytes", what, cut, size);
        assert_refused(data, cut, name, "truncated");
    }
}

/* The first occurrence of needle in data, or NULL. */
static unsigned char *find_bytes(unsigned char *data, size_t size, const char *needle, size_t n)
{
    for (size_t i = 0; i + n <= size; i++)
        if (memcmp(data + i, needle, n) == 0)
            return data + i;
    return NULL;
}

/* img's pixels equal want (width x height x channels bytes). */
static void assert_pixels(const gf_image *img, int w, int h, int c, const unsigned char *want,
                          const char *what)
{
    gf_image expect = {w, h, c, (unsigned char *)want, 0, 8};
    assert_same_image(&expect, img, what);
}

/* stb_image never returns from some hostile files; a test that would hang
 * ends the program instead (SIGALRM's default action). */
#define HANG_LIMIT_S 20

/* ---- PNM */

/* A binary PNM: the header text, then each sample in 1 byte, or 2
 * (big-endian) when maxval is over 255. */
static bytes make_pnm(const char *header, const unsigned *samples, size_t count, unsigned maxval)
{
    bytes b = {0};
    put_text(&b, header);
    for (size_t i = 0; i < count; i++) {
        if (maxval > 255)
            put16be(&b, samples[i]);
        else
            put8(&b, samples[i]);
    }
    return b;
}

static unsigned char scaled_sample(unsigned v, unsigned maxval)
{
    return (unsigned char)((v * 255 + maxval / 2) / maxval);
}

/* A maxval over 255 decodes at 16 bits: round(v * 65535 / maxval). */
static void assert_pnm16(const gf_image *img, int w, int h, int c, const unsigned *samples,
                         unsigned maxval, const char *what)
{
    assert_int_equal(img->width, w);
    assert_int_equal(img->height, h);
    assert_int_equal(img->channels, c);
    assert_int_equal(img->depth, 16);
    for (size_t i = 0; i < (size_t)w * h * c; i++) {
        const unsigned want = (unsigned)(((uint64_t)samples[i] * 65535 + maxval / 2) / maxval);
        if (gf_image_samples16(img)[i] != want) {
            print_error("%s: sample %zu is %u, want %u\n", what, i, gf_image_samples16(img)[i], want);
            fail();
        }
    }
}

static void test_pnm_truncated_or_malformed_refused(void **state)
{
    (void)state;
    /* the file: 451x300 declared, 30 bytes of samples */
    bytes b = {0};
    put_text(&b, "P6\n451 300\n255\n");
    while (b.size < 45)
        put8(&b, (unsigned)rng_next());
    assert_refused(b.data, b.size, "trunc_451x300.ppm", "truncated");
    free(b.data);

    /* a whole P6 with comments and trailing bytes decodes exactly; every
     * cut of it is refused */
    const int w = 13, h = 7;
    unsigned samples[13 * 7 * 3];
    unsigned char want[13 * 7 * 3];
    for (int i = 0; i < w * h * 3; i++)
        want[i] = (unsigned char)(samples[i] = (unsigned)rng_next() & 255);
    b = make_pnm("P6\n# made by hand\n13 7 # width, height\n255\n", samples, (size_t)w * h * 3, 255);
    const size_t whole = b.size;
    gf_image *img = decode_ok(b.data, whole, "whole.ppm");
    assert_pixels(img, w, h, 3, want, "P6 maxval 255");
    gf_image_free(img);
    put_text(&b, "trailing bytes are allowed");
    img = decode_ok(b.data, b.size, "trailing.ppm");
    assert_pixels(img, w, h, 3, want, "P6 with trailing bytes");
    gf_image_free(img);
    assert_cuts_truncated(b.data, 2, whole, "P6");
    free(b.data);

    /* malformed headers, each followed by enough samples */
    static const struct {
        const char *header, *problem;
    } bad[] = {
        {"P6\n0 7\n255\n", "0x7 pixels"},
        {"P5 5 0 255\n", "5x0 pixels"},
        {"P6\n1234567890 1\n255\n", "too large"},
        {"P5 2 2 0\n", "maxval 0"},
        {"P5 2 2 65536\n", "maxval 65536"},
        {"P5 2 2 255#no white space\n", "white space"},
        {"P52 2 255\n", "corrupt PNM"},
        {"P5 2 x 255\n", "corrupt PNM"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b = (bytes){0};
        put_text(&b, bad[i].header);
        for (int k = 0; k < 16; k++)
            put8(&b, 1);
        assert_refused(b.data, b.size, "bad.pnm", bad[i].problem);
        free(b.data);
    }

    /* the pixel limit holds before anything is allocated */
    gf_image_set_max_pixels(100);
    static const char big[] = "P5 11 10 255\n";
    assert_refused((const unsigned char *)big, sizeof big - 1, "big.pgm", "over the limit");
    gf_image_set_max_pixels(GF_DEFAULT_MAX_PIXELS);
}

static void test_pnm_scaled_by_maxval(void **state)
{
    (void)state;
    /* the values: 16-bit, maxval 15, maxval 1 */
    static const unsigned deep[] = {0, 1000, 30000, 65535}, nibble[] = {0, 5, 10, 15},
                          bit[] = {0, 1, 1, 0};
    static const unsigned char nibble_want[] = {0, 85, 170, 255},
                               bit_want[] = {0, 255, 255, 0};
    static const struct {
        const char *header;
        const unsigned *samples;
        unsigned maxval;
        const unsigned char *want;
    } cases[] = {
        {"P5\n2 2\n65535\n", deep, 65535, NULL},
        {"P5\n2 2\n15\n", nibble, 15, nibble_want},
        {"P5\n2 2\n1\n", bit, 1, bit_want},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bytes b = make_pnm(cases[i].header, cases[i].samples, 4, cases[i].maxval);
        gf_image *img = decode_ok(b.data, b.size, cases[i].header);
        if (cases[i].want)
            assert_pixels(img, 2, 2, 1, cases[i].want, cases[i].header);
        else  /* maxval 65535: the samples unchanged */
            assert_pnm16(img, 2, 2, 1, cases[i].samples, 65535, cases[i].header);
        gf_image_free(img);
        free(b.data);
    }
    /* random samples, each maxval's extremes among them, gray and RGB */
    static const unsigned maxvals[] = {1, 2, 3, 15, 100, 254, 256, 1000, 4095, 65534, 65535};
    for (size_t m = 0; m < sizeof maxvals / sizeof maxvals[0]; m++) {
        for (int channels = 1; channels <= 3; channels += 2) {
            const unsigned maxval = maxvals[m];
            const int w = rng_int(1, 40), h = rng_int(1, 30);
            const size_t count = (size_t)w * h * channels;
            unsigned *samples = malloc(count * sizeof *samples);
            unsigned char *want = malloc(count);
            assert_non_null(samples);
            assert_non_null(want);
            for (size_t i = 0; i < count; i++) {
                samples[i] = i == 0 ? maxval : i == 1 ? 0 : (unsigned)(rng_next() % (maxval + 1));
                want[i] = scaled_sample(samples[i], maxval);
            }
            char header[64];
            snprintf(header, sizeof header, "P%c %d %d %u\n", channels == 1 ? '5' : '6', w, h, maxval);
            bytes b = make_pnm(header, samples, count, maxval);
            gf_image *img = decode_ok(b.data, b.size, header);
            if (maxval > 255)
                assert_pnm16(img, w, h, channels, samples, maxval, header);
            else
                assert_pixels(img, w, h, channels, want, header);
            gf_image_free(img);
            free(b.data);
            free(samples);
            free(want);
        }
    }
}

static void test_pnm_sample_over_maxval_refused(void **state)
{
    (void)state;
    static const unsigned nibble[] = {0, 5, 16, 15}, deep[] = {0, 1001, 3, 4};
    bytes b = make_pnm("P5 2 2 15\n", nibble, 4, 15);
    assert_refused(b.data, b.size, "over15.pgm", "over maxval 15");
    free(b.data);
    b = make_pnm("P6 1 2 1000\n", deep, 4, 1000);
    put16be(&b, 7);
    put16be(&b, 8);
    assert_refused(b.data, b.size, "over1000.ppm", "over maxval 1000");
    free(b.data);
}

/* ---- TGA */

static void test_tga_rle_truncated_refused(void **state)
{
    (void)state;
    /* the file: 64x64 RLE declared, one run packet */
    static const unsigned char tiny[22] = {0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                           64, 0, 64, 0, 24, 0, 0xFF, 1, 2, 3};
    assert_refused(tiny, sizeof tiny, "rle64.tga", "corrupt TGA");

    /* stb_image_write's TGA is RLE: runs and raw packets */
    for (int c = 1; c <= 4; c++) {
        gf_image *img = random_image(41, 23, c);
        for (int y = 0; y < 23; y += 2)
            for (int x = 3 * y % 41; x < 41; x++)
                memcpy(img->pixels + ((size_t)y * 41 + x) * c, img->pixels + (size_t)y * 41 * c, (size_t)c);
        unsigned char *data;
        size_t size;
        encode_ok(img, GF_FORMAT_TGA, 90, &data, &size);
        assert_true(data[2] >= 9);
        gf_image *back = decode_ok(data, size, "rle.tga");
        assert_same_image(img, back, "RLE TGA");
        gf_image_free(back);
        assert_cuts_truncated(data, 18, size, "RLE TGA");
        free(data);
        gf_image_free(img);
    }

    /* colour-mapped RLE (type 9): a 4-entry BGR map, packets across rows */
    static const unsigned char map[4][3] = {{1, 2, 3}, {40, 50, 60}, {200, 100, 0}, {9, 8, 7}};
    static const unsigned char packets[] = {0x85, 2, 0x01, 1, 3, 0x81, 1, 0x01, 3, 0, 0x82, 2};
    static const unsigned char indices[15] = {2, 2, 2, 2, 2, 2, 1, 3, 1, 1, 3, 0, 2, 2, 2};
    bytes b = {0};
    static const unsigned char header[18] = {0, 1, 9, 0, 0, 4, 0, 24, 0, 0, 0, 0, 5, 0, 3, 0, 8, 0x20};
    put(&b, header, sizeof header);
    put(&b, map, sizeof map);
    put(&b, packets, sizeof packets);
    unsigned char want[15 * 3];
    for (int i = 0; i < 15; i++)
        for (int k = 0; k < 3; k++)
            want[3 * i + k] = map[indices[i]][2 - k];
    gf_image *img = decode_ok(b.data, b.size, "mapped.tga");
    assert_pixels(img, 5, 3, 3, want, "colour-mapped RLE TGA");
    gf_image_free(img);
    assert_cuts_truncated(b.data, 18, b.size, "colour-mapped RLE TGA");
    free(b.data);
}

/* ---- BMP */

/* An OS/2 1.x BMP (12-byte header): rows bottom-up, padded to 4 bytes;
 * a 3-byte BGR palette before the pixels when bpp is 8. */
static bytes make_os2_bmp(int w, int h, int bpp, const unsigned char *palette, const unsigned char *rows)
{
    const size_t stride = ((size_t)w * bpp + 31) / 32 * 4, offset = 26 + (bpp == 8 ? 768 : 0);
    bytes b = {0};
    put_text(&b, "BM");
    put32le(&b, (uint32_t)(offset + stride * h));
    put32le(&b, 0);
    put32le(&b, (uint32_t)offset);
    put32le(&b, 12);
    put16le(&b, (unsigned)w);
    put16le(&b, (unsigned)h);
    put16le(&b, 1);
    put16le(&b, (unsigned)bpp);
    if (bpp == 8)
        put(&b, palette, 768);
    const size_t row_bytes = (size_t)w * bpp / 8;
    put_bottom_up_rows(&b, rows, h, row_bytes, stride);
    return b;
}

static void test_bmp_os2_truncated_refused(void **state)
{
    (void)state;
    /* the file: 4096x4096 declared, no pixel data */
    static const unsigned char tiny[26] = {'B', 'M', 26, 0, 0, 0, 0, 0, 0, 0, 26, 0, 0, 0,
                                           12, 0, 0, 0, 0, 16, 0, 16, 1, 0, 24, 0};
    assert_refused(tiny, sizeof tiny, "os2.bmp", "truncated");

    const int w = 7, h = 5;  /* odd width: padded rows */
    gf_image *img = random_image(w, h, 3);
    unsigned char bgr[7 * 5 * 3];
    for (int i = 0; i < w * h; i++)
        for (int k = 0; k < 3; k++)
            bgr[3 * i + k] = img->pixels[3 * i + 2 - k];
    bytes b = make_os2_bmp(w, h, 24, NULL, bgr);
    gf_image *back = decode_ok(b.data, b.size, "os2-24.bmp");
    assert_same_image(img, back, "OS/2 BMP, 24 bits");
    gf_image_free(back);
    assert_cuts_truncated(b.data, 26, b.size, "OS/2 BMP, 24 bits");
    free(b.data);

    /* 8 bits: stb_image 2.27 reads the first (offset - 38) / 3 entries of an
     * OS/2 palette, so the indices stay below that */
    unsigned char palette[768], index[7 * 5], want[7 * 5 * 3];
    for (int i = 0; i < 768; i++)
        palette[i] = (unsigned char)rng_next();
    for (int i = 0; i < w * h; i++) {
        index[i] = (unsigned char)rng_int(0, 200);
        for (int k = 0; k < 3; k++)
            want[3 * i + k] = palette[3 * index[i] + 2 - k];
    }
    b = make_os2_bmp(w, h, 8, palette, index);
    back = decode_ok(b.data, b.size, "os2-8.bmp");
    assert_pixels(back, w, h, 3, want, "OS/2 BMP, 8 bits");
    gf_image_free(back);
    assert_cuts_truncated(b.data, 26 + 768, b.size, "OS/2 BMP, 8 bits");
    free(b.data);
    gf_image_free(img);
}

/* A Windows BMP (40-byte header) of 1, 4 or 8 bits with 'entries' BGRA
 * palette entries; rows given top-down as packed bytes of row_bytes. */
static bytes make_palette_bmp(int w, int h, int bpp, int entries, const unsigned char *palette,
                              const unsigned char *rows, size_t row_bytes)
{
    const size_t stride = ((size_t)w * bpp + 31) / 32 * 4, offset = 54 + 4 * (size_t)entries;
    bytes b = {0};
    put_text(&b, "BM");
    put32le(&b, (uint32_t)(offset + stride * h));
    put32le(&b, 0);
    put32le(&b, (uint32_t)offset);
    put32le(&b, 40);
    put32le(&b, (uint32_t)w);
    put32le(&b, (uint32_t)h);
    put16le(&b, 1);
    put16le(&b, (unsigned)bpp);
    for (int i = 0; i < 6; i++)  /* no compression, sizes, resolutions, colour counts */
        put32le(&b, 0);
    put(&b, palette, 4 * (size_t)entries);
    put_bottom_up_rows(&b, rows, h, row_bytes, stride);
    return b;
}

/* stb_image 2.27 looks every index up in a table of 256 entries of which
 * only the palette's are set: an index past the palette read uninitialised
 * memory (valgrind), so such a file is refused; indices inside it decode. */
static void test_bmp_index_past_palette_refused(void **state)
{
    (void)state;
    static const unsigned char palette[4 * 3] = {10, 20, 30, 0, 40, 50, 60, 0, 70, 80, 90, 0};
    /* 8 bits, 2 entries: indices 200 and 201 as found, then only 0 and 1 */
    unsigned char rows8[3 * 4] = {0, 1, 1, 0, 1, 0, 0, 1, 200, 201, 0, 1};
    bytes b = make_palette_bmp(4, 3, 8, 2, palette, rows8, 4);
    assert_refused(b.data, b.size, "pal8.bmp", "past the palette");
    free(b.data);
    rows8[8] = 1, rows8[9] = 0;
    b = make_palette_bmp(4, 3, 8, 2, palette, rows8, 4);
    gf_image *img = decode_ok(b.data, b.size, "pal8-ok.bmp");
    for (int i = 0; i < 12; i++)
        for (int k = 0; k < 3; k++)
            assert_int_equal(img->pixels[3 * i + k], palette[4 * rows8[i] + 2 - k]);
    gf_image_free(img);
    free(b.data);
    /* 4 bits, 3 entries: the nibble 3 in the last pixel of an odd row */
    unsigned char rows4[2 * 2] = {0x01, 0x20, 0x12, 0x30};
    b = make_palette_bmp(3, 2, 4, 3, palette, rows4, 2);
    assert_refused(b.data, b.size, "pal4.bmp", "past the palette");
    free(b.data);
    rows4[3] = 0x2F;  /* the low nibble lies past the width: not a pixel */
    b = make_palette_bmp(3, 2, 4, 3, palette, rows4, 2);
    gf_image_free(decode_ok(b.data, b.size, "pal4-ok.bmp"));
    free(b.data);
    /* 1 bit, 1 entry: any set bit inside the width */
    unsigned char rows1[2] = {0x00, 0x20};
    b = make_palette_bmp(3, 2, 1, 1, palette, rows1, 1);
    assert_refused(b.data, b.size, "pal1.bmp", "past the palette");
    free(b.data);
    rows1[1] = 0x1F;  /* bits past the width */
    b = make_palette_bmp(3, 2, 1, 1, palette, rows1, 1);
    gf_image_free(decode_ok(b.data, b.size, "pal1-ok.bmp"));
    free(b.data);
}

/* ---- Radiance HDR */

static void put_hdr_header(bytes *b, int w, int h)
{
    char line[64];
    put_text(b, "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n");
    snprintf(line, sizeof line, "-Y %d +X %d\n", h, w);
    put_text(b, line);
}

/* One RLE scanline of width 8: its start, then each component as a dump of
 * 8 bytes. */
static void put_hdr_rle_scanline(bytes *b, unsigned char value)
{
    static const unsigned char start[4] = {2, 2, 0, 8};
    put(b, start, 4);
    for (int k = 0; k < 4; k++) {
        put8(b, 8);
        for (int x = 0; x < 8; x++)
            put8(b, k == 3 ? 128 : value + x);
    }
}

static void test_hdr_rle_count_zero_refused(void **state)
{
    (void)state;
    alarm(HANG_LIMIT_S);
    bytes b = {0};
    put_hdr_header(&b, 8, 2);
    static const unsigned char zero_count[5] = {2, 2, 0, 8, 0};
    put(&b, zero_count, sizeof zero_count);
    while (b.size < 50)
        put8(&b, 0);
    assert_refused(b.data, b.size, "count0.hdr", "corrupt HDR (an RLE count of 0)");
    free(b.data);
    /* a count of 0 after a first scanline, and a dump past the scanline */
    b = (bytes){0};
    put_hdr_header(&b, 8, 2);
    put_hdr_rle_scanline(&b, 10);
    put(&b, zero_count, sizeof zero_count);
    put_text(&b, "0123456789012345678901234567890123456789");
    assert_refused(b.data, b.size, "count0-row1.hdr", "an RLE count of 0");
    free(b.data);
    b = (bytes){0};
    put_hdr_header(&b, 8, 1);
    put(&b, zero_count, 4);
    put8(&b, 9);
    put_text(&b, "012345678012345678012345678012345678");
    assert_refused(b.data, b.size, "past.hdr", "past the end");
    free(b.data);
    alarm(0);
}

static void test_hdr_truncated_refused(void **state)
{
    (void)state;
    alarm(HANG_LIMIT_S);
    /* stb_image_write's files: RLE scanlines from width 8, flat pixels below */
    static const int widths[] = {19, 5};
    for (size_t i = 0; i < 2; i++) {
        const int w = widths[i], h = 7;
        float *values = malloc(sizeof(float) * (size_t)w * h * 3);
        assert_non_null(values);
        for (int k = 0; k < w * h * 3; k++)
            values[k] = (float)(rng_next() % 1000) / 250.0f;
        for (int x = 0; x < w; x++)  /* a run in the first row */
            memcpy(values + 3 * x, values, 3 * sizeof(float));
        bytes b = {0};
        assert_true(stbi_write_hdr_to_func(append_to_bytes, &b, w, h, 3, values));
        int sw, sh, sc;
        unsigned char *oracle = stbi_load_from_memory(b.data, (int)b.size, &sw, &sh, &sc, 0);
        assert_non_null(oracle);
        gf_image *img = decode_ok(b.data, b.size, "stb.hdr");
        assert_pixels(img, sw, sh, sc, oracle, "HDR");
        gf_image_free(img);
        free(oracle);
        const unsigned char *x = find_bytes(b.data, b.size, "+X ", 3);
        assert_non_null(x);
        const unsigned char *end = memchr(x, '\n', b.size - (size_t)(x - b.data));
        assert_non_null(end);
        assert_cuts_truncated(b.data, (size_t)(end + 1 - b.data), b.size, "HDR");
        free(b.data);
        free(values);
    }
    /* a scanline that does not start 2, 2 turns the rest of the image flat:
     * stb takes 4 bytes a pixel of the whole image from there */
    bytes b = {0};
    put_hdr_header(&b, 8, 3);
    put_hdr_rle_scanline(&b, 20);
    for (int k = 0; k < 4 * 8 * 3; k++)
        put8(&b, k % 4 == 3 ? 129 : 0x80 + k % 50);
    gf_image *img = decode_ok(b.data, b.size, "flat-from-row-1.hdr");
    assert_int_equal(img->width, 8);
    assert_int_equal(img->height, 3);
    gf_image_free(img);
    assert_refused(b.data, b.size - 1, "flat-from-row-1-cut.hdr", "truncated");
    free(b.data);
    alarm(0);
}

/* ---- GIF */

/* GIF LZW codes of 9 bits, least significant bit first, in sub-blocks. */
typedef struct {
    bytes *out;
    unsigned char block[255];
    size_t used;
    uint32_t bits;
    int pending;
} gif_code_writer;

static void put_gif_block(gif_code_writer *g)
{
    put8(g->out, (unsigned)g->used);
    put(g->out, g->block, g->used);
    g->used = 0;
}

static void put_gif_code(gif_code_writer *g, unsigned code)
{
    g->bits |= (uint32_t)code << g->pending;
    for (g->pending += 9; g->pending >= 8; g->pending -= 8) {
        g->block[g->used++] = (unsigned char)g->bits;
        g->bits >>= 8;
        if (g->used == sizeof g->block)
            put_gif_block(g);
    }
}

/* LZW data at minimum code size 8: each pixel a literal code, a clear code
 * (256) before every 250 of them, so that the decoder's table stays below
 * 512 entries and the codes 9 bits wide; the end code (257), the data
 * terminator. */
static void put_gif_lzw(bytes *b, const unsigned char *indices, size_t count)
{
    gif_code_writer g = {.out = b};
    put8(b, 8);
    for (size_t i = 0; i < count; i++) {
        if (i % 250 == 0)
            put_gif_code(&g, 256);
        put_gif_code(&g, indices[i]);
    }
    put_gif_code(&g, 257);
    if (g.pending > 0)
        g.block[g.used++] = (unsigned char)g.bits;
    if (g.used > 0)
        put_gif_block(&g);
    put8(b, 0);
}

/* A GIF89a: a 256-entry global colour table, a graphic control and a
 * comment extension, one image of indices; *data_end: the size up to its
 * data's terminator, the trailer after it. */
static bytes make_gif(int w, int h, const unsigned char *palette, const unsigned char *indices,
                      size_t *data_end)
{
    bytes b = {0};
    put_text(&b, "GIF89a");
    put16le(&b, (unsigned)w);
    put16le(&b, (unsigned)h);
    put8(&b, 0xF7);
    put8(&b, 0);
    put8(&b, 0);
    put(&b, palette, 768);
    static const unsigned char control[8] = {0x21, 0xF9, 4, 0, 0, 0, 0, 0};
    static const unsigned char comment[9] = {0x21, 0xFE, 5, 'h', 'e', 'l', 'l', 'o', 0};
    put(&b, control, sizeof control);
    put(&b, comment, sizeof comment);
    put8(&b, 0x2C);
    put16le(&b, 0);
    put16le(&b, 0);
    put16le(&b, (unsigned)w);
    put16le(&b, (unsigned)h);
    put8(&b, 0);
    put_gif_lzw(&b, indices, (size_t)w * h);
    *data_end = b.size;
    put8(&b, 0x3B);
    return b;
}

static void test_gif_truncated_refused(void **state)
{
    (void)state;
    const int w = 37, h = 23;
    unsigned char palette[768], indices[37 * 23], want[37 * 23 * 4];
    for (int i = 0; i < 768; i++)
        palette[i] = (unsigned char)rng_next();
    for (int i = 0; i < w * h; i++) {
        indices[i] = (unsigned char)rng_next();
        memcpy(want + 4 * i, palette + 3 * indices[i], 3);
        want[4 * i + 3] = 255;
    }
    size_t data_end;
    bytes b = make_gif(w, h, palette, indices, &data_end);
    assert_refused(b.data, data_end - 100, "cut-in-image-data.gif", "truncated");
    gf_image *img = decode_ok(b.data, b.size, "whole.gif");
    assert_pixels(img, w, h, 4, want, "GIF");
    gf_image_free(img);
    img = decode_ok(b.data, data_end, "no-trailer.gif");  /* the trailer is not needed */
    assert_pixels(img, w, h, 4, want, "GIF without its trailer");
    gf_image_free(img);
    assert_cuts_truncated(b.data, 13, data_end, "GIF");
    /* an LZW code size stb_image gives up on without a reason */
    unsigned char *odd = malloc(b.size);
    assert_non_null(odd);
    memcpy(odd, b.data, b.size);
    const size_t lzw = 13 + 768 + 8 + 9 + 10;
    assert_int_equal(odd[lzw], 8);
    odd[lzw] = 13;
    assert_refused(odd, b.size, "lzw13.gif", "code size over 12");
    free(odd);
    free(b.data);
}

/* ---- PSD */

/* PackBits of one row: runs of 2 to 128 equal bytes, literals up to 128. */
static size_t packbits(const unsigned char *row, size_t n, unsigned char *out)
{
    size_t i = 0, o = 0;
    while (i < n) {
        size_t run = 1;
        while (i + run < n && run < 128 && row[i + run] == row[i])
            run++;
        if (run >= 2) {
            out[o++] = (unsigned char)(257 - run);
            out[o++] = row[i];
            i += run;
            continue;
        }
        size_t literal = 1;
        while (i + literal < n && literal < 128 &&
               !(i + literal + 1 < n && row[i + literal] == row[i + literal + 1]))
            literal++;
        out[o++] = (unsigned char)(literal - 1);
        memcpy(out + o, row + i, literal);
        o += literal;
        i += literal;
    }
    return o;
}

/* An 8-bit RGB PSD of rgb (interleaved), raw or RLE, with an image
 * resources section of a few bytes. */
static bytes make_psd(int w, int h, const unsigned char *rgb, int rle)
{
    bytes b = {0};
    put_text(&b, "8BPS");
    put16be(&b, 1);
    for (int i = 0; i < 6; i++)
        put8(&b, 0);
    put16be(&b, 3);
    put32be(&b, (uint32_t)h);
    put32be(&b, (uint32_t)w);
    put16be(&b, 8);
    put16be(&b, 3);
    put32be(&b, 0);
    put32be(&b, 6);
    put(&b, "8BIM\0\0", 6);
    put32be(&b, 0);
    put16be(&b, rle ? 1 : 0);
    unsigned char *plane_row = malloc((size_t)w), *packed = malloc((size_t)w * 2 + 2);
    assert_non_null(plane_row);
    assert_non_null(packed);
    bytes rows = {0};
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < h; y++) {
            for (int x = 0; x < w; x++)
                plane_row[x] = rgb[((size_t)y * w + x) * 3 + c];
            if (!rle) {
                put(&b, plane_row, (size_t)w);
                continue;
            }
            const size_t n = packbits(plane_row, (size_t)w, packed);
            put16be(&b, (unsigned)n);
            put(&rows, packed, n);
        }
    put(&b, rows.data, rows.size);
    free(rows.data);
    free(plane_row);
    free(packed);
    return b;
}

static void test_psd_truncated_refused(void **state)
{
    (void)state;
    const int w = 29, h = 11;
    gf_image *img = random_image(w, h, 3);
    for (int x = 4; x < 20; x++)  /* runs for PackBits */
        memcpy(img->pixels + 3 * x, img->pixels + 9, 3);
    unsigned char want[29 * 11 * 4];
    for (int i = 0; i < w * h; i++) {
        memcpy(want + 4 * i, img->pixels + 3 * i, 3);
        want[4 * i + 3] = 255;
    }
    for (int rle = 0; rle <= 1; rle++) {
        bytes b = make_psd(w, h, img->pixels, rle);
        gf_image *back = decode_ok(b.data, b.size, rle ? "rle.psd" : "raw.psd");
        assert_pixels(back, w, h, 4, want, rle ? "RLE PSD" : "raw PSD");
        gf_image_free(back);
        assert_cuts_truncated(b.data, 26, b.size, rle ? "RLE PSD" : "raw PSD");
        free(b.data);
    }
    gf_image_free(img);
}

/* ---- headers that declare more pixels than the file could hold */

static void test_declared_size_over_data_refused(void **state)
{
    (void)state;
    alarm(HANG_LIMIT_S);
    /* 35-byte GIF: an 8192x8192 canvas, a whole 1x1 image */
    static const unsigned char gif[35] = {
        'G', 'I', 'F', '8', '9', 'a', 0, 0x20, 0, 0x20, 0x80, 0, 0, 0, 0, 0, 255, 255, 255,
        0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 0x01, 0, 0x3B};
    assert_refused(gif, sizeof gif, "canvas.gif",
                   "corrupt GIF (the header declares 8192x8192 pixels, more than 35 bytes");
    /* 40-byte PSD: 4096x4096 RGB, raw, no data */
    bytes b = {0};
    put_text(&b, "8BPS");
    put16be(&b, 1);
    put32be(&b, 0);
    put16be(&b, 0);
    put16be(&b, 3);
    put32be(&b, 4096);
    put32be(&b, 4096);
    put16be(&b, 8);
    put16be(&b, 3);
    put32be(&b, 0);
    put32be(&b, 0);
    put32be(&b, 0);
    put16be(&b, 0);
    assert_int_equal(b.size, 40);
    assert_refused(b.data, b.size, "big.psd", "corrupt PSD (the header declares 4096x4096 pixels");
    free(b.data);
    /* 53-byte HDR: 4000x4000 */
    b = (bytes){0};
    put_hdr_header(&b, 4000, 4000);
    put8(&b, 2);
    put8(&b, 2);
    assert_int_equal(b.size, 53);
    assert_refused(b.data, b.size, "big.hdr", "corrupt HDR (the header declares 4000x4000 pixels");
    free(b.data);
    /* PNG: 8000x8000 gray in a 75-byte IDAT (one stored block of 64 bytes) */
    unsigned char ihdr[13] = {0, 0, 0x1F, 0x40, 0, 0, 0x1F, 0x40, 8, 0, 0, 0, 0};
    unsigned char idat[75] = {0x78, 0x01, 0x01, 64, 0, 0xBF, 0xFF};
    put32(idat + 71, 64u << 16 | 1u);  /* adler32 of 64 zeros */
    unsigned char png[8 + 25 + 87 + 12];
    memcpy(png, "\x89PNG\r\n\x1a\n", 8);
    size_t n = 8;
    n += png_chunk(png + n, "IHDR", ihdr, sizeof ihdr);
    n += png_chunk(png + n, "IDAT", idat, sizeof idat);
    n += png_chunk(png + n, "IEND", NULL, 0);
    assert_refused(png, n, "big.png", "corrupt PNG (the header declares 8000x8000 pixels");
    /* a baseline JPEG of 64x64 that says 16384x16384 */
    gf_image *img = gradient_image(64, 64);
    unsigned char *jpeg;
    size_t size;
    encode_ok(img, GF_FORMAT_JPEG, 90, &jpeg, &size);
    unsigned char *sof = jpeg + 2;  /* the markers up to the frame header */
    while (sof + 4 < jpeg + size && sof[0] == 0xFF && sof[1] != 0xC0)
        sof += 2 + ((size_t)sof[2] << 8 | sof[3]);
    assert_true(sof + 9 < jpeg + size && sof[1] == 0xC0);
    sof[5] = sof[7] = 0x40;
    sof[6] = sof[8] = 0;
    assert_refused(jpeg, size, "big.jpg", "corrupt JPEG (the header declares 16384x16384 pixels");
    free(jpeg);
    gf_image_free(img);
    alarm(0);

    /* the test photos are far inside the bounds */
    static const char *photos[] = {"astronaut.png", "camera.png", "chelsea.png", "coffee.png",
                                   "horse.png", "hubble_deep_field.jpg", "text.png"};
    for (size_t i = 0; i < sizeof photos / sizeof photos[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/../tests/data/images/%s", GF_TEST_MASKS_DIR, photos[i]);
        gf_image_free(load_ok(path));
    }
}

/* ------------------------------------------------------------ saving */

static void test_save_missing_dir(void **state)
{
    (void)state;
    gf_image *img = random_image(5, 4, 3);
    char dir[256], path[300];
    tmp_path(dir, sizeof dir, "no-such-folder");
    snprintf(path, sizeof path, "%s/out.png", dir);
    gf_set_error("stale");
    assert_int_equal(gf_image_save(img, path, GF_FORMAT_PNG, 90), -1);
    assert_message(path);
    assert_false(path_exists(path));
    assert_false(path_exists(dir));
    assert_entries(tmpdir, 0);
    gf_image_free(img);
}

static void test_save_failure_keeps_existing(void **state)
{
    (void)state;
    gf_image *img = random_image(6, 7, 4);
    char path[320];
    size_t n1;
    unsigned char *after;

    /* 1. a format that cannot be written: the existing file stays as it was */
    tmp_path(path, sizeof path, "keep.xyz");
    const char *content = "existing content, not an image\n";
    write_bytes(path, content, strlen(content));
    gf_set_error("stale");
    assert_int_equal(gf_image_save(img, path, gf_format_from_path(path), 90), -1);
    assert_message(NULL);
    after = read_bytes(path, &n1);
    assert_int_equal(n1, strlen(content));
    assert_memory_equal(after, content, n1);
    free(after);
    assert_entries(tmpdir, 1);

    /* 2. the output path is a folder: it stays a folder, nothing is left over */
    tmp_path(path, sizeof path, "folder.png");
    assert_int_equal(mkdir(path, 0700), 0);
    gf_set_error("stale");
    assert_int_equal(gf_image_save(img, path, GF_FORMAT_PNG, 90), -1);
    assert_message(path);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_entries(path, 0);
    assert_entries(tmpdir, 2);

    /* 3. the write itself fails half way (a file-size limit binds root too):
     * -1, the existing file unchanged, no temporary file left behind */
    gf_image *big = random_image(300, 200, 3), *old = random_image(10, 10, 3);
    tmp_path(path, sizeof path, "limited.png");
    save_ok(old, path, GF_FORMAT_PNG, 90);
    size_t n0;
    unsigned char *before = read_bytes(path, &n0);
    struct rlimit saved_limit, limit;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved_limit), 0);
    limit = saved_limit;
    limit.rlim_cur = 4096;
    void (*saved_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &limit), 0);
    gf_set_error("stale");
    int rc = gf_image_save(big, path, GF_FORMAT_PNG, 90);
    setrlimit(RLIMIT_FSIZE, &saved_limit);
    signal(SIGXFSZ, saved_handler);
    assert_int_equal(rc, -1);
    assert_message(path);
    after = read_bytes(path, &n1);
    assert_int_equal(n1, n0);
    assert_memory_equal(after, before, n0);
    free(after);
    free(before);
    assert_entries(tmpdir, 3);
    /* and onto a new path: no file at all */
    tmp_path(path, sizeof path, "limited-new.bmp");
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &limit), 0);
    saved_handler = signal(SIGXFSZ, SIG_IGN);
    rc = gf_image_save(big, path, GF_FORMAT_BMP, 90);
    setrlimit(RLIMIT_FSIZE, &saved_limit);
    signal(SIGXFSZ, saved_handler);
    assert_int_equal(rc, -1);
    assert_message(path);
    assert_false(path_exists(path));
    assert_entries(tmpdir, 3);
    gf_image_free(big);
    gf_image_free(old);
    gf_image_free(img);
}

/* a folder we may not write into (not testable as root, who may) */
static void test_save_read_only_folder(void **state)
{
    (void)state;
    gf_image *old = random_image(9, 8, 3), *img = random_image(6, 7, 4);
    char ro[256], path[320];
    size_t n0, n1;
    unsigned char *before, *after;
    tmp_path(ro, sizeof ro, "read-only");
    assert_int_equal(mkdir(ro, 0700), 0);
    snprintf(path, sizeof path, "%s/existing.png", ro);
    save_ok(old, path, GF_FORMAT_PNG, 90);
    before = read_bytes(path, &n0);
    assert_int_equal(chmod(ro, 0500), 0);
    int can_write = access(ro, W_OK) == 0;
    if (!can_write) {
        gf_set_error("stale");
        assert_int_equal(gf_image_save(img, path, GF_FORMAT_PNG, 90), -1);
        assert_message(path);
        after = read_bytes(path, &n1);
        assert_int_equal(n1, n0);
        assert_memory_equal(after, before, n0);
        free(after);
        assert_entries(ro, 1);
    }
    chmod(ro, 0700);
    free(before);
    gf_image_free(old);
    gf_image_free(img);
    if (can_write) {
        print_message("running as root: a read-only folder cannot make the save fail; skipped\n");
        skip();
    }
}

static void test_save_replaces_atomically(void **state)
{
    (void)state;
    for (int iter = 0; iter < 4; iter++) {
        gf_format format = iter == 0 ? GF_FORMAT_PNG : iter == 1 ? GF_FORMAT_BMP : iter == 2 ? GF_FORMAT_TGA : GF_FORMAT_PNG;
        const char *ext = gf_format_name(format);
        char path[256], link_path[256], name[64];
        snprintf(name, sizeof name, "replace-%d.%s", iter, iter == 3 ? "PNG" : ext);
        tmp_path(path, sizeof path, name);
        tmp_path(link_path, sizeof link_path, "old-inode");
        int c = rng_int(3, 4);
        gf_image *a = random_image(rng_int(1, 80), rng_int(1, 80), c);
        gf_image *b = random_image(rng_int(1, 80), rng_int(1, 80), c);
        save_ok(a, path, format, 90);
        assert_int_equal(chmod(path, 0640), 0);
        size_t na;
        unsigned char *old_bytes = read_bytes(path, &na);
        struct stat st_old, st_new;
        assert_int_equal(stat(path, &st_old), 0);
        /* a second name for the old file: replacement by rename leaves it whole,
         * rewriting in place would change it */
        assert_int_equal(link(path, link_path), 0);

        save_ok(b, path, format, 90);
        gf_image *back = load_ok(path);
        assert_same_image(b, back, path);
        gf_image_free(back);
        assert_int_equal(stat(path, &st_new), 0);
        assert_true(st_new.st_ino != st_old.st_ino);
        assert_int_equal(st_new.st_mode & 07777, 0640); /* the file keeps its mode */
        size_t nl;
        unsigned char *link_bytes = read_bytes(link_path, &nl);
        assert_int_equal(nl, na);
        assert_memory_equal(link_bytes, old_bytes, na);
        back = load_ok(link_path);
        assert_same_image(a, back, link_path);
        gf_image_free(back);
        assert_entries(tmpdir, 2);
        unlink(link_path);
        unlink(path);
        free(old_bytes);
        free(link_bytes);
        gf_image_free(a);
        gf_image_free(b);
    }

    /* replacing the input itself: load, save onto the same path */
    char path[256];
    tmp_path(path, sizeof path, "in-place.png");
    gf_image *a = random_image(31, 17, 2);
    save_ok(a, path, GF_FORMAT_PNG, 90);
    gf_image *in = load_ok(path);
    for (size_t i = 0; i < gf_image_bytes(in); i++)
        in->pixels[i] ^= 0xff;
    save_ok(in, path, GF_FORMAT_PNG, 90);
    gf_image *back = load_ok(path);
    assert_same_image(in, back, path);
    assert_entries(tmpdir, 1);
    gf_image_free(back);
    gf_image_free(in);
    gf_image_free(a);
}

/* '-' reads standard input and writes standard output */
static void test_stdin_stdout(void **state)
{
    (void)state;
    gf_image *img = random_image(rng_int(1, 100), rng_int(1, 100), rng_int(1, 4));
    char path[256];
    tmp_path(path, sizeof path, "stdin.png");
    save_ok(img, path, GF_FORMAT_PNG, 90);

    int saved_in = dup(STDIN_FILENO);
    assert_true(saved_in >= 0);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(dup2(fd, STDIN_FILENO), STDIN_FILENO);
    close(fd);
    clearerr(stdin);
    gf_image *back = gf_image_load("-");
    const char *msg = back ? "" : gf_error();
    assert_int_equal(dup2(saved_in, STDIN_FILENO), STDIN_FILENO);
    clearerr(stdin);
    if (!back)
        print_error("gf_image_load(\"-\"): %s\n", msg);
    assert_same_image(img, back, "standard input");
    gf_image_free(back);

    /* empty standard input */
    fd = open("/dev/null", O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(dup2(fd, STDIN_FILENO), STDIN_FILENO);
    close(fd);
    clearerr(stdin);
    gf_set_error("stale");
    back = gf_image_load("-");
    assert_int_equal(dup2(saved_in, STDIN_FILENO), STDIN_FILENO);
    clearerr(stdin);
    close(saved_in);
    assert_null(back);
    assert_message(NULL);
    assert_null(strstr(gf_error(), "stale"));

    /* standard output */
    char out[256];
    tmp_path(out, sizeof out, "stdout.bin");
    fflush(stdout);
    int saved_out = dup(STDOUT_FILENO);
    assert_true(saved_out >= 0);
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(dup2(fd, STDOUT_FILENO), STDOUT_FILENO);
    close(fd);
    int rc = gf_image_save(img, "-", GF_FORMAT_TGA, 90);
    fflush(stdout);
    assert_int_equal(dup2(saved_out, STDOUT_FILENO), STDOUT_FILENO);
    close(saved_out);
    assert_int_equal(rc, 0);
    unsigned char *want;
    size_t nwant, ngot;
    encode_ok(img, GF_FORMAT_TGA, 90, &want, &nwant);
    unsigned char *got = read_bytes(out, &ngot);
    assert_int_equal(ngot, nwant);
    assert_memory_equal(got, want, nwant);
    free(got);
    free(want);
    assert_false(path_exists("-")); /* no file named "-" in the working folder */
    gf_image_free(img);
}

/* ------------------------------------------------------------ main */


/* ------------------------------------------- png_encode.c, zlib_bands.c */

#ifdef GF_HAVE_LIBDEFLATE
#include <libdeflate.h>

/* Bytes that compress in every way: random, runs, a ramp, and their mix. */
static unsigned char *deflate_test_data(size_t n, int kind)
{
    unsigned char *d = malloc(n ? n : 1);
    assert_non_null(d);
    for (size_t i = 0; i < n; i++) {
        const int k = kind == 3 ? (int)(i / 5000 % 3) : kind;
        d[i] = k == 0 ? (unsigned char)rng_next() : k == 1 ? (unsigned char)(i / 700) : (unsigned char)(i * 7 + i / 300);
    }
    return d;
}

/* The joined band streams inflate, with their Adler-32, to the data, with
 * libdeflate and with stb_image's own inflate, at every kind of block
 * (stored at level 0, fixed and dynamic Huffman) and band size. */
static void test_png_zlib_bands(void **state)
{
    (void)state;
    static const int levels[] = {0, 1, 3, 6, 9, 12};
    static const size_t sizes[] = {1, 100, 70000, 400000};
    struct libdeflate_decompressor *dec = libdeflate_alloc_decompressor();
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (int kind = 0; kind < 4; kind++) {
            const size_t n = sizes[s] + (size_t)rng_int(0, 99);
            unsigned char *data = deflate_test_data(n, kind);
            unsigned char *back = malloc(n);
            for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
                const size_t band = (size_t)rng_int(1, 3) == 1 ? (size_t)rng_int(1, 64) : (size_t)rng_int(1000, 150000);
                unsigned char *z = NULL;
                size_t zn = 0, got = 0;
                assert_int_equal(gf_png_zlib_bands(data, n, band, levels[l], rng_int(1, 4), &z, &zn), 0);
                assert_int_equal(libdeflate_zlib_decompress(dec, z, zn, back, n, &got), LIBDEFLATE_SUCCESS);
                assert_int_equal(got, n);
                assert_memory_equal(back, data, n);
                int stb_len = 0;
                char *stb = stbi_zlib_decode_malloc((const char *)z, (int)zn, &stb_len);
                assert_non_null(stb);
                assert_int_equal(stb_len, (int)n);
                assert_memory_equal(stb, data, n);
                free(stb);
                free(z);
            }
            free(back);
            free(data);
        }
    }
    libdeflate_free_decompressor(dec);
}

static void test_adler32_combine(void **state)
{
    (void)state;
    unsigned char *d = deflate_test_data(300000, 0);
    for (int t = 0; t < 50; t++) {
        const size_t cut = (size_t)rng_int(0, 300000);
        const uint32_t a = libdeflate_adler32(1, d, cut), b = libdeflate_adler32(1, d + cut, 300000 - cut);
        assert_int_equal(gf_adler32_combine(a, b, 300000 - cut), libdeflate_adler32(1, d, 300000));
    }
    free(d);
}

/* gf_png_encode's files (one band, and many bands on threads above 1 Mpx)
 * decode to the pixels with stb_image, and gf_png_decode gives stb's bytes. */
static void test_png_codec_roundtrip(void **state)
{
    (void)state;
    const int sizes[][2] = {{1, 1}, {3, 200}, {257, 31}, {1500, 900}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int c = 1; c <= 4; c++) {
            const int w = sizes[i][0], h = sizes[i][1];
            gf_image *img = random_image(w, h, c);
            for (int y = 0; y < h / 2; y++)  /* half smooth, for every row filter */
                for (int x = 0; x < w * c; x++)
                    img->pixels[(size_t)y * (size_t)(w * c) + (size_t)x] = (unsigned char)(x / 3 + y);
            unsigned char *png = NULL;
            size_t n = 0;
            assert_int_equal(gf_png_encode(img->pixels, w, h, c, 8, rng_int(0, 12), &png, &n), GF_PNG_DONE);
            int sw, sh, sc;
            unsigned char *stb = stbi_load_from_memory(png, (int)n, &sw, &sh, &sc, 0);
            assert_non_null(stb);
            assert_int_equal(sw, w);
            assert_int_equal(sh, h);
            assert_int_equal(sc, c);
            assert_memory_equal(stb, img->pixels, gf_image_bytes(img));
            unsigned char *ours = NULL;
            int ow, oh, oc, od;
            const char *corrupt;
            assert_int_equal(gf_png_decode(png, n, "t", &ours, &ow, &oh, &oc, &od, &corrupt), GF_PNG_DONE);
            assert_int_equal(oc, c);
            assert_int_equal(od, 8);
            assert_memory_equal(ours, stb, gf_image_bytes(img));
            free(ours);
            stbi_image_free(stb);
            free(png);
            gf_image_free(img);
        }
    }
}
#endif

/* gf_png_encode at 16 bits (with libdeflate or stb's compressor) makes
 * files that stbi_load_16 decodes to the samples, and so does
 * gf_png_decode where it decodes (libdeflate); half smooth rows for every
 * filter, random ones with both bytes of a sample busy. */
static void test_png_codec_16bit(void **state)
{
    (void)state;
    const int sizes[][2] = {{1, 1}, {3, 200}, {257, 31}, {700, 500}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int c = 1; c <= 4; c++) {
            const int w = sizes[i][0], h = sizes[i][1];
            gf_image *img = gf_image_new_depth(w, h, c, 16);
            assert_non_null(img);
            assert_int_equal(gf_image_bytes(img), (size_t)w * (size_t)h * (size_t)c * 2);
            uint16_t *p = (uint16_t *)(void *)img->pixels;
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w * c; x++)
                    p[(size_t)y * (size_t)(w * c) + (size_t)x] =
                        y < h / 2 ? (uint16_t)(x * 97 + y * 3) : (uint16_t)rng_next();
            unsigned char *png = NULL;
            size_t n = 0;
            assert_int_equal(gf_png_encode(img->pixels, w, h, c, 16, rng_int(0, 9), &png, &n), GF_PNG_DONE);
            assert_int_equal(png[24], 16);  /* IHDR's depth */
            int sw, sh, sc;
            stbi_us *stb = stbi_load_16_from_memory(png, (int)n, &sw, &sh, &sc, 0);
            assert_non_null(stb);
            assert_int_equal(sw, w);
            assert_int_equal(sh, h);
            assert_int_equal(sc, c);
            assert_memory_equal(stb, img->pixels, gf_image_bytes(img));
            unsigned char *ours = NULL;
            int ow, oh, oc, od;
            const char *corrupt;
            const int r = gf_png_decode(png, n, "t", &ours, &ow, &oh, &oc, &od, &corrupt);
#ifdef GF_HAVE_LIBDEFLATE
            assert_int_equal(r, GF_PNG_DONE);
            assert_int_equal(oc, c);
            assert_int_equal(od, 16);
            assert_memory_equal(ours, img->pixels, gf_image_bytes(img));
#else
            assert_int_equal(r, GF_PNG_NOT_HANDLED);
#endif
            /* the whole decode: depth 16 from the probe on */
            gf_image *back = gf_image_load_memory(png, n, "t");
            assert_non_null(back);
            assert_int_equal(back->depth, 16);
            assert_int_equal(back->channels, c);
            assert_memory_equal(back->pixels, img->pixels, gf_image_bytes(img));
            gf_image_free(back);
            free(ours);
            stbi_image_free(stb);
            free(png);
            gf_image_free(img);
        }
    }
}

/* --depth's conversions on every value: down round(v / 257), up v * 257,
 * down after up gives the value back. */
static void test_convert_depth(void **state)
{
    (void)state;
    gf_image *img = gf_image_new_depth(256, 256, 1, 16);
    assert_non_null(img);
    uint16_t *p = (uint16_t *)(void *)img->pixels;
    for (unsigned v = 0; v < 65536; v++)
        p[v] = (uint16_t)v;
    assert_int_equal(gf_image_convert_depth(img, 8), 0);
    assert_int_equal(img->depth, 8);
    assert_int_equal(gf_image_bytes(img), 65536);
    for (unsigned v = 0; v < 65536; v++) {
        const double exact = v / 257.0;
        assert_true(fabs(img->pixels[v] - exact) < 0.5);  /* round to nearest, no ties */
    }
    for (unsigned v = 0; v < 256; v++)
        img->pixels[v] = (unsigned char)v;
    assert_int_equal(gf_image_convert_depth(img, 16), 0);
    assert_int_equal(img->depth, 16);
    p = (uint16_t *)(void *)img->pixels;
    for (unsigned v = 0; v < 256; v++)
        assert_int_equal(p[v], v * 257);
    assert_int_equal(gf_image_convert_depth(img, 8), 0);
    for (unsigned v = 0; v < 256; v++)
        assert_int_equal(img->pixels[v], v);
    gf_image_free(img);
}

/* A PNM of maxval over 255 decodes at 16 bits, round(v * 65535 / maxval). */
static void test_pnm_16bit(void **state)
{
    (void)state;
    const unsigned maxvals[] = {256, 1000, 65535};
    for (size_t k = 0; k < sizeof maxvals / sizeof maxvals[0]; k++) {
        const unsigned maxval = maxvals[k];
        char header[64];
        const int hn = snprintf(header, sizeof header, "P6\n5 4\n%u\n", maxval);
        unsigned char data[64 + 5 * 4 * 3 * 2];
        memcpy(data, header, (size_t)hn);
        unsigned v[60];
        for (int i = 0; i < 60; i++) {
            v[i] = i == 0 ? maxval : (unsigned)rng_int(0, (int)maxval);
            data[hn + 2 * i] = (unsigned char)(v[i] >> 8);
            data[hn + 2 * i + 1] = (unsigned char)v[i];
        }
        gf_image *img = gf_image_load_memory(data, (size_t)hn + 120, "t.ppm");
        assert_non_null(img);
        assert_int_equal(img->depth, 16);
        assert_int_equal(img->channels, 3);
        const uint16_t *p = gf_image_samples16(img);
        for (int i = 0; i < 60; i++)
            assert_true(fabs(p[i] - v[i] * 65535.0 / maxval) <= 0.5);
        assert_int_equal(p[0], 65535);
        gf_image_free(img);
    }
}

int main(void)
{
    rng_seed("test_image");

    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_new_and_bytes, clean_tmpdir),
        cmocka_unit_test_teardown(test_mul_size, clean_tmpdir),
        cmocka_unit_test_teardown(test_png_roundtrip, clean_tmpdir),
#ifdef GF_HAVE_LIBDEFLATE
        cmocka_unit_test_teardown(test_png_zlib_bands, clean_tmpdir),
        cmocka_unit_test_teardown(test_jpeg_join_refuses_unlike_strips, clean_tmpdir),
        cmocka_unit_test(test_jpeg_sound_agrees_with_the_decoder),
        cmocka_unit_test_teardown(test_adler32_combine, clean_tmpdir),
        cmocka_unit_test_teardown(test_png_codec_roundtrip, clean_tmpdir),
#endif
        cmocka_unit_test_teardown(test_png_codec_16bit, clean_tmpdir),
        cmocka_unit_test_teardown(test_convert_depth, clean_tmpdir),
        cmocka_unit_test_teardown(test_pnm_16bit, clean_tmpdir),
        cmocka_unit_test_teardown(test_bmp_roundtrip, clean_tmpdir),
        cmocka_unit_test_teardown(test_tga_roundtrip, clean_tmpdir),
        cmocka_unit_test_teardown(test_jpeg, clean_tmpdir),
        cmocka_unit_test_teardown(test_explicit_format_wins, clean_tmpdir),
        cmocka_unit_test_teardown(test_encode_without_format, clean_tmpdir),
        cmocka_unit_test_teardown(test_handmade_png, clean_tmpdir),
        cmocka_unit_test_teardown(test_format_names, clean_tmpdir),
        cmocka_unit_test_teardown(test_load_errors, clean_tmpdir),
        cmocka_unit_test_teardown(test_pnm_truncated_or_malformed_refused, clean_tmpdir),
        cmocka_unit_test_teardown(test_pnm_scaled_by_maxval, clean_tmpdir),
        cmocka_unit_test_teardown(test_pnm_sample_over_maxval_refused, clean_tmpdir),
        cmocka_unit_test_teardown(test_tga_rle_truncated_refused, clean_tmpdir),
        cmocka_unit_test_teardown(test_bmp_os2_truncated_refused, clean_tmpdir),
        cmocka_unit_test_teardown(test_bmp_index_past_palette_refused, clean_tmpdir),
        cmocka_unit_test_teardown(test_hdr_rle_count_zero_refused, clean_tmpdir),
        cmocka_unit_test_teardown(test_hdr_truncated_refused, clean_tmpdir),
        cmocka_unit_test_teardown(test_gif_truncated_refused, clean_tmpdir),
        cmocka_unit_test_teardown(test_psd_truncated_refused, clean_tmpdir),
        cmocka_unit_test_teardown(test_declared_size_over_data_refused, clean_tmpdir),
        cmocka_unit_test_teardown(test_save_missing_dir, clean_tmpdir),
        cmocka_unit_test_teardown(test_save_failure_keeps_existing, clean_tmpdir),
        cmocka_unit_test_teardown(test_save_read_only_folder, clean_tmpdir),
        cmocka_unit_test_teardown(test_save_replaces_atomically, clean_tmpdir),
        cmocka_unit_test_teardown(test_stdin_stdout, clean_tmpdir),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
