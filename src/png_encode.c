/* png_encode.c - PNG on libdeflate: the rows filtered as stb_image_write
 * filters them and deflated in bands on threads (zlib_bands.h), joined
 * into one zlib stream. A 16-bit image is filtered as its big-endian
 * bytes, each pixel 2 * channels bytes wide; without libdeflate it is
 * deflated in one piece by stb_image_write's compressor. */
#include "png_codec.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "image.h"
#include "util.h"
#include "zlib_bands.h"

/* ==== filters ================================================================ */

/* One row filtered with type f into out (the first bpp bytes see zeros on
 * their left); returns stb_image_write's estimate, the sum of the bytes'
 * magnitudes as signed chars. One plain loop per filter, for the
 * vectorizer. */
static unsigned filter_row(int f, const unsigned char *row, const unsigned char *prior,
                           size_t n, size_t bpp, unsigned char *out)
{
    size_t i;
    switch (f) {
    case 0:
        memcpy(out, row, n);
        break;
    case 1:
        memcpy(out, row, bpp);
        for (i = bpp; i < n; i++)
            out[i] = (unsigned char)(row[i] - row[i - bpp]);
        break;
    case 2:
        for (i = 0; i < n; i++)
            out[i] = (unsigned char)(row[i] - prior[i]);
        break;
    case 3:
        for (i = 0; i < bpp; i++)
            out[i] = (unsigned char)(row[i] - (prior[i] >> 1));
        for (i = bpp; i < n; i++)
            out[i] = (unsigned char)(row[i] - ((row[i - bpp] + prior[i]) >> 1));
        break;
    default:
        for (i = 0; i < bpp; i++)
            out[i] = (unsigned char)(row[i] - prior[i]);
        for (i = bpp; i < n; i++)
            out[i] = (unsigned char)(row[i] - gf_png_paeth(row[i - bpp], prior[i], prior[i - bpp]));
        break;
    }
    unsigned est = 0;
    for (i = 0; i < n; i++)
        est += (unsigned)abs((signed char)out[i]);
    return est;
}


/* A band's rows with stb_image_write's choice: of the five filters in
 * order, the first with the smallest estimate; the first row's prior is
 * zeros (stb's first-row variants are the same bytes). */
static int filter_rows(const gf_band_rows *r, unsigned char *out)
{
    const size_t n = (size_t)r->width * (size_t)r->channels, bpp = (size_t)r->channels;
    unsigned char *scratch = malloc(3 * n);  /* best, trial, zeros */
    if (!scratch)
        return -1;
    unsigned char *zeros = scratch + 2 * n;
    memset(zeros, 0, n);
    for (uint32_t j = 0; j < r->rows; j++) {
        const size_t y = (size_t)r->y0 + j;
        const unsigned char *row = r->pixels + y * n;
        const unsigned char *prior = y ? row - n : zeros;
        unsigned char *best = scratch, *trial = scratch + n;
        unsigned best_est = filter_row(0, row, prior, n, bpp, best);
        int best_f = 0;
        for (int f = 1; f < 5; f++) {
            const unsigned est = filter_row(f, row, prior, n, bpp, trial);
            if (est < best_est) {
                unsigned char *t = best;
                best = trial, trial = t, best_est = est, best_f = f;
            }
        }
        unsigned char *dest = out + (size_t)j * (n + 1);
        dest[0] = (unsigned char)best_f;
        memcpy(dest + 1, best, n);
    }
    free(scratch);
    return 0;
}

/* The samples of a 16-bit image as the file stores them: big-endian. */
static unsigned char *big_endian_copy(const unsigned char *pixels, size_t samples)
{
    unsigned char *be = gf_malloc_large(samples * 2);
    if (!be) {
        gf_set_error("out of memory for the PNG data");
        return NULL;
    }
    const uint16_t *in = (const uint16_t *)(const void *)pixels;
    for (size_t i = 0; i < samples; i++) {
        be[2 * i] = (unsigned char)(in[i] >> 8);
        be[2 * i + 1] = (unsigned char)in[i];
    }
    return be;
}

