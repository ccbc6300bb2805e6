/* image.h - gf_image: interleaved pixels of 8 or 16 bits a sample, load with
 * stb_image (and the faster codecs), save with stb_image_write or the PNG
 * encoder, '-' for stdin / stdout, atomic replacement of the output. */
#ifndef GF_IMAGE_H
#define GF_IMAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int width;
    int height;
    int channels;           /* 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA */
    unsigned char *pixels;  /* width * height * channels samples, row-major */
    size_t reserved;        /* bytes of the memory budget it holds, given back by gf_image_free */
    int depth;              /* bits a sample: 8, or 16 (uint16_t in the host's byte order) */
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
gf_image *gf_image_new_depth(int width, int height, int channels, int depth);
void gf_image_free(gf_image *img);
size_t gf_image_bytes(const gf_image *img);
/* Bytes of one sample: 1 or 2. */
static inline int gf_image_sample_bytes(const gf_image *img)
{
    return img->depth == 16 ? 2 : 1;
}
static inline const uint16_t *gf_image_samples16(const gf_image *img)
{
    return (const uint16_t *)(const void *)img->pixels;
}
/* RGB -> gray, RGBA -> gray+alpha, in place, with the luma of the tone
 * operations (OpenCV's fixed-point BT.601); gray images stay as they are. */
void gf_image_to_gray(gf_image *img);
/* To depth 8 or 16 (in place; 0, or -1 with the error set): down
 * round(v / 257), as (v + 128) / 257 (no ties exist); up v * 257. */
int gf_image_convert_depth(gf_image *img, int depth);
void gf_depth_16_to_8(const uint16_t *in, size_t samples, unsigned char *out);
/* What a run does to each decoded image before its operations: --gray
 * (gray), --depth (depth 8 or 16; 0 keeps the image's). */
int gf_image_prepare(gf_image *img, int gray, int depth);

/* Images with more pixels than this are refused before they are decoded. */
#define GF_DEFAULT_MAX_PIXELS ((size_t)1 << 30)  /* 1 Gpx: 4 GiB as RGBA */
void gf_image_set_max_pixels(size_t max_pixels);

/* JPEGs are turned by their EXIF orientation as they are decoded
 * (exif.h, orientation.h), unless this is set to 0 (--no-autorotate):
 * one setting for the run, made before any decode. */
void gf_image_set_autorotate(int on);

/* Decode a file, or standard input when path is "-": every format stb_image
 * reads, and binary PNM; a 16-bit PNG and a PNM of maxval over 255 give a
 * 16-bit image, other 16-bit samples are reduced to 8 bits, and a JPEG
 * is turned by its EXIF orientation. The file's container and declared
 * size are checked, and its memory reserved from the budget, before any
 * pixel memory is allocated. */
gf_image *gf_image_load(const char *path);
gf_image *gf_image_load_memory(const unsigned char *data, size_t size, const char *name);
/* gf_image_load_memory in its two steps. Probe: the checks of the
 * container and of the size its header declares (nothing is decoded or
 * allocated). Decode: the pixels of a probed file; the image then holds
 * 'reserved' bytes of the memory budget (given back on failure too). */
typedef struct {
    int width, height, channels;  /* the decoded image's, after the orientation */
    int orientation;              /* the EXIF orientation the decode applies (1: none) */
    int jpeg_undefined_tables;    /* only libjpeg-turbo may decode it */
    int depth;                    /* the decoded image's bits a sample: 8 or 16 */
} gf_image_probe;
int gf_image_probe_memory(const unsigned char *data, size_t size, const char *name,
                          gf_image_probe *probe);
gf_image *gf_image_decode_probed(const unsigned char *data, size_t size, const char *name,
                                 const gf_image_probe *probe, size_t reserved);
/* The whole file (standard input for "-") in a heap buffer; NULL and an error. */
unsigned char *gf_read_input(const char *path, size_t *size);

/* ---- limits on decoding (image_limits.c) ---- */

/* Decode the file as gf_image_load does, under the time limit: past it the
 * file is reported as failed and the caller goes on (the decode, which
 * cannot be stopped, is left to end or to die with the process). */
gf_image *gf_image_load_limited(const char *path);
/* The same, calling probed with the file's probe (its size, channels) and
 * bytes once they are checked, before the decode starts. A hook that
 * returns 1 takes the bytes (to free them): nothing is decoded then, and
 * the load returns NULL with no error. */
typedef int (*gf_probe_hook)(const gf_image_probe *probe, unsigned char *data, size_t size,
                             void *user);
