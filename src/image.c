/* image.c - gf_image: decode (the container checks of decode_checks.c,
 * then PNM's own decoder, libjpeg-turbo or stb_image, then a JPEG's EXIF
 * orientation) and encode (stb_image_write, libjpeg-turbo); writing is
 * image_write.c's. */
#include "image.h"
#include "decode_checks.h"
#include "exif.h"
#include "jpeg_turbo.h"
#include "orientation.h"
#include "png_codec.h"
#include "tone.h"
#include "pnm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stb_image.h>
#include <stb_image_write.h>

#include "util.h"

static size_t max_pixels = GF_DEFAULT_MAX_PIXELS;
static int autorotate = 1;

void gf_image_set_png_level(int level)
{
    /* one setting for the whole run, made before any thread encodes */
    stbi_write_png_compression_level = level;
}

void gf_image_set_max_pixels(size_t limit)
{
    max_pixels = limit;
}

void gf_image_set_autorotate(int on)
{
    autorotate = on;
}

gf_image *gf_image_new(int width, int height, int channels)
{
    return gf_image_new_depth(width, height, channels, 8);
}

gf_image *gf_image_new_depth(int width, int height, int channels, int depth)
{
    size_t pixels, bytes;
    if (width < 1 || height < 1 || channels < 1 || channels > 4 || (depth != 8 && depth != 16) ||
        gf_mul_size((size_t)width, (size_t)height, &pixels) < 0 ||
        gf_mul_size(pixels, (size_t)channels * (size_t)(depth / 8), &bytes) < 0) {
        gf_set_error("invalid image size %dx%dx%d", width, height, channels);
        return NULL;
    }
    gf_image *img = malloc(sizeof *img);
    unsigned char *data = gf_malloc_large(bytes);
    if (!img || !data) {
        free(img);
        free(data);
        gf_set_error("out of memory for a %dx%d image", width, height);
        return NULL;
    }
    *img = (gf_image){width, height, channels, data, 0, depth};
    return img;
}

void gf_image_free(gf_image *img)
{
    if (!img)
        return;
    gf_image_release_memory(img->reserved);
    free(img->pixels);
    free(img);
}

/* RGB(A) -> gray(+alpha) in place over samples of type T: each write lands
 * at or before its read. */
#define TO_GRAY(T, pixels, n, c)                                                  \
    do {                                                                          \
        T *p_ = (T *)(void *)(pixels);                                            \
        for (size_t i = 0; i < (n); i++) {                                        \
            const T *rgb = p_ + i * (size_t)(c);                                  \
            const T luma = (T)gf_luma(rgb[0], rgb[1], rgb[2]);                    \
            if ((c) == 4) {                                                       \
                const T alpha = rgb[3];                                           \
                p_[2 * i] = luma;                                                 \
                p_[2 * i + 1] = alpha;                                            \
            } else {                                                              \
                p_[i] = luma;                                                     \
            }                                                                     \
        }                                                                         \
    } while (0)

void gf_image_to_gray(gf_image *img)
{
    const int c = img->channels;
    if (c < 3)
        return;
    const size_t n = (size_t)img->width * (size_t)img->height;
    if (img->depth == 16)
        TO_GRAY(uint16_t, img->pixels, n, c);  /* gf_luma's int sums hold 16-bit samples */
    else
        TO_GRAY(unsigned char, img->pixels, n, c);
    img->channels = c == 4 ? 2 : 1;
}

size_t gf_image_bytes(const gf_image *img)
{
    return (size_t)img->width * (size_t)img->height * (size_t)img->channels *
           (size_t)gf_image_sample_bytes(img);
}

void gf_depth_16_to_8(const uint16_t *in, size_t samples, unsigned char *out)
{
    for (size_t i = 0; i < samples; i++)
        out[i] = (unsigned char)((in[i] + 128u) / 257u);
}

