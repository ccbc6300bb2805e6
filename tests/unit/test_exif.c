/* test_exif.c - cmocka unit tests for the EXIF Orientation parser
 * (src/exif.c), the pixel turn (src/orientation.c) and their use by the
 * decoder (src/image.c).
 *
 * The turn's oracle is written independently of orientation.c's placement
 * table: a transpose for 5..8, then a left-right flip for 2, 3, 6, 7, then
 * a top-bottom flip for 3, 4, 7, 8 (the EXIF definitions composed). Every
 * parsed segment sits in a buffer of exactly its size, so that a read past
 * it is a finding under the sanitizer build (make test SANITIZE=1). Fresh
 * random pixels and bytes each run; replay with GF_TEST_SEED=N. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exif.h"
#include "image.h"
#include "orientation.h"
#include "util.h"

#include "test_rng.h"

/* ---------------------------------------------------------------- building segments */

enum { SHORT = 3, LONG = 4, ASCII = 2 };

typedef struct {
    uint16_t tag, type;
    uint32_t count, value;
} ifd_entry;

static void put16(unsigned char *p, uint32_t v, int big)
{
    p[big ? 0 : 1] = (unsigned char)(v >> 8);
    p[big ? 1 : 0] = (unsigned char)v;
}

static void put32(unsigned char *p, uint32_t v, int big)
{
    for (int i = 0; i < 4; i++)
        p[big ? 3 - i : i] = (unsigned char)(v >> (8 * i));
}

/* A TIFF structure: header, IFD0 at offset 8 with these entries, no next
 * IFD. A SHORT's value sits in the first two bytes of its field. Returns
 * its size; out holds at least 14 + 12 * count bytes. */
static size_t make_tiff(unsigned char *out, int big, const ifd_entry *entries, int count)
{
    memcpy(out, big ? "MM" : "II", 2);
    put16(out + 2, 42, big);
    put32(out + 4, 8, big);
    put16(out + 8, (uint32_t)count, big);
    unsigned char *e = out + 10;
    for (int i = 0; i < count; i++, e += 12) {
        put16(e, entries[i].tag, big);
        put16(e + 2, entries[i].type, big);
        put32(e + 4, entries[i].count, big);
        memset(e + 8, 0, 4);
        if (entries[i].type == SHORT)
            put16(e + 8, entries[i].value, big);
        else
            put32(e + 8, entries[i].value, big);
    }
    put32(e, 0, big);
    return (size_t)(e + 4 - out);
}

/* A TIFF holding only an Orientation SHORT of value v. */
static size_t orientation_tiff(unsigned char *out, int big, uint32_t v)
{
    const ifd_entry e = {0x0112, SHORT, 1, v};
    return make_tiff(out, big, &e, 1);
}

/* An APP1 Exif segment (marker, length, "Exif\0\0", tiff) at out. */
static size_t exif_app1(unsigned char *out, const unsigned char *tiff, size_t tiff_size)
{
    out[0] = 0xFF;
    out[1] = 0xE1;
    put16(out + 2, (uint32_t)(2 + 6 + tiff_size), 1);
    memcpy(out + 4, "Exif\0\0", 6);
    memcpy(out + 10, tiff, tiff_size);
    return 10 + tiff_size;
}

/* The orientation of bytes copied into a heap buffer of exactly their size. */
static int parse_exact(const unsigned char *bytes, size_t size, int as_tiff)
{
    unsigned char *copy = malloc(size ? size : 1);
    assert_non_null(copy);
    memcpy(copy, bytes, size);
    const int o = as_tiff ? gf_exif_tiff_orientation(copy, size)
                          : gf_jpeg_exif_orientation(copy, size);
    free(copy);
    assert_true(o >= 1 && o <= 8);
    return o;
}