gf_image *gf_image_load_limited_hook(const char *path, gf_probe_hook probed, void *user);
/* The decode step alone, of a file read and probed already: data (which it
 * takes, and frees) reserved from the budget and decoded under the limit. */
gf_image *gf_image_decode_limited(unsigned char *data, size_t size, const char *name,
                                  const gf_image_probe *probe);
#define GF_DEFAULT_DECODE_TIMEOUT_S 120.0
void gf_image_set_decode_timeout(double seconds);  /* 0: no limit */
double gf_image_decode_timeout(void);

/* The memory budget the decodes of a run share (--max-memory; default half
 * the physical memory). gf_image_load_memory reserves each image's estimate
 * from it before allocating pixels: it waits while other images hold the
 * budget, and refuses an image larger than the whole budget. */
size_t gf_default_memory_budget(void);
void gf_image_set_memory_budget(size_t bytes);
size_t gf_image_memory_estimate(int width, int height, int channels, int depth);
/* --depth 16: every estimate counts 2 bytes a sample, as the image will
 * hold once widened (one setting for the run, before any decode). */
void gf_image_set_budget_depth(int depth);
int gf_image_reserve_memory(const char *name, size_t bytes);
void gf_image_release_memory(size_t bytes);

/* "png", "jpg", "jpeg", "bmp", "tga" (any case) -> format; GF_FORMAT_NONE otherwise. */
gf_format gf_format_from_name(const char *name);
/* The format implied by path's extension; GF_FORMAT_NONE if none is known. */
gf_format gf_format_from_path(const char *path);
const char *gf_format_name(gf_format format);

/* PNG compression level: 0 (none) .. 12 with libdeflate (0 .. 9 otherwise). */
#define GF_DEFAULT_PNG_LEVEL 1
void gf_image_set_png_level(int level);
/* The CRC of a PNG chunk's type and data (stb_image_write's). */
uint32_t gf_png_crc32(const unsigned char *data, size_t size);
/* Which deflate PNG encoding uses: "libdeflate" or "stb_image_write". */
const char *gf_png_deflater(void);

/* Encode img into a heap buffer (*data, *size; free() it). quality: JPEG 1..100. */
int gf_image_encode(const gf_image *img, gf_format format, int quality,
                    unsigned char **data, size_t *size);

/* Encode and write (image_write.c): to standard output when path is "-";
 * straight into a character device or FIFO; otherwise onto a regular file
 * (or the file a symbolic link names) by atomic replacement, so a failure
 * never leaves a partial file and the input may be the output. Any other
 * kind of file is refused. GF_FORMAT_NONE: the format of path's extension. */
int gf_image_save(const gf_image *img, const char *path, gf_format format, int quality);
/* The writing half of gf_image_save: bytes already encoded (and marked). */
int gf_image_write_encoded(const char *path, const unsigned char *data, size_t size);

/* An output written in pieces, as it is made (stream.h), under the rules
 * of gf_image_write_encoded: a regular file's pieces go into its
 * anonymous file, which gets its name at commit; standard output's, a
 * device's or a FIFO's are kept until commit, so that a failure on the way
 * writes nothing anywhere. open checks the path first (a folder, a link to
 * nothing). Each returns 0 or -1 (NULL) with the error set; commit and
 * discard free the output. */
typedef struct gf_output gf_output;
gf_output *gf_output_open(const char *path);
int gf_output_write(gf_output *out, const unsigned char *data, size_t size);
int gf_output_commit(gf_output *out);
void gf_output_discard(gf_output *out);

/* The mark of a file gpufilter wrote (image_mark.c): a PNG tEXt
 * "Software" chunk or a JPEG COM segment reading "gpufilter". Mark adds it
 * to an encoded PNG or JPEG (other formats have no place for it). */
int gf_image_mark(gf_format format, unsigned char **data, size_t *size);
int gf_image_has_mark(const unsigned char *data, size_t size);
/* 1 when output is an existing regular file that is a readable image
 * without the mark, and not the input itself: most likely an input typed
 * where the output goes, which a plain INPUT OUTPUT call must not replace. */
int gf_image_foreign_output(const char *output, const char *input);

/* Read the umask once, before threads start (a new output gets 0666 less it). */
void gf_image_read_umask(void);

/* From a signal handler (async-signal-safe): wait until no output is
 * between getting a temporary name and being renamed into place, and stop
 * new ones; after it returns no temporary file exists. */
void gf_image_abort_save(void);

#endif
