/* test_image.c - cmocka unit tests for image I/O (src/image.c) and the size
 * arithmetic in src/util.c.
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "image.h"
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
    /* the file holds exactly what gf_image_encode produces */
    assert_int_equal(fsize, size);
    assert_memory_equal(fdata, data, size);
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

        /* 16 bits: reduced to 8; exact for v = k * 257, within 1 otherwise */
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
        for (size_t i = 0; i < samples; i++) {
            int want = v[i] >> 8, got = back->pixels[i];
            if (v[i] % 257 == 0)
                want = v[i] / 257;
            if (v[i] % 257 == 0 ? got != want : abs(got - want) > 1) {
                print_error("16-bit sample %zu = %u decoded to %d\n", i, v[i], got);
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

int main(void)
{
    rng_seed("test_image");

    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_new_and_bytes, clean_tmpdir),
        cmocka_unit_test_teardown(test_mul_size, clean_tmpdir),
        cmocka_unit_test_teardown(test_png_roundtrip, clean_tmpdir),
        cmocka_unit_test_teardown(test_bmp_roundtrip, clean_tmpdir),
        cmocka_unit_test_teardown(test_tga_roundtrip, clean_tmpdir),
        cmocka_unit_test_teardown(test_jpeg, clean_tmpdir),
        cmocka_unit_test_teardown(test_explicit_format_wins, clean_tmpdir),
        cmocka_unit_test_teardown(test_encode_without_format, clean_tmpdir),
        cmocka_unit_test_teardown(test_handmade_png, clean_tmpdir),
        cmocka_unit_test_teardown(test_format_names, clean_tmpdir),
        cmocka_unit_test_teardown(test_load_errors, clean_tmpdir),
        cmocka_unit_test_teardown(test_save_missing_dir, clean_tmpdir),
        cmocka_unit_test_teardown(test_save_failure_keeps_existing, clean_tmpdir),
        cmocka_unit_test_teardown(test_save_read_only_folder, clean_tmpdir),
        cmocka_unit_test_teardown(test_save_replaces_atomically, clean_tmpdir),
        cmocka_unit_test_teardown(test_stdin_stdout, clean_tmpdir),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