/* SOI, the APP1 segment holding tiff, a DQT-like segment, EOI. */
static size_t jpeg_with_exif(unsigned char *out, const unsigned char *tiff, size_t tiff_size)
{
    size_t n = 0;
    out[n++] = 0xFF;
    out[n++] = 0xD8;
    n += exif_app1(out + n, tiff, tiff_size);
    static const unsigned char tail[] = {0xFF, 0xDB, 0x00, 0x04, 0x00, 0x01, 0xFF, 0xD9};
    memcpy(out + n, tail, sizeof tail);
    return n + sizeof tail;
}

/* ---------------------------------------------------------------- the parser */

static void test_every_value_both_byte_orders(void **state)
{
    (void)state;
    unsigned char tiff[64], jpeg[128];
    for (int big = 0; big <= 1; big++)
        for (uint32_t v = 1; v <= 8; v++) {
            const size_t t = orientation_tiff(tiff, big, v);
            assert_int_equal(parse_exact(tiff, t, 1), (int)v);
            assert_int_equal(parse_exact(jpeg, jpeg_with_exif(jpeg, tiff, t), 0), (int)v);
        }
}

static void test_tag_among_others_and_as_long(void **state)
{
    (void)state;
    unsigned char tiff[128];
    for (int big = 0; big <= 1; big++) {
        const ifd_entry entries[] = {
            {0x010F, ASCII, 6, 0x40}, {0x0110, ASCII, 3, 0x61626300},
            {0x0112, LONG, 1, 6}, {0x011A, 5, 1, 0x50},
        };
        assert_int_equal(parse_exact(tiff, make_tiff(tiff, big, entries, 4), 1), 6);
        const ifd_entry later[] = {{0x0100, SHORT, 1, 4000}, {0x0112, SHORT, 1, 8}};
        assert_int_equal(parse_exact(tiff, make_tiff(tiff, big, later, 2), 1), 8);
        const ifd_entry absent[] = {{0x0100, SHORT, 1, 6}, {0x0101, SHORT, 1, 3}};
        assert_int_equal(parse_exact(tiff, make_tiff(tiff, big, absent, 2), 1), 1);
    }
}

/* Other segments first: APP0, an XMP APP1, fill bytes, 0xFF bytes before
 * SOI; and an Exif segment after the first scan, which does not count. */
static void test_segment_found_among_others(void **state)
{
    (void)state;
    unsigned char tiff[64], jpeg[256];
    const size_t t = orientation_tiff(tiff, 1, 5);
    size_t n = 0;
    jpeg[n++] = 0xFF;  /* a run of 0xFF before SOI */
    jpeg[n++] = 0xFF;
    jpeg[n++] = 0xD8;
    static const unsigned char app0[] = {0xFF, 0xE0, 0x00, 0x07, 'J', 'F', 'I', 'F', 0};
    memcpy(jpeg + n, app0, sizeof app0);
    n += sizeof app0;
    static const unsigned char xmp[] = {0xFF, 0xE1, 0x00, 0x0A, 'h', 't', 't', 'p', ':', '/', '/', 0};
    memcpy(jpeg + n, xmp, sizeof xmp);
    n += sizeof xmp;
    jpeg[n++] = 0xFF;  /* a fill byte */
    n += exif_app1(jpeg + n, tiff, t);
    assert_int_equal(parse_exact(jpeg, n, 0), 5);

    static const unsigned char sos[] = {0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02};
    memcpy(jpeg, sos, sizeof sos);
    n = sizeof sos + exif_app1(jpeg + sizeof sos, tiff, t);
    assert_int_equal(parse_exact(jpeg, n, 0), 1);
}

/* A TIFF cut anywhere: the tag reads only once its value's two bytes are
 * inside (offset 10 + 8 + 2 = 20); shorter, it is absent. The segment's
 * length says the cut; the file may also end inside a segment that says
 * more, which is then not read at all. */
