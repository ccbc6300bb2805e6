/* image.h - gf_image: interleaved 8-bit pixels, load with stb_image, save with
 * stb_image_write, '-' for stdin / stdout, atomic replacement of the output. */
#ifndef GF_IMAGE_H
#define GF_IMAGE_H

#include <stddef.h>

typedef struct {
    int width;
    int height;
    int channels;           /* 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA */
    unsigned char *pixels;  /* width * height * channels bytes, row-major */
} gf_image;

typedef enum {
    GF_FORMAT_NONE = 0,     /* unknown: take it from the output's extension */
    GF_FORMAT_PNG,
    GF_FORMAT_JPEG,
    GF_FORMAT_BMP,
    GF_FORMAT_TGA,
} gf_format;

/* Allocate an image (pixels uninitialised); NULL and an error on failure. */
gf_image *gf_image_new(int width, int height, int channels);
void gf_image_free(gf_image *img);
size_t gf_image_bytes(const gf_image *img);

/* Images with more pixels than this are refused before they are decoded. */
#define GF_DEFAULT_MAX_PIXELS ((size_t)1 << 30)  /* 1 Gpx: 4 GiB as RGBA */
void gf_image_set_max_pixels(size_t max_pixels);

/* Decode a file, or standard input when path is "-". Every format stb_image
 * reads; 16-bit samples are reduced to 8 bits. The declared size is checked
 * against the pixel limit before any pixel memory is allocated. */
gf_image *gf_image_load(const char *path);
gf_image *gf_image_load_memory(const unsigned char *data, size_t size, const char *name);

/* "png", "jpg", "jpeg", "bmp", "tga" (any case) -> format; GF_FORMAT_NONE otherwise. */
gf_format gf_format_from_name(const char *name);
/* The format implied by path's extension; GF_FORMAT_NONE if none is known. */
gf_format gf_format_from_path(const char *path);
const char *gf_format_name(gf_format format);

/* PNG compression level: 0 (none) .. 12 with libdeflate (0 .. 9 otherwise). */
#define GF_DEFAULT_PNG_LEVEL 3
void gf_image_set_png_level(int level);
/* Which deflate PNG encoding uses: "libdeflate" or "stb_image_write". */
const char *gf_png_deflater(void);

/* Encode img into a heap buffer (*data, *size; free() it). quality: JPEG 1..100. */
int gf_image_encode(const gf_image *img, gf_format format, int quality,
                    unsigned char **data, size_t *size);

/* Encode and write: to standard output when path is "-", otherwise to a
 * temporary file in the output's folder that is renamed onto path once it is
 * complete, so a failure never leaves a partial file and the input may be
 * the output. GF_FORMAT_NONE: the format of path's extension. */
int gf_image_save(const gf_image *img, const char *path, gf_format format, int quality);

/* Remove the temporary output being written, if any (async-signal-safe). */
void gf_image_abort_save(void);

#endif
