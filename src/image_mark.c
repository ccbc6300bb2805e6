/* image_mark.c - the mark gpufilter leaves in the PNG and JPEG files it
 * writes (a PNG tEXt chunk "Software" = "gpufilter", a JPEG COM segment
 * "gpufilter"), and the test for it. The mark lets a command be run again
 * over its own output, while an existing image of any other origin, most
 * likely a second input typed by mistake, is not replaced unless asked. */
#include "image.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bytes.h"
#include "util.h"

static const char png_keyword[] = "Software";
static const char mark_text[] = "gpufilter";

/* Insert 'extra' at 'at' in the heap buffer *data of *size bytes. */
static int insert_bytes(unsigned char **data, size_t *size, size_t at, const unsigned char *extra,
                        size_t n)
{
    unsigned char *bigger = realloc(*data, *size + n);
    if (!bigger)
        return -1;
    memmove(bigger + at + n, bigger + at, *size - at);
    memcpy(bigger + at, extra, n);
    *data = bigger;
    *size += n;
    return 0;
}

/* The tEXt chunk goes right after IHDR (signature 8 bytes, IHDR 25). */
static int mark_png(unsigned char **data, size_t *size)
{
    if (*size < 33 || memcmp(*data + 12, "IHDR", 4) != 0)
        return 0;
    unsigned char chunk[4 + 4 + sizeof png_keyword + sizeof mark_text - 1 + 4];
    const size_t text = sizeof png_keyword + sizeof mark_text - 1;  /* keyword NUL value */
    gf_put_be32(chunk, (uint32_t)text);
    memcpy(chunk + 4, "tEXt", 4);
    memcpy(chunk + 8, png_keyword, sizeof png_keyword);
    memcpy(chunk + 8 + sizeof png_keyword, mark_text, sizeof mark_text - 1);
    gf_put_be32(chunk + 8 + text, gf_png_crc32(chunk + 4, 4 + text));
    return insert_bytes(data, size, 33, chunk, sizeof chunk);
}

/* The COM segment goes after SOI and, where there is one, the JFIF APP0
 * segment, which must come first. */
static int mark_jpeg(unsigned char **data, size_t *size)
{
    const unsigned char *d = *data;
    if (*size < 4 || d[0] != 0xFF || d[1] != 0xD8)
        return 0;
    size_t at = 2;
    if (*size >= 6 && d[2] == 0xFF && d[3] == 0xE0)
        at = 4 + (size_t)gf_be16(d + 4);
    if (at > *size)
        return 0;
    unsigned char segment[4 + sizeof mark_text - 1];
    segment[0] = 0xFF;
    segment[1] = 0xFE;
    segment[2] = 0;
    segment[3] = (unsigned char)(2 + sizeof mark_text - 1);
    memcpy(segment + 4, mark_text, sizeof mark_text - 1);
    return insert_bytes(data, size, at, segment, sizeof segment);
}

int gf_image_mark(gf_format format, unsigned char **data, size_t *size)
{
    int status = format == GF_FORMAT_PNG    ? mark_png(data, size)
                 : format == GF_FORMAT_JPEG ? mark_jpeg(data, size)
                                            : 0;
    if (status < 0)
        gf_set_error("out of memory");
    return status;
}

static int png_has_mark(const unsigned char *d, size_t n)
{
    size_t i = 8;
    while (i + 12 <= n) {
        const size_t length = gf_be32(d + i);
        if (length > n - i - 12 || memcmp(d + i + 4, "IDAT", 4) == 0)
            return 0;
        if (memcmp(d + i + 4, "tEXt", 4) == 0 && length >= sizeof png_keyword + sizeof mark_text - 1 &&
            memcmp(d + i + 8, png_keyword, sizeof png_keyword) == 0 &&
            memcmp(d + i + 8 + sizeof png_keyword, mark_text, sizeof mark_text - 1) == 0)
            return 1;
        i += 12 + length;
    }
    return 0;
}

static int jpeg_has_mark(const unsigned char *d, size_t n)
{
    size_t i = 2;
    while (i + 4 <= n && d[i] == 0xFF && d[i + 1] != 0xDA) {
        const size_t length = gf_be16(d + i + 2);
        if (d[i + 1] == 0xFE && length >= 2 + sizeof mark_text - 1 && i + 4 + sizeof mark_text - 1 <= n &&
            memcmp(d + i + 4, mark_text, sizeof mark_text - 1) == 0)
            return 1;
        i += 2 + length;
    }
    return 0;
}

int gf_image_has_mark(const unsigned char *data, size_t size)
{
    if (size >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0)
        return png_has_mark(data, size);
    if (size >= 2 && data[0] == 0xFF && data[1] == 0xD8)
        return jpeg_has_mark(data, size);
    return 0;
}

int gf_image_foreign_output(const char *output, const char *input)
{
    struct stat out, in;
    if (stat(output, &out) < 0 || !S_ISREG(out.st_mode))
        return 0;
    if (input && stat(input, &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
        return 0;  /* the input itself, named twice on purpose */
    size_t size;
    unsigned char *data = gf_read_input(output, &size);
    if (!data)
        return 0;  /* unreadable: the write reports it */
    gf_image_probe probe;
    const int image = gf_image_probe_memory(data, size, output, &probe) == 0;
    const int foreign = image && !gf_image_has_mark(data, size);
    free(data);
    return foreign;
}