static void test_cut_anywhere(void **state)
{
    (void)state;
    unsigned char tiff[64], jpeg[128];
    for (int big = 0; big <= 1; big++) {
        const size_t t = orientation_tiff(tiff, big, 7);
        for (size_t cut = 0; cut <= t; cut++) {
            const int want = cut >= 20 ? 7 : 1;
            assert_int_equal(parse_exact(tiff, cut, 1), want);
            assert_int_equal(parse_exact(jpeg, jpeg_with_exif(jpeg, tiff, cut), 0), want);
        }
        const size_t whole = jpeg_with_exif(jpeg, tiff, t);
        for (size_t cut = 0; cut < 2 + 10 + t; cut++)
            assert_int_equal(parse_exact(jpeg, cut, 0), 1);
        assert_int_equal(parse_exact(jpeg, whole, 0), 7);
    }
}

static void test_malformed_reads_as_stored(void **state)
{
    (void)state;
    unsigned char tiff[64], jpeg[128];
    for (int big = 0; big <= 1; big++) {
        const uint32_t values[] = {0, 9, 0xFFFF};
        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
            assert_int_equal(parse_exact(tiff, orientation_tiff(tiff, big, values[i]), 1), 1);
        const ifd_entry wrong_type = {0x0112, ASCII, 1, 6}, two = {0x0112, SHORT, 2, 6};
        assert_int_equal(parse_exact(tiff, make_tiff(tiff, big, &wrong_type, 1), 1), 1);
        assert_int_equal(parse_exact(tiff, make_tiff(tiff, big, &two, 1), 1), 1);

        size_t t = orientation_tiff(tiff, big, 6);
        put16(tiff + 2, 43, big);  /* not TIFF's magic */
        assert_int_equal(parse_exact(tiff, t, 1), 1);
        const uint32_t offsets[] = {(uint32_t)t - 1, (uint32_t)t, 0xFFFFFFF0u, 0xFFFFFFFFu};
        for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
            t = orientation_tiff(tiff, big, 6);
            put32(tiff + 4, offsets[i], big);  /* IFD0 past the end */
            assert_int_equal(parse_exact(tiff, t, 1), 1);
        }
        t = orientation_tiff(tiff, big, 6);
        put16(tiff + 10, 0x0100, big);  /* the first entry is another tag ... */
        put16(tiff + 8, 0xFFFF, big);   /* ... and the count runs far past the end */
        assert_int_equal(parse_exact(tiff, t, 1), 1);
    }
    memcpy(tiff, "IM*\0\x08\0\0\0", 8);
    assert_int_equal(parse_exact(tiff, 8, 1), 1);
    /* segment lengths under 2 and past the file; no SOI; nothing at all */
    const size_t t = orientation_tiff(tiff, 0, 6);
    size_t n = jpeg_with_exif(jpeg, tiff, t);
    for (uint32_t length = 0; length < 2; length++) {
        put16(jpeg + 4, length, 1);
        assert_int_equal(parse_exact(jpeg, n, 0), 1);
    }
    put16(jpeg + 4, (uint32_t)n, 1);
    assert_int_equal(parse_exact(jpeg, n, 0), 1);
    n = jpeg_with_exif(jpeg, tiff, t);
    jpeg[1] = 0xD9;
    assert_int_equal(parse_exact(jpeg, n, 0), 1);
    assert_int_equal(parse_exact(jpeg, 0, 0), 1);
    assert_int_equal(parse_exact(jpeg, 0, 1), 1);
}

/* Random bytes, and random damage to a sound segment: always 1..8, and
 * (under the sanitizer) no read outside the buffer. */
static void test_random_bytes(void **state)
{
    (void)state;
    unsigned char buf[160], tiff[64];
    for (int round = 0; round < 20000; round++) {
        const size_t n = (size_t)rng_int(0, (int)sizeof buf);
        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)rng_next();
        parse_exact(buf, n, round & 1);
        const size_t t = orientation_tiff(tiff, round & 1, (uint32_t)rng_int(1, 8));
        size_t m = jpeg_with_exif(buf, tiff, t);
        for (int k = rng_int(1, 4); k > 0; k--)
            buf[rng_int(0, (int)m - 1)] = (unsigned char)rng_next();
        m = (size_t)rng_int(0, (int)m);
        parse_exact(buf, m, 0);
    }
}

