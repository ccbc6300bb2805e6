/* zlib_bands.h - one zlib stream from bands of data deflated apart, on
 * threads (libdeflate).
 *
 * libdeflate ends every stream with a final block; each band's but the
 * last is walked to clear that bit and is closed with an empty stored
 * block (as zlib's Z_SYNC_FLUSH does), so the bands join into one stream;
 * the Adler-32 is combined from the bands'. Without libdeflate only
 * gf_adler32_combine works. */
#ifndef GF_ZLIB_BANDS_H
#define GF_ZLIB_BANDS_H

#include <stddef.h>
#include <stdint.h>

/* Image rows a band's data is made from before it is deflated. */
typedef struct {
    const unsigned char *pixels;
    int width, channels;
    uint32_t y0, rows;
} gf_band_rows;

typedef struct {
    unsigned char *data;  /* the band's bytes (made by fill when rows.rows) */
    size_t size;
    gf_band_rows rows;
    int last;
    unsigned char *out;   /* its deflate data */
    size_t out_size;
    uint32_t adler;
    int failed;           /* 1 no memory, 2 the walk did not match */
} gf_zlib_band;

/* Writes a band's data from its rows (the PNG row filters); 0 or -1. */
typedef int (*gf_band_fill)(const gf_band_rows *rows, unsigned char *out);

/* Where the joined zlib stream goes: begin(ctx, total bytes) once, then
 * put(ctx, ...) of every piece in order; each 0, or -1 with the error set. */
typedef struct {
    int (*begin)(void *ctx, size_t total);
    int (*put)(void *ctx, const unsigned char *data, size_t size);
    void *ctx;
} gf_zlib_sink;

/* Deflate the bands on up to 'threads' threads (fill, if not NULL, first
 * makes a band's data) and join them into one zlib stream, given to sink
 * piece by piece (no copy of the whole). 0, or -1 with the error set. */
int gf_deflate_bands(gf_zlib_band *bands, size_t count, int level, int threads,
                     gf_band_fill fill, const gf_zlib_sink *sink);

/* The zlib stream of data deflated in bands of band_size bytes (the last
 * one shorter) on up to 'threads' threads. Returns 0, or -1 with the error
 * set. */
int gf_png_zlib_bands(const unsigned char *data, size_t size, size_t band_size, int level,
                      int threads, unsigned char **out, size_t *out_size);

/* Adler-32 of A followed by B, from adler(A), adler(B) and B's length. */
uint32_t gf_adler32_combine(uint32_t adler_a, uint32_t adler_b, size_t length_b);

#endif