static void make_ihdr(unsigned char ihdr[13], int width, int height, int channels, int depth)
{
    static const unsigned char color_type[5] = {0, 0, 4, 2, 6};
    memset(ihdr, 0, 13);
    gf_put_be32(ihdr, (uint32_t)width);
    gf_put_be32(ihdr + 4, (uint32_t)height);
    ihdr[8] = (unsigned char)depth;
    ihdr[9] = color_type[channels];
}

/* One whole chunk at o: length, type, data, CRC; the end. */
static unsigned char *put_chunk(unsigned char *o, const char *type, const unsigned char *data,
                                size_t length)
{
    gf_put_be32(o, (uint32_t)length);
    memcpy(o + 4, type, 4);
    if (length)
        memcpy(o + 8, data, length);
    gf_put_be32(o + 8 + length, gf_png_crc32(o + 4, 4 + length));
    return o + 12 + length;
}

#ifndef GF_HAVE_LIBDEFLATE

/* 8-bit images are stb_image_write's; a 16-bit one is filtered here and
 * deflated whole, in one IDAT chunk, as stb_image_write does. */
int gf_png_encode(const unsigned char *pixels, int width, int height, int channels, int depth,
                  int level, unsigned char **out, size_t *out_size)
{
    if (depth != 16 || width < 1 || height < 1 || channels < 1 || channels > 4)
        return GF_PNG_NOT_HANDLED;
    const size_t n = (size_t)width * (size_t)channels * 2, size = (n + 1) * (size_t)height;
    if (size > INT_MAX) {
        gf_set_error("image too large for PNG encoding without libdeflate");
        return GF_PNG_FAILED;
    }
    unsigned char *be = big_endian_copy(pixels, (size_t)width * (size_t)height * (size_t)channels);
    unsigned char *filtered = be ? gf_malloc_large(size) : NULL;
    const gf_band_rows rows = {be, width, channels * 2, 0, (uint32_t)height};
    unsigned char *z = NULL;
    int z_size = 0;
    if (filtered && filter_rows(&rows, filtered) == 0)
        z = gf_png_zlib_compress(filtered, (int)size, &z_size, level);
    free(be);
    free(filtered);
    unsigned char *png = z ? malloc(8 + 25 + 12 + (size_t)z_size + 12) : NULL;
    if (!png) {
        free(z);
        gf_set_error("out of memory for the PNG data");
        return GF_PNG_FAILED;
    }
    unsigned char ihdr[13];
    make_ihdr(ihdr, width, height, channels, 16);
    memcpy(png, "\x89PNG\r\n\x1a\n", 8);
    unsigned char *at = put_chunk(png + 8, "IHDR", ihdr, 13);
    at = put_chunk(at, "IDAT", z, (size_t)z_size);
    at = put_chunk(at, "IEND", NULL, 0);
    free(z);
    *out = png;
    *out_size = (size_t)(at - png);
    return GF_PNG_DONE;
}

#else

#include <libdeflate.h>

/* ==== encode ================================================================= */

/* The PNG around a zlib stream that arrives in pieces (a gf_zlib_sink):
 * signature, IHDR, the stream in IDAT chunks of at most 1 MiB (each CRC
 * computed as its bytes arrive), IEND, in one buffer of the final size. */
#define MAX_IDAT ((size_t)1 << 20)

typedef struct {
    int width, height, channels, depth;
    unsigned char *png, *at;      /* the file; where the next byte goes */
    unsigned char *chunk;         /* the open IDAT chunk's length field */
    size_t chunk_left;            /* bytes the open chunk still takes */
    size_t stream_left;           /* bytes of the stream still to come */
    uint32_t crc;
} container;