/* ---------------------------------------------------------------- the turn */

static gf_image *random_image(int w, int h, int c)
{
    gf_image *img = gf_image_new(w, h, c);
    assert_non_null(img);
    for (size_t i = 0; i < gf_image_bytes(img); i++)
        img->pixels[i] = (unsigned char)rng_next();
    return img;
}

static gf_image *copy_image(const gf_image *img)
{
    gf_image *copy = gf_image_new(img->width, img->height, img->channels);
    assert_non_null(copy);
    memcpy(copy->pixels, img->pixels, gf_image_bytes(img));
    return copy;
}

static void transpose(gf_image **img)
{
    const gf_image *src = *img;
    const size_t c = (size_t)src->channels;
    gf_image *dst = gf_image_new(src->height, src->width, src->channels);
    assert_non_null(dst);
    for (int y = 0; y < dst->height; y++)
        for (int x = 0; x < dst->width; x++)
            memcpy(dst->pixels + ((size_t)y * dst->width + x) * c,
                   src->pixels + ((size_t)x * src->width + y) * c, c);
    gf_image_free(*img);
    *img = dst;
}

static void flip(gf_image *img, int left_right)
{
    const size_t c = (size_t)img->channels;
    gf_image *src = copy_image(img);
    for (int y = 0; y < img->height; y++)
        for (int x = 0; x < img->width; x++) {
            const int sx = left_right ? img->width - 1 - x : x;
            const int sy = left_right ? y : img->height - 1 - y;
            memcpy(img->pixels + ((size_t)y * img->width + x) * c,
                   src->pixels + ((size_t)sy * img->width + sx) * c, c);
        }
    gf_image_free(src);
}

/* The oracle: the EXIF orientation as a transpose and two flips. */
static gf_image *turned_by_oracle(const gf_image *img, int o)
{
    gf_image *out = copy_image(img);
    if (o >= 5)
        transpose(&out);
    if (o == 2 || o == 3 || o == 6 || o == 7)
        flip(out, 1);
    if (o == 3 || o == 4 || o == 7 || o == 8)
        flip(out, 0);
    return out;
}

static void assert_same_image(const gf_image *got, const gf_image *want, int o)
{
    if (got->width != want->width || got->height != want->height ||
        got->channels != want->channels ||
        memcmp(got->pixels, want->pixels, gf_image_bytes(want)) != 0) {
        print_error("orientation %d: got %dx%dx%d, want %dx%dx%d%s\n", o, got->width,
                    got->height, got->channels, want->width, want->height, want->channels,
                    got->width == want->width ? " (pixels differ)" : "");
        fail();
    }
}

/* Every orientation and channel count, on sizes that cross the 64-pixel
 * tiles and on 1xN, Nx1 and 1x1. */
static void test_turn_matches_the_oracle(void **state)
{
    (void)state;
    const int sizes[][2] = {{1, 1}, {1, 9}, {9, 1}, {2, 3}, {64, 64}, {67, 131}, {130, 65},
                            {rng_int(1, 200), rng_int(1, 200)}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int c = 1; c <= 4; c++)
            for (int o = 1; o <= 8; o++) {
                gf_image *img = random_image(sizes[s][0], sizes[s][1], c);
                gf_image *want = turned_by_oracle(img, o);
                assert_int_equal(gf_image_orient(img, o), 0);
                assert_same_image(img, want, o);
                gf_image_free(img);
                gf_image_free(want);
            }
}

static void test_turn_leaves_other_values(void **state)
{
    (void)state;
    const int values[] = {0, -1, 9, 255};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        gf_image *img = random_image(5, 3, 3);
        gf_image *want = copy_image(img);
        assert_int_equal(gf_image_orient(img, values[i]), 0);
        assert_same_image(img, want, values[i]);
        gf_image_free(img);
        gf_image_free(want);
    }
    assert_true(gf_orientation_swaps_axes(6) && !gf_orientation_swaps_axes(4));
    assert_string_equal(gf_orientation_describe(8), "rotate 90 counter-clockwise");
}

