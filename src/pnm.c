/* pnm.c - binary PGM and PPM (netpbm's P5 and P6). stb_image 2.27 keeps
 * the low byte of 16-bit samples, does not scale by maxval, and reads past
 * the end of a short file; this decoder replaces it for PNM. A maxval up
 * to 255 gives 8-bit samples, a larger one 16-bit samples. */
#include "pnm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "util.h"

static const char truncated[] = "truncated file (the image data ends early)";

/* netpbm's white space: blank, tab, and the line and page breaks */
static int is_white(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Past white space and comments ('#' to the end of the line) from *at;
 * -1 when none is there, or the data ends. */
static int skip_separator(const unsigned char *d, size_t n, size_t *at)
{
    size_t i = *at;
    while (i < n && (is_white(d[i]) || d[i] == '#')) {
        if (d[i] == '#')
            while (i < n && d[i] != '\n' && d[i] != '\r')
                i++;
        else
            i++;
    }
    const int found = i > *at && i < n;
    *at = i;
    return found ? 0 : -1;
}

/* A decimal header number at *at of at most 9 digits (it then fits an int),
 * followed by white space or a comment; -1 when none is there. */
static int read_number(const unsigned char *d, size_t n, size_t *at, long *value, const char *name)
{
    size_t i = *at;
    long v = 0;
    while (i < n && d[i] >= '0' && d[i] <= '9') {
        if (i - *at == 9) {
            gf_set_error("%s: corrupt PNM (a header number is too large)", name);
            return -1;
        }
        v = v * 10 + (d[i++] - '0');
    }
    if (i == *at || i >= n || !(is_white(d[i]) || d[i] == '#')) {
        gf_set_error("%s: %s", name, i >= n ? truncated
                                            : "corrupt PNM (the header is not width, height, maxval)");
        return -1;
    }
    *at = i;
    *value = v;
    return 0;
}

int gf_pnm_is_binary(const unsigned char *data, size_t size)
{
    return size >= 2 && data[0] == 'P' && (data[1] == '5' || data[1] == '6');
}

int gf_pnm_read_header(const unsigned char *data, size_t size, const char *name,
                       gf_pnm_header *header)
{
    long numbers[3];
    size_t at = 2;
    for (int k = 0; k < 3; k++) {
        if (skip_separator(data, size, &at) < 0) {
            gf_set_error("%s: %s", name, at >= size ? truncated
                                                    : "corrupt PNM (the header is not width, height, maxval)");
            return -1;
        }
        if (read_number(data, size, &at, &numbers[k], name) < 0)
            return -1;
    }
    if (!is_white(data[at])) {  /* a comment straight after maxval */
        gf_set_error("%s: corrupt PNM (no white space byte after maxval)", name);
        return -1;
    }
    if (numbers[0] < 1 || numbers[1] < 1) {
        gf_set_error("%s: corrupt PNM (%ldx%ld pixels)", name, numbers[0], numbers[1]);
        return -1;
    }
    if (numbers[2] < 1 || numbers[2] > 65535) {
        gf_set_error("%s: corrupt PNM (maxval %ld, not 1 to 65535)", name, numbers[2]);
        return -1;
    }
    *header = (gf_pnm_header){(int)numbers[0], (int)numbers[1], data[1] == '5' ? 1 : 3,
                              (unsigned)numbers[2], at + 1};
    return 0;
}

/* Samples in the file: width * height * channels; 0 on overflow. */
static size_t sample_count(const gf_pnm_header *h)
{
    size_t pixels, samples;
    if (gf_mul_size((size_t)h->width, (size_t)h->height, &pixels) < 0 ||
        gf_mul_size(pixels, (size_t)h->channels, &samples) < 0)
        return 0;
    return samples;
}

int gf_pnm_check_data(size_t size, const gf_pnm_header *header, const char *name)
{
    const size_t samples = sample_count(header), sample_bytes = header->maxval > 255 ? 2 : 1;
    size_t bytes;
    if (samples == 0 || gf_mul_size(samples, sample_bytes, &bytes) < 0 ||
        header->data_offset > size || bytes > size - header->data_offset) {
        gf_set_error("%s: %s", name, truncated);
        return -1;
    }
    return 0;
}

/* Every 1-byte sample through a table of maxval + 1 entries:
 * round(v * 255 / maxval), in integers. 1, or 0 when a sample is over maxval. */
static int scale_samples(const unsigned char *in, size_t samples, unsigned maxval,
                         unsigned char *out)
{
    unsigned char table[256];
    for (uint32_t v = 0; v <= maxval; v++)
        table[v] = (unsigned char)((v * 255 + maxval / 2) / maxval);
    int ok = 1;
    for (size_t i = 0; i < samples && ok; i++) {
        ok = in[i] <= maxval;
        out[i] = ok ? table[in[i]] : 0;
    }
    return ok;
}

/* Every 2-byte (big-endian) sample to round(v * 65535 / maxval) in the
 * host's order, in integers (65535: unchanged). 1, or 0 when a sample is
 * over maxval, -1 without memory. */
static int scale_samples16(const unsigned char *in, size_t samples, unsigned maxval,
                           uint16_t *out)
{
    uint16_t *table = malloc(((size_t)maxval + 1) * sizeof *table);
    if (!table)
        return -1;
    for (uint32_t v = 0; v <= maxval; v++)
        table[v] = (uint16_t)(((uint64_t)v * 65535 + maxval / 2) / maxval);
    int ok = 1;
    for (size_t i = 0; i < samples && ok; i++) {
        const unsigned v = gf_be16(in + 2 * i);
        ok = v <= maxval;
        out[i] = ok ? table[v] : 0;
    }
    free(table);
    return ok;
}

unsigned char *gf_pnm_decode(const unsigned char *data, size_t size, const gf_pnm_header *header,
                             const char *name)
{
    if (gf_pnm_check_data(size, header, name) < 0)
        return NULL;
    const size_t samples = sample_count(header);
    const int wide = header->maxval > 255;
    unsigned char *pixels = malloc(samples * (wide ? 2 : 1));  /* gf_pnm_check_data: no overflow */
    if (!pixels) {
        gf_set_error("%s: out of memory for a %dx%d image", name, header->width, header->height);
        return NULL;
    }
    const unsigned char *in = data + header->data_offset;
    if (header->maxval == 255) {
        memcpy(pixels, in, samples);
        return pixels;
    }
    const int scaled = wide ? scale_samples16(in, samples, header->maxval, (uint16_t *)(void *)pixels)
                            : scale_samples(in, samples, header->maxval, pixels);
    if (scaled <= 0) {
        free(pixels);
        if (scaled < 0)
            gf_set_error("%s: out of memory", name);
        else
            gf_set_error("%s: corrupt PNM (a sample is over maxval %u)", name, header->maxval);
        return NULL;
    }
    return pixels;
}