int gf_image_convert_depth(gf_image *img, int depth)
{
    if (img->depth == depth || (depth != 8 && depth != 16))
        return 0;
    const size_t samples = (size_t)img->width * (size_t)img->height * (size_t)img->channels;
    if (depth == 8) {  /* in place: sample i's byte lands before its read */
        gf_depth_16_to_8((const uint16_t *)(void *)img->pixels, samples, img->pixels);
        img->depth = 8;
        return 0;
    }
    gf_image *wide = gf_image_new_depth(img->width, img->height, img->channels, 16);
    if (!wide)
        return -1;
    uint16_t *out = (uint16_t *)(void *)wide->pixels;
    for (size_t i = 0; i < samples; i++)
        out[i] = (uint16_t)(img->pixels[i] * 257u);
    free(img->pixels);
    img->pixels = wide->pixels;
    img->depth = 16;
    free(wide);
    return 0;
}

int gf_image_prepare(gf_image *img, int gray, int depth)
{
    /* the luma at the greater of the two depths */
    if (depth == 16 && gf_image_convert_depth(img, 16) < 0)
        return -1;
    if (gray)
        gf_image_to_gray(img);
    return depth == 8 ? gf_image_convert_depth(img, 8) : 0;
}

/* ---- reading -------------------------------------------------------------- */

/* expected: the file's size where known (one read into one buffer), else 0 */
static unsigned char *read_stream(FILE *f, size_t expected, size_t *size)
{
    size_t used = 0, capacity = expected > 0 && expected < (size_t)INT_MAX ? expected + 1 : 1 << 16;
    unsigned char *data = gf_malloc_large(capacity);
    while (data) {
        used += fread(data + used, 1, capacity - used, f);
        if (used < capacity || used > (size_t)INT_MAX)  /* stb decodes at most INT_MAX bytes */
            break;
        unsigned char *bigger = realloc(data, capacity * 2);
        if (!bigger) {
            free(data);
            data = NULL;
            break;
        }
        data = bigger;
        capacity *= 2;
    }
    if (data && ferror(f)) {
        free(data);
        data = NULL;
    }
    *size = used;
    return data;
}

