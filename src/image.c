/* image.c - gf_image: decode with stb_image, encode with stb_image_write,
 * standard input / output for "-", and atomic replacement of the output. */
#include "image.h"
#include "jpeg_turbo.h"

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

void gf_image_set_png_level(int level)
{
    /* one setting for the whole run, made before any thread encodes */
    stbi_write_png_compression_level = level;
}

void gf_image_set_max_pixels(size_t limit)
{
    max_pixels = limit;
}

gf_image *gf_image_new(int width, int height, int channels)
{
    size_t pixels, bytes;
    if (width < 1 || height < 1 || channels < 1 || channels > 4 ||
        gf_mul_size((size_t)width, (size_t)height, &pixels) < 0 ||
        gf_mul_size(pixels, (size_t)channels, &bytes) < 0) {
        gf_set_error("invalid image size %dx%dx%d", width, height, channels);
        return NULL;
    }
    gf_image *img = malloc(sizeof *img);
    unsigned char *data = malloc(bytes);
    if (!img || !data) {
        free(img);
        free(data);
        gf_set_error("out of memory for a %dx%d image", width, height);
        return NULL;
    }
    *img = (gf_image){width, height, channels, data, 0};
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

size_t gf_image_bytes(const gf_image *img)
{
    return (size_t)img->width * (size_t)img->height * (size_t)img->channels;
}

/* ---- reading -------------------------------------------------------------- */

static unsigned char *read_stream(FILE *f, size_t *size)
{
    size_t used = 0, capacity = 1 << 16;
    unsigned char *data = malloc(capacity);
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
        unsigned char *data = read_stream(stdin, size);
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
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        gf_set_error("%s: is a directory", path);
        return NULL;
    }
    errno = 0;
    unsigned char *data = read_stream(f, size);
    if (!data)
        gf_set_error("%s: %s", path, errno ? strerror(errno) : "cannot read");
    fclose(f);
    return data;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The Huffman tables a JPEG defines, and whether a scan uses one it has
 * not defined. libjpeg-turbo then takes the standard tables (Motion JPEG
 * frames leave them out), while stb_image 2.27 reads its own uninitialised
 * memory (found by fuzzing): such a file goes to libjpeg-turbo only. */
typedef struct {
    unsigned defined;   /* bit th: DC table th; bit 4 + th: AC table th */
    int progressive;    /* SOF2: a scan uses DC or AC tables, not both */
    int undefined_used; /* a scan needs a table not defined before it */
} jpeg_tables;

/* A DHT segment's tables each declare at most 256 codes. stb_image 2.27
 * writes past its code table when the counts add up to more (found by
 * fuzzing), so such files are refused before they reach it. */
static int jpeg_huffman_tables_valid(const unsigned char *d, size_t n, jpeg_tables *t)
{
    size_t i = 0;
    while (i < n) {
        if (n - i < 17)
            return 0;
        size_t codes = 0;
        for (int b = 1; b <= 16; b++)
            codes += d[i + b];
        if (codes > 256)
            return 0;
        const int tc = d[i] >> 4, th = d[i] & 15;
        if (tc <= 1 && th <= 3)  /* stb_image refuses the others */
            t->defined |= 1u << (4 * tc + th);
        i += 17 + codes;
    }
    return i == n;
}

/* An SOS header (after its length): which tables its components need. A
 * first DC scan of a progressive JPEG decodes with the DC table, its AC
 * scans with the AC table, its DC refinements with none. */
static void jpeg_scan_tables(const unsigned char *s, size_t n, jpeg_tables *t)
{
    if (n < 1 || n < 4 + 2 * (size_t)s[0])
        return;  /* stb_image refuses a short header itself */
    const size_t components = s[0];
    const int first = s[1 + 2 * components], high = s[3 + 2 * components] >> 4;
    const int dc = !t->progressive || (first == 0 && high == 0);
    const int ac = !t->progressive || first != 0;
    for (size_t k = 0; k < components; k++) {
        const int td = s[2 + 2 * k] >> 4, ta = s[2 + 2 * k] & 15;
        if ((dc && td <= 3 && !(t->defined >> td & 1)) ||
            (ac && ta <= 3 && !(t->defined >> (4 + ta) & 1)))
            t->undefined_used = 1;
    }
}

/* Walk the JPEG markers: NULL when the file is whole and sound, otherwise
 * what is wrong. stb_image decodes a JPEG cut short without complaint (it
 * pads the missing scan data), so the markers must reach EOI. */
static const char *jpeg_problem(const unsigned char *d, size_t n, size_t i, jpeg_tables *t)
{
    while (i + 4 <= n) {
        if (d[i] != 0xFF)
            return "corrupt JPEG (bad marker)";
        unsigned char marker = d[i + 1];
        if (marker == 0xFF) {  /* fill byte */
            i++;
            continue;
        }
        if (marker == 0xD9)
            return NULL;
        if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
            i += 2;
            continue;
        }
        size_t length = (size_t)d[i + 2] << 8 | d[i + 3];
        if (length < 2 || length > n - i - 2)
            break;
        if (marker == 0xC4 && !jpeg_huffman_tables_valid(d + i + 4, length - 2, t))
            return "corrupt JPEG (Huffman table)";
        if (marker == 0xC2)
            t->progressive = 1;
        if (marker == 0xDA)
            jpeg_scan_tables(d + i + 4, length - 2, t);
        i += 2 + length;
        if (marker != 0xDA)
            continue;
        /* entropy-coded data: runs to the next marker that is not a stuffed
         * zero or a restart marker */
        while (i + 1 < n && !(d[i] == 0xFF && d[i + 1] != 0x00 &&
                              !(d[i + 1] >= 0xD0 && d[i + 1] <= 0xD7)))
            i++;
    }
    if (i + 2 <= n && d[i] == 0xFF && d[i + 1] == 0xD9)
        return NULL;
    return "truncated file (the image data ends early)";
}