static int container_begin(void *ctx, size_t z_size)
{
    container *c = ctx;
    const size_t chunks = (z_size + MAX_IDAT - 1) / MAX_IDAT;
    c->png = gf_malloc_large(8 + 25 + chunks * 12 + z_size + 12);
    if (!c->png) {
        gf_set_error("out of memory for the PNG file");
        return -1;
    }
    unsigned char ihdr[13];
    make_ihdr(ihdr, c->width, c->height, c->channels, c->depth);
    memcpy(c->png, "\x89PNG\r\n\x1a\n", 8);
    c->at = put_chunk(c->png + 8, "IHDR", ihdr, 13);
    c->stream_left = z_size;
    c->chunk_left = 0;
    return 0;
}

static void close_idat(container *c)
{
    gf_put_be32(c->at, c->crc);
    c->at += 4;
}

static int container_put(void *ctx, const unsigned char *data, size_t size)
{
    container *c = ctx;
    while (size) {
        if (c->chunk_left == 0) {  /* open the next IDAT chunk */
            c->chunk_left = c->stream_left < MAX_IDAT ? c->stream_left : MAX_IDAT;
            gf_put_be32(c->at, (uint32_t)c->chunk_left);
            memcpy(c->at + 4, "IDAT", 4);
            c->crc = libdeflate_crc32(0, c->at + 4, 4);
            c->at += 8;
        }
        const size_t n = size < c->chunk_left ? size : c->chunk_left;
        memcpy(c->at, data, n);
        c->crc = libdeflate_crc32(c->crc, data, n);
        c->at += n, data += n, size -= n;
        c->chunk_left -= n, c->stream_left -= n;
        if (c->chunk_left == 0)
            close_idat(c);
    }
    return 0;
}

/* Bands of at least 256 KiB of filtered rows, a fixed size (the output
 * does not depend on the core count): small enough that a 512x512 RGB
 * image spreads over 3 cores, large enough that each band's fresh
 * dictionary costs under 1% of the size. */
#define BAND_BYTES ((size_t)256 << 10)

static int encode_threads(void)
{
    const int n = gf_image_threads();
    return n > 64 ? 64 : n;
}

int gf_png_encode(const unsigned char *pixels, int width, int height, int channels, int depth,
                  int level, unsigned char **out, size_t *out_size)
{
    if (width < 1 || height < 1 || channels < 1 || channels > 4)
        return GF_PNG_NOT_HANDLED;
    /* 16 bits: the big-endian bytes, filtered as 8-bit pixels of 2 * channels */
    unsigned char *be = NULL;
    if (depth == 16 && !(pixels = be = big_endian_copy(pixels, (size_t)width * (size_t)height *
                                                                   (size_t)channels)))
        return GF_PNG_FAILED;
    const int row_channels = depth == 16 ? 2 * channels : channels;
    const size_t row = (size_t)width * (size_t)row_channels + 1;
    const size_t rows_per_band = (BAND_BYTES + row - 1) / row;
    const size_t count = ((size_t)height + rows_per_band - 1) / rows_per_band;
    unsigned char *filtered = gf_malloc_large(row * (size_t)height);
    gf_zlib_band *bands = calloc(count, sizeof *bands);
    int r = -1;
    if (!filtered || !bands) {
        gf_set_error("out of memory for the PNG data");
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        const size_t y0 = i * rows_per_band;
        const size_t rows = i + 1 == count ? (size_t)height - y0 : rows_per_band;
        bands[i] = (gf_zlib_band){.data = filtered + y0 * row, .size = rows * row, .last = i + 1 == count,
                          .rows = {pixels, width, row_channels, (uint32_t)y0, (uint32_t)rows}};
    }
    container c = {.width = width, .height = height, .channels = channels,
                   .depth = depth == 16 ? 16 : 8};
    const gf_zlib_sink sink = {container_begin, container_put, &c};
    if (gf_deflate_bands(bands, count, level, encode_threads(), filter_rows, &sink) == 0) {
        c.at = put_chunk(c.at, "IEND", NULL, 0);
        *out = c.png;
        *out_size = (size_t)(c.at - c.png);
        r = 0;
    } else {
        free(c.png);
    }
done:
    free(be);
    free(filtered);
    free(bands);
    return r == 0 ? GF_PNG_DONE : GF_PNG_FAILED;
}

#endif