/* ---------------------------------------------------------------- the decoder */

/* A JPEG of img with an Exif segment of orientation o right after SOI. */
static unsigned char *oriented_jpeg(const gf_image *img, int o, int big, size_t *size)
{
    unsigned char *plain;
    size_t plain_size;
    assert_int_equal(gf_image_encode(img, GF_FORMAT_JPEG, 95, &plain, &plain_size), 0);
    unsigned char tiff[64], app1[96];
    const size_t a = exif_app1(app1, tiff, orientation_tiff(tiff, big, (uint32_t)o));
    unsigned char *jpeg = malloc(plain_size + a);
    assert_non_null(jpeg);
    memcpy(jpeg, plain, 2);
    memcpy(jpeg + 2, app1, a);
    memcpy(jpeg + 2 + a, plain + 2, plain_size - 2);
    free(plain);
    *size = plain_size + a;
    return jpeg;
}

/* The probe names the turned size; the decode gives the stored pixels
 * turned (the same decoder both ways: exact); --no-autorotate's setting
 * gives them as stored. */
static void test_decoder_turns_jpegs(void **state)
{
    (void)state;
    for (int c = 1; c <= 3; c += 2)
        for (int o = 1; o <= 8; o++) {
            gf_image *img = random_image(37, 20, c);
            size_t size;
            unsigned char *jpeg = oriented_jpeg(img, o, o & 1, &size);
            gf_image_set_autorotate(0);
            gf_image_probe probe;
            assert_int_equal(gf_image_probe_memory(jpeg, size, "stored.jpg", &probe), 0);
            assert_int_equal(probe.orientation, 1);
            assert_int_equal(probe.width, 37);
            gf_image *stored = gf_image_load_memory(jpeg, size, "stored.jpg");
            gf_image_set_autorotate(1);
            assert_non_null(stored);
            assert_int_equal(stored->width, 37);
            assert_int_equal(gf_image_probe_memory(jpeg, size, "turned.jpg", &probe), 0);
            assert_int_equal(probe.orientation, o);
            assert_int_equal(probe.width, o >= 5 ? 20 : 37);
            assert_int_equal(probe.height, o >= 5 ? 37 : 20);
            gf_image *turned = gf_image_load_memory(jpeg, size, "turned.jpg");
            assert_non_null(turned);
            gf_image *want = turned_by_oracle(stored, o);
            assert_same_image(turned, want, o);
            gf_image_free(want);
            gf_image_free(turned);
            gf_image_free(stored);
            gf_image_free(img);
            free(jpeg);
        }
}

/* The pixel limit reads the turned size in its message. */
static void test_pixel_limit_names_the_turned_size(void **state)
{
    (void)state;
    gf_image *img = random_image(30, 10, 3);
    size_t size;
    unsigned char *jpeg = oriented_jpeg(img, 6, 0, &size);
    gf_image_set_max_pixels(299);
    assert_null(gf_image_load_memory(jpeg, size, "big.jpg"));
    gf_image_set_max_pixels(GF_DEFAULT_MAX_PIXELS);
    assert_non_null(strstr(gf_error(), "big.jpg: 10x30 is 300 pixels"));
    gf_image_free(img);
    free(jpeg);
}

int main(void)
{
    rng_seed("test_exif");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_value_both_byte_orders),
        cmocka_unit_test(test_tag_among_others_and_as_long),
        cmocka_unit_test(test_segment_found_among_others),
        cmocka_unit_test(test_cut_anywhere),
        cmocka_unit_test(test_malformed_reads_as_stored),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_turn_matches_the_oracle),
        cmocka_unit_test(test_turn_leaves_other_values),
        cmocka_unit_test(test_decoder_turns_jpegs),
        cmocka_unit_test(test_pixel_limit_names_the_turned_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