/* The chunks must run whole from the signature to IEND. */
static int png_is_complete(const unsigned char *d, size_t n)
{
    size_t i = 8;
    while (i + 12 <= n) {
        size_t length = be32(d + i);
        if (memcmp(d + i + 4, "IEND", 4) == 0)
            return 1;
        if (length > n - i - 12)
            return 0;
        i += 12 + length;
    }
    return 0;
}

/* stb_image 2.27 reads the numbers of a PNM header into an int without an
 * overflow check (found by fuzzing): refuse a header number of more than 9
 * digits before it gets there. */
static const char *pnm_problem(const unsigned char *d, size_t n)
{
    size_t i = 2;
    for (int number = 0; number < 3; number++) {
        for (;;) {  /* white space and comments, as stb skips them */
            while (i < n && (d[i] == ' ' || (d[i] >= '\t' && d[i] <= '\r')))
                i++;
            if (i >= n || d[i] != '#')
                break;
            while (i < n && d[i] != '\n' && d[i] != '\r')
                i++;
        }
        size_t digits = 0;
        while (i < n && d[i] >= '0' && d[i] <= '9') {
            i++;
            if (++digits > 9)
                return "corrupt PNM (a header number is too large)";
        }
    }
    return NULL;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t le16(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

/* stb_image pads a BMP or TGA whose pixel data ends early with zeros; for
 * the uncompressed layouts the size the pixels need is known, so a file
 * shorter than that is refused. */
static const char *bmp_problem(const unsigned char *d, size_t n)
{
    if (n < 34)
        return NULL;  /* too short for stb to read a header: it says so itself */
    uint64_t offset = le32(d + 10), width = le32(d + 18), bpp = le16(d + 28), compression = le32(d + 30);
    int32_t height = (int32_t)le32(d + 22);
    if (le32(d + 14) < 40 || (compression != 0 && compression != 3) || bpp == 0 || width > (1u << 24))
        return NULL;  /* OS/2 headers and RLE: left to stb */
    uint64_t rows = height < 0 ? (uint64_t)(-(int64_t)height) : (uint64_t)height;
    uint64_t stride = (width * bpp + 31) / 32 * 4;
    return offset + stride * rows > n ? "truncated file (the image data ends early)" : NULL;
}

static const char *tga_problem(const unsigned char *d, size_t n)
{
    int type = d[2];
    if (type != 1 && type != 2 && type != 3)
        return NULL;  /* RLE types: left to stb */
    uint64_t map_bytes = d[1] ? (uint64_t)le16(d + 5) * ((d[7] + 7u) / 8) : 0;
    uint64_t pixels = (uint64_t)le16(d + 12) * le16(d + 14);
    uint64_t needed = 18 + d[0] + map_bytes + pixels * ((d[16] + 7u) / 8);
    return needed > n ? "truncated file (the image data ends early)" : NULL;
}

/* TGA has no signature: the same test stb_image makes. */
static int looks_like_tga(const unsigned char *d, size_t n)
{
    if (n < 18 || d[1] > 1)
        return 0;
    int type = d[2];
    if (type != 1 && type != 2 && type != 3 && type != 9 && type != 10 && type != 11)
        return 0;
    int bpp = d[16];
    return le16(d + 12) > 0 && le16(d + 14) > 0 && (bpp == 8 || bpp == 15 || bpp == 16 ||
                                                     bpp == 24 || bpp == 32);
}

/* NULL, or why a file stb_image would accept must still be refused; for a
 * JPEG, what its walk found about its Huffman tables. */
static const char *container_problem(const unsigned char *d, size_t n, jpeg_tables *tables)
{
    if (n >= 2 && d[0] == 'P' && (d[1] == '5' || d[1] == '6'))
        return pnm_problem(d, n);
    if (n >= 2 && d[0] == 'B' && d[1] == 'M')
        return bmp_problem(d, n);
    if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
        return png_is_complete(d, n) ? NULL : "truncated file (the image data ends early)";
    /* stb_image takes any run of 0xFF bytes before D8 as the SOI marker */
    size_t i = 0;
    while (i < n && d[i] == 0xFF)
        i++;
    if (i > 0 && i < n && d[i] == 0xD8)
        return jpeg_problem(d, n, i + 1, tables);
    if (looks_like_tga(d, n))
        return tga_problem(d, n);
    return NULL;
}

int gf_image_probe_memory(const unsigned char *data, size_t size, const char *name,
                          gf_image_probe *probe)
{
    memset(probe, 0, sizeof *probe);
    if (size == 0) {
        gf_set_error("%s: empty file", name);
        return -1;
    }
    if (size > INT_MAX) {
        gf_set_error("%s: file too large to decode (over 2 GiB)", name);
        return -1;
    }
    jpeg_tables tables = {0};
    const char *problem = container_problem(data, size, &tables);
    if (problem) {
        gf_set_error("%s: %s", name, problem);
        return -1;
    }
    probe->jpeg_undefined_tables = tables.undefined_used;
    int width, height, channels;
    if (!stbi_info_from_memory(data, (int)size, &width, &height, &channels)) {
        gf_set_error("%s: not an image in a format this tool reads (%s)", name, stbi_failure_reason());
        return -1;
    }
    if (width < 1 || height < 1) {  /* stb_image 2.27 accepts a PNM 0 pixels wide */
        gf_set_error("%s: corrupt image (%dx%d pixels)", name, width, height);
        return -1;
    }
    if ((size_t)width * (size_t)height > max_pixels) {
        gf_set_error("%s: %dx%d is %zu pixels, over the limit of %zu (--max-pixels)", name, width,
                     height, (size_t)width * (size_t)height, max_pixels);
        return -1;
    }
    probe->width = width;
    probe->height = height;
    probe->channels = channels;
    return 0;
}

/* The pixels of a probed file: libjpeg-turbo for a JPEG, else stb_image. */
static unsigned char *decode_pixels(const unsigned char *data, size_t size, const char *name,
                                    const gf_image_probe *probe, int *width, int *height,
                                    int *channels)
{
    unsigned char *pixels = NULL;
    if (size >= 2 && data[0] == 0xFF && data[1] == 0xD8) {
        int w, h, c;
        pixels = gf_jpeg_turbo_decode(data, size, &w, &h, &c);
        /* the same shape stb_image reported, or stb_image decodes it */
        if (pixels && (w != probe->width || h != probe->height || c != probe->channels)) {
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
    pixels = stbi_load_from_memory(data, (int)size, width, height, channels, 0);
    if (!pixels)
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
    *img = (gf_image){width, height, channels, pixels, reserved};
    return img;
}

gf_image *gf_image_load_memory(const unsigned char *data, size_t size, const char *name)
{
    gf_image_probe probe;
    if (gf_image_probe_memory(data, size, name, &probe) < 0)
        return NULL;
    const size_t reserved = gf_image_memory_estimate(probe.width, probe.height, probe.channels);
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
    unsigned char *data;
    size_t size, capacity;
    int failed;
} byte_buffer;

static void append_bytes(void *context, void *data, int size)
{
    byte_buffer *b = context;
    if (b->failed || size <= 0)
        return;
    if (b->size + (size_t)size > b->capacity) {
        size_t capacity = b->capacity ? b->capacity : 1 << 16;
        while (capacity < b->size + (size_t)size)
            capacity *= 2;
        unsigned char *bigger = realloc(b->data, capacity);
        if (!bigger) {
            b->failed = 1;
            return;
        }
        b->data = bigger;
        b->capacity = capacity;
    }
    memcpy(b->data + b->size, data, (size_t)size);
    b->size += (size_t)size;
}

int gf_image_encode(const gf_image *img, gf_format format, int quality,
                    unsigned char **data, size_t *size)
{
    byte_buffer b = {0};
    int ok = 0;
    const int w = img->width, h = img->height, c = img->channels;
    /* JPEG and TGA store each side in 16 bits; stb_image_write would cut it */
    if ((format == GF_FORMAT_JPEG || format == GF_FORMAT_TGA) && (w > 65535 || h > 65535)) {
        gf_set_error("cannot encode a %dx%d image as %s: it holds at most 65535 pixels a side", w,
                     h, gf_format_name(format));
        return -1;
    }
    switch (format) {
    case GF_FORMAT_PNG:
        if ((size_t)w * (size_t)c > INT_MAX) {
            gf_set_error("image too wide for PNG encoding");
            return -1;
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
        free(b.data);
        gf_set_error("cannot encode the image as %s%s", gf_format_name(format),
                     b.failed ? ": out of memory" : "");
        return -1;
    }
    *data = b.data;
    *size = b.size;
    return 0;
}