unsigned char *gf_read_input(const char *path, size_t *size)
{
    if (strcmp(path, "-") == 0) {
        unsigned char *data = read_stream(stdin, 0, size);
        if (!data)
            gf_set_error("standard input: %s", errno ? strerror(errno) : "cannot read");
        return data;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        gf_set_error("%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    const int known = fstat(fileno(f), &st) == 0;
    if (known && S_ISDIR(st.st_mode)) {
        fclose(f);
        gf_set_error("%s: is a directory", path);
        return NULL;
    }
    errno = 0;
    unsigned char *data = read_stream(f, known && S_ISREG(st.st_mode) ? (size_t)st.st_size : 0, size);
    if (!data)
        gf_set_error("%s: %s", path, errno ? strerror(errno) : "cannot read");
    fclose(f);
    return data;
}

/* The declared size against --max-pixels, before any pixel memory exists. */
static int within_pixel_limit(int width, int height, const char *name)
{
    size_t pixels;
    if (gf_mul_size((size_t)width, (size_t)height, &pixels) == 0 && pixels <= max_pixels)
        return 1;
    gf_set_error("%s: %dx%d is %zu pixels, over the limit of %zu (--max-pixels)", name, width,
                 height, (size_t)width * (size_t)height, max_pixels);
    return 0;
}

/* A binary PNM never reaches stb_image: pnm.c reads and scales it. */
static int probe_pnm(const unsigned char *data, size_t size, const char *name,
                     gf_image_probe *probe)
{
    gf_pnm_header header;
    if (gf_pnm_read_header(data, size, name, &header) < 0 ||
        !within_pixel_limit(header.width, header.height, name) ||
        gf_pnm_check_data(size, &header, name) < 0)
        return -1;
    probe->width = header.width;
    probe->height = header.height;
    probe->channels = header.channels;
    probe->depth = header.maxval > 255 ? 16 : 8;
    return 0;
}

/* 16 for a PNG whose IHDR (the first chunk, checked by gf_check_container)
 * declares 16-bit samples: png_decode.c or stbi_load_16 decodes it so. */
static int png_depth(const unsigned char *data, size_t size)
{
    return size >= 29 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0 &&
                   memcmp(data + 12, "IHDR", 4) == 0 && data[24] == 16 && data[25] != 3
               ? 16
               : 8;
}

/* The EXIF orientation the decode applies to a file (1 for all but a
 * turned JPEG), and the stored width and height turned to the decoded. */
static int oriented_size(const unsigned char *data, size_t size, int *width, int *height)
{
    const int orientation = autorotate ? gf_jpeg_exif_orientation(data, size) : GF_ORIENTATION_STORED;
    if (gf_orientation_swaps_axes(orientation)) {
        const int stored_width = *width;
        *width = *height;
        *height = stored_width;
    }
    return orientation;
}

int gf_image_probe_memory(const unsigned char *data, size_t size, const char *name,
                          gf_image_probe *probe)
{
    memset(probe, 0, sizeof *probe);
    probe->orientation = GF_ORIENTATION_STORED;
    probe->depth = 8;
    if (size == 0) {
        gf_set_error("%s: empty file", name);
        return -1;
    }
    if (size > INT_MAX) {
        gf_set_error("%s: file too large to decode (over 2 GiB)", name);
        return -1;
    }
    if (gf_pnm_is_binary(data, size))
        return probe_pnm(data, size, name, probe);
    /* the container before stb_image reads the header, the declared size
     * against the limit, then the data against the declared size */
    gf_jpeg_tables tables = {0};
    if (gf_check_container(data, size, name, &tables) < 0)
        return -1;
    probe->jpeg_undefined_tables = tables.undefined_used;
    int width, height, channels;
    if (!stbi_info_from_memory(data, (int)size, &width, &height, &channels)) {
        gf_set_error("%s: not an image in a format this tool reads (%s)", name, stbi_failure_reason());
        return -1;
    }
    if (width < 1 || height < 1) {  /* stb_image 2.27 passes a GIF, PSD or HDR header's 0 or less */
        gf_set_error("%s: corrupt image (%dx%d pixels)", name, width, height);
        return -1;
    }
    probe->orientation = oriented_size(data, size, &width, &height);
    if (!within_pixel_limit(width, height, name) || gf_check_image_data(data, size, name) < 0)
        return -1;
    probe->width = width;
    probe->height = height;
    probe->channels = channels;
    probe->depth = png_depth(data, size);
    return 0;
}

/* The size a probed file's decoder gives: before the orientation. */
static void stored_size(const gf_image_probe *probe, int *width, int *height)
{
    const int swapped = gf_orientation_swaps_axes(probe->orientation);
    *width = swapped ? probe->height : probe->width;
    *height = swapped ? probe->width : probe->height;
}

static unsigned char *decode_pnm(const unsigned char *data, size_t size, const char *name,
                                 int *width, int *height, int *channels)
{
    gf_pnm_header header;
    if (gf_pnm_read_header(data, size, name, &header) < 0)
        return NULL;
    *width = header.width;
    *height = header.height;
    *channels = header.channels;
    return gf_pnm_decode(data, size, &header, name);
}

/* A PNG through png_decode.c; NULL with *handled 0 leaves it to stb_image
 * (with *corrupt the message to give if stb_image refuses it too). */
static unsigned char *decode_png(const unsigned char *data, size_t size, const char *name,
                                 int *width, int *height, int *channels, int *depth,
                                 int *handled, const char **corrupt)
{
    unsigned char *pixels = NULL;
    const int r = gf_png_decode(data, size, name, &pixels, width, height, channels, depth,
                                corrupt);
    *handled = r != GF_PNG_NOT_HANDLED;
    return r == GF_PNG_DONE ? pixels : NULL;
}

/* The pixels of a probed file, at the probe's depth: pnm.c for a binary
 * PNM, libjpeg-turbo for a JPEG, png_decode.c for most PNGs, else
 * stb_image (stbi_load_16 for a 16-bit PNG: Adam7, for one). */
static unsigned char *decode_pixels(const unsigned char *data, size_t size, const char *name,
                                    const gf_image_probe *probe, int *width, int *height,
                                    int *channels)
{
    if (gf_pnm_is_binary(data, size))
        return decode_pnm(data, size, name, width, height, channels);
    unsigned char *pixels = NULL;
    if (size >= 2 && data[0] == 0xFF && data[1] == 0xD8) {
        int w, h, c, stored_width, stored_height;
        stored_size(probe, &stored_width, &stored_height);
        pixels = gf_jpeg_turbo_decode(data, size, &w, &h, &c);
        /* the same shape stb_image reported, or stb_image decodes it */
        if (pixels && (w != stored_width || h != stored_height || c != probe->channels)) {
            free(pixels);
            pixels = NULL;
        }
        if (pixels) {
            *width = w, *height = h, *channels = c;
            return pixels;
        }
    }
    if (probe->jpeg_undefined_tables) {
        gf_set_error("%s: %s", name,
                     gf_jpeg_turbo_available()
                         ? "corrupt JPEG (a scan uses a Huffman table the file does not define)"
                         : "a scan uses a Huffman table the file does not define; this build "
                           "has no libjpeg-turbo, which would take the standard tables");
        return NULL;
    }
    const char *corrupt = NULL;
    if (size >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0) {
        int handled, depth = 8;
        pixels = decode_png(data, size, name, width, height, channels, &depth, &handled, &corrupt);
        if (handled && pixels && depth != probe->depth) {  /* not reached: both read IHDR */
            free(pixels);
            gf_set_error("%s: corrupt PNG (the depth changed between reads)", name);
            return NULL;
        }
        if (handled)
            return pixels;
    }
    if (probe->depth == 16)
        pixels = (unsigned char *)stbi_load_16_from_memory(data, (int)size, width, height, channels, 0);
    else
        pixels = stbi_load_from_memory(data, (int)size, width, height, channels, 0);
    if (!pixels && corrupt)
        gf_set_error("%s: corrupt PNG (%s)", name, corrupt);
    else if (!pixels)
        gf_set_error("%s: cannot decode: %s", name, stbi_failure_reason());
    return pixels;
}

gf_image *gf_image_decode_probed(const unsigned char *data, size_t size, const char *name,
                                 const gf_image_probe *probe, size_t reserved)
{
    int width, height, channels;
    unsigned char *pixels = decode_pixels(data, size, name, probe, &width, &height, &channels);
    gf_image *img = pixels ? malloc(sizeof *img) : NULL;
    if (!img) {
        if (pixels)
            gf_set_error("%s: out of memory", name);
        free(pixels);  /* stb allocates with malloc (STBI_MALLOC default) */
        gf_image_release_memory(reserved);
        return NULL;
    }
    *img = (gf_image){width, height, channels, pixels, reserved, probe->depth};
    /* the turn's second buffer fits the budget's share for the decoder's own copy */
    if (gf_image_orient(img, probe->orientation) < 0) {
        gf_error_name_file(name);
        gf_image_free(img);
        return NULL;
    }
    return img;
}

gf_image *gf_image_load_memory(const unsigned char *data, size_t size, const char *name)
{
    gf_image_probe probe;
    if (gf_image_probe_memory(data, size, name, &probe) < 0)
        return NULL;
    const size_t reserved = gf_image_memory_estimate(probe.width, probe.height, probe.channels,
                                                     probe.depth);
    if (gf_image_reserve_memory(name, reserved) < 0)
        return NULL;
    return gf_image_decode_probed(data, size, name, &probe, reserved);
}

gf_image *gf_image_load(const char *path)
{
    size_t size = 0;
    unsigned char *data = gf_read_input(path, &size);
    if (!data)
        return NULL;
    gf_image *img = gf_image_load_memory(data, size, strcmp(path, "-") == 0 ? "standard input" : path);
    free(data);
    return img;
}

/* ---- formats -------------------------------------------------------------- */

static const struct {
    const char *name;
    gf_format format;
} format_names[] = {
    {"png", GF_FORMAT_PNG}, {"jpg", GF_FORMAT_JPEG}, {"jpeg", GF_FORMAT_JPEG},
    {"bmp", GF_FORMAT_BMP}, {"tga", GF_FORMAT_TGA},
};

gf_format gf_format_from_name(const char *name)
{
    for (size_t i = 0; i < sizeof format_names / sizeof format_names[0]; i++)
        if (strcasecmp(name, format_names[i].name) == 0)
            return format_names[i].format;
    return GF_FORMAT_NONE;
}

gf_format gf_format_from_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash : path, '.');
    return dot ? gf_format_from_name(dot + 1) : GF_FORMAT_NONE;
}

