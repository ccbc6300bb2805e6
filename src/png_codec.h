/* png_codec.h - PNG decode (png_decode.c) and encode (png_encode.c) on
 * libdeflate.
 *
 * Decode gives byte for byte what stb_image 2.27 gives with req_comp 0 for
 * every file it handles (stbi_load_16 for a 16-bit file: its samples in
 * the host's order); what it does not handle (Adam7, CgBI, colour type
 * and depth pairs outside the PNG spec, data stb_image would read past its
 * palette or extra inflated bytes) it leaves to stb_image. Encode filters
 * the rows as stb_image_write does and deflates bands of rows on threads
 * into one zlib stream. Without libdeflate, decode and 8-bit encode leave
 * everything to stb; a 16-bit encode (which stb_image_write cannot make)
 * filters the same way and deflates in one piece with stb's compressor. */
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

/* The interleaved pixels of a PNG file (data starts with the signature):
 * *depth 16 for a 16-bit gray or RGB file (uint16_t samples in the host's
 * order; a tRNS key gives alpha 0 or 65535), else 8; *pixels is malloc'ed.
 * On GF_PNG_NOT_HANDLED, *corrupt is set
 * when the deflate data looked corrupt: the message to give ("corrupt PNG
 * (...)" after the name) should stb_image refuse the file too. */
int gf_png_decode(const unsigned char *data, size_t size, const char *name,
                  unsigned char **pixels, int *width, int *height, int *channels, int *depth,
                  const char **corrupt);

/* A PNG of 8- or 16-bit pixels (channels 1..4, rows of width * channels
 * samples; 16-bit ones uint16_t in the host's order) in a malloc'ed
 * buffer; level: libdeflate's 0..12 (stb_image_write's without it). */
int gf_png_encode(const unsigned char *pixels, int width, int height, int channels, int depth,
                  int level, unsigned char **out, size_t *out_size);

/* stb_image_write's zlib stream of data (libdeflate's where the build has
 * it), malloc'ed; NULL without memory (stb_impl.c). */
unsigned char *gf_png_zlib_compress(unsigned char *data, int size, int *out_size, int level);

/* The Paeth predictor, which filtering and unfiltering share. */
static inline int gf_png_paeth(int a, int b, int c)
{
    /* |p - a|, |p - b|, |p - c| for p = a + b - c, and selects without
     * branches: on photos the comparisons go either way at random */
    const int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c);
    const int b_or_c = pb <= pc ? b : c;
    return ((pa <= pb) & (pa <= pc)) ? a : b_or_c;
}

#endif
