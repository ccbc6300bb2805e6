/* png_codec.h - PNG decode (png_decode.c) and encode (png_encode.c) on
 * libdeflate.
 *
 * Decode gives byte for byte what stb_image 2.27 gives with req_comp 0 for
 * every file it handles; what it does not handle (Adam7, CgBI, colour type
 * and depth pairs outside the PNG spec, data stb_image would read past its
 * palette or extra inflated bytes) it leaves to stb_image. Encode filters
 * the rows as stb_image_write does and deflates bands of rows on threads
 * into one zlib stream. Without libdeflate both leave everything to stb. */
#ifndef GF_PNG_CODEC_H
#define GF_PNG_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

enum {
    GF_PNG_DONE = 0,
    GF_PNG_FAILED = -1,      /* refused; the error is set */
    GF_PNG_NOT_HANDLED = 1,  /* the caller uses stb_image / stb_image_write */
};

/* The 8-bit interleaved pixels of a PNG file (data starts with the
 * signature); *pixels is malloc'ed. On GF_PNG_NOT_HANDLED, *corrupt is set
 * when the deflate data looked corrupt: the message to give ("corrupt PNG
 * (...)" after the name) should stb_image refuse the file too. */
int gf_png_decode(const unsigned char *data, size_t size, const char *name,
                  unsigned char **pixels, int *width, int *height, int *channels,
                  const char **corrupt);

/* A PNG of 8-bit pixels (channels 1..4, rows of width * channels bytes) in
 * a malloc'ed buffer; level: libdeflate's 0..12. */
int gf_png_encode(const unsigned char *pixels, int width, int height, int channels, int level,
                  unsigned char **out, size_t *out_size);

/* The Paeth predictor, which filtering and unfiltering share. */
static inline int gf_png_paeth(int a, int b, int c)
{
    /* |p - a|, |p - b|, |p - c| for p = a + b - c, and selects without
     * branches: on photos the comparisons go either way at random */
    const int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c);
    const int b_or_c = pb <= pc ? b : c;
    return (pa <= pb) & (pa <= pc) ? a : b_or_c;
}

#endif