const char *gf_format_name(gf_format format)
{
    switch (format) {
    case GF_FORMAT_PNG: return "png";
    case GF_FORMAT_JPEG: return "jpeg";
    case GF_FORMAT_BMP: return "bmp";
    case GF_FORMAT_TGA: return "tga";
    default: return "none";
    }
}

/* ---- encoding ------------------------------------------------------------- */

typedef struct {
    gf_bytes bytes;
    int failed;
} byte_buffer;

static void append_bytes(void *context, void *data, int size)
{
    byte_buffer *b = context;
    if (!b->failed && size > 0 && gf_bytes_append(&b->bytes, data, (size_t)size) < 0)
        b->failed = 1;
}

static int encode_8bit(const gf_image *img, gf_format format, int quality, unsigned char **data,
                      size_t *size);

/* png_encode.c at the image's depth: GF_PNG_DONE, FAILED (the error set)
 * or NOT_HANDLED (stb_image_write takes an 8-bit image then). */
static int encode_png(const gf_image *img, unsigned char **data, size_t *size)
{
    if ((size_t)img->width * (size_t)img->channels * (size_t)gf_image_sample_bytes(img) >
        INT_MAX) {
        gf_set_error("image too wide for PNG encoding");
        return GF_PNG_FAILED;
    }
    return gf_png_encode(img->pixels, img->width, img->height, img->channels, img->depth,
                         stbi_write_png_compression_level, data, size);
}

/* A 16-bit image to a format of 8 bits a sample: a copy rounded to 8 bits
 * (round(v / 257)) is encoded. */
static int encode_reduced(const gf_image *img, gf_format format, int quality,
                          unsigned char **data, size_t *size)
{
    gf_image *narrow = gf_image_new(img->width, img->height, img->channels);
    if (!narrow)
        return -1;
    gf_depth_16_to_8(gf_image_samples16(img),
                     (size_t)img->width * (size_t)img->height * (size_t)img->channels,
                     narrow->pixels);
    const int status = encode_8bit(narrow, format, quality, data, size);
    gf_image_free(narrow);
    return status;
}

int gf_image_encode(const gf_image *img, gf_format format, int quality,
                    unsigned char **data, size_t *size)
{
    /* JPEG and TGA store each side in 16 bits; stb_image_write would cut it */
    if ((format == GF_FORMAT_JPEG || format == GF_FORMAT_TGA) &&
        (img->width > 65535 || img->height > 65535)) {
        gf_set_error("cannot encode a %dx%d image as %s: it holds at most 65535 pixels a side",
                     img->width, img->height, gf_format_name(format));
        return -1;
    }
    if (format == GF_FORMAT_NONE) {
        gf_set_error("no output format given");
        return -1;
    }
    if (img->depth != 16)
        return encode_8bit(img, format, quality, data, size);
    if (format != GF_FORMAT_PNG)
        return encode_reduced(img, format, quality, data, size);
    const int status = encode_png(img, data, size);
    if (status == GF_PNG_NOT_HANDLED)  /* not reached: every 16-bit shape is handled */
        gf_set_error("cannot encode the image as png");
    return status == GF_PNG_DONE ? 0 : -1;
}

static int encode_8bit(const gf_image *img, gf_format format, int quality, unsigned char **data,
                      size_t *size)
{
    byte_buffer b = {0};
    int ok = 0;
    const int w = img->width, h = img->height, c = img->channels;
    switch (format) {
    case GF_FORMAT_PNG:
        switch (encode_png(img, data, size)) {
        case GF_PNG_DONE: return 0;
        case GF_PNG_FAILED: return -1;
        default: break;
        }
        ok = stbi_write_png_to_func(append_bytes, &b, w, h, c, img->pixels, w * c);
        break;
    case GF_FORMAT_JPEG:
        if (gf_jpeg_turbo_encode(img->pixels, w, h, c, quality, data, size) == 0)
            return 0;
        ok = stbi_write_jpg_to_func(append_bytes, &b, w, h, c, img->pixels, quality);
        break;
    case GF_FORMAT_BMP:
        ok = stbi_write_bmp_to_func(append_bytes, &b, w, h, c, img->pixels);
        break;
    case GF_FORMAT_TGA:
        ok = stbi_write_tga_to_func(append_bytes, &b, w, h, c, img->pixels);
        break;
    default:
        gf_set_error("no output format given");
        return -1;
    }
    if (!ok || b.failed) {
        free(b.bytes.data);
        gf_set_error("cannot encode the image as %s%s", gf_format_name(format),
                     b.failed ? ": out of memory" : "");
        return -1;
    }
    *data = b.bytes.data;
    *size = b.bytes.size;
    return 0;
}
