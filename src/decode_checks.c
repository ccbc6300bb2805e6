/* decode_checks.c - the checks of decode_checks.h. stb_image 2.27 decodes
 * from memory without complaint when the data ends early: it reads zeros
 * (or leaves its buffers as they were) past the end, and allocates what the
 * header declares before it reads any pixel. Every walk here reads only
 * within the file and takes at most one step per byte of it. */
#include "decode_checks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "util.h"

static const char truncated[] = "truncated file (the image data ends early)";

static int refuse(const char *name, const char *problem)
{
    gf_set_error("%s: %s", name, problem);
    return -1;
}

/* The plausibility checks' refusal: 'capacity' is the most pixels (or, for
 * JPEG, 8x8 blocks) 'size' bytes of the format can decode to. */
static int check_declared_size(const char *name, const char *format, uint64_t width,
                               uint64_t height, uint64_t needed, uint64_t capacity, size_t size)
{
    if (needed <= capacity)
        return 0;
    gf_set_error("%s: corrupt %s (the header declares %llux%llu pixels, more than %zu bytes of "
                 "data can hold)", name, format, (unsigned long long)width,
                 (unsigned long long)height, size);
    return -1;
}

/* ---- JPEG ------------------------------------------------------------------ */

/* A DHT segment's tables each declare at most 256 codes. stb_image 2.27
 * writes past its code table when the counts add up to more (found by
 * fuzzing), so such files are refused before they reach it. */
static int jpeg_huffman_tables_valid(const unsigned char *d, size_t n, gf_jpeg_tables *t)
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
 * scans with the AC table, its DC refinements with none. libjpeg-turbo
 * takes the standard tables for one never defined (Motion JPEG frames leave
 * them out); stb_image 2.27 reads its own uninitialised memory instead. */
static void jpeg_scan_tables(const unsigned char *s, size_t n, gf_jpeg_tables *t)
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

/* Where a JPEG's markers start: stb_image takes any run of 0xFF bytes
 * before D8 as the SOI marker. 0 when it is no JPEG. */
static size_t jpeg_start(const unsigned char *d, size_t n)
{
    size_t i = 0;
    while (i < n && d[i] == 0xFF)
        i++;
    return i > 0 && i < n && d[i] == 0xD8 ? i + 1 : 0;
}

/* Walk the JPEG markers from i: NULL when the file is whole and sound,
 * otherwise what is wrong. stb_image decodes a JPEG cut short without
 * complaint (it pads the missing scan data), so the markers must reach EOI. */
static const char *jpeg_problem(const unsigned char *d, size_t n, size_t i, gf_jpeg_tables *t)
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
    return truncated;
}

/* The SOF segment (after its length) of a baseline or extended sequential
 * Huffman JPEG, the kinds whose size the data bounds; NULL for others. The
 * markers before it were walked whole by jpeg_problem. */
static const unsigned char *jpeg_sequential_frame(const unsigned char *d, size_t n, size_t *length)
{
    size_t i = jpeg_start(d, n);
    while (i + 4 <= n && d[i] == 0xFF) {
        const unsigned char marker = d[i + 1];
        if (marker == 0xFF || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
            i += marker == 0xFF ? 1 : 2;
            continue;
        }
        const size_t segment = gf_be16(d + i + 2);
        if (marker == 0xDA || marker == 0xD9 || segment < 2 || segment > n - i - 2)
            return NULL;
        if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
            *length = segment - 2;
            return marker <= 0xC1 ? d + i + 4 : NULL;
        }
        i += 2 + segment;
    }
    return NULL;
}

/* A sequential Huffman scan codes every 8x8 block of every component with
 * at least a DC difference and an end of block (or an AC code), each a
 * Huffman code of one bit or more: 4 blocks a byte at most. A component
 * sampled hi x vi of the largest hmax x vmax covers ceil(w * hi / hmax) x
 * ceil(h * vi / vmax) samples, ceil(/ 8) blocks each way (an interleaved
 * scan codes more: whole MCUs). Progressive scans have no such bound (one
 * EOB run ends up to 32767 blocks). */
static int jpeg_size_check(const unsigned char *d, size_t n, const char *name)
{
    size_t length;
    const unsigned char *s = jpeg_sequential_frame(d, n, &length);
    if (!s || length < 6 || length < 6 + 3 * (size_t)s[5])
        return 0;  /* stb_image refuses a short header itself */
    const uint64_t height = gf_be16(s + 1), width = gf_be16(s + 3);
    const int components = s[5];
    uint64_t hmax = 1, vmax = 1;
    for (int k = 0; k < components; k++) {
        const unsigned hv = s[7 + 3 * k];
        if ((hv >> 4) < 1 || (hv >> 4) > 4 || (hv & 15) < 1 || (hv & 15) > 4)
            return 0;  /* stb_image refuses it */
        hmax = (hv >> 4) > hmax ? hv >> 4 : hmax;
        vmax = (hv & 15) > vmax ? hv & 15 : vmax;
    }
    uint64_t blocks = 0;
    for (int k = 0; k < components; k++) {
        const uint64_t hi = s[7 + 3 * k] >> 4, vi = s[7 + 3 * k] & 15;
        const uint64_t cw = (width * hi + hmax - 1) / hmax, ch = (height * vi + vmax - 1) / vmax;
        blocks += (cw + 7) / 8 * ((ch + 7) / 8);
    }
    return check_declared_size(name, "JPEG", width, height, blocks, 4 * (uint64_t)n + 64, n);
}

/* ---- PNG ------------------------------------------------------------------- */

/* The chunks must run whole from the signature to IEND; the IDAT bytes
 * counted on the way. */
static int png_is_complete(const unsigned char *d, size_t n, uint64_t *idat_bytes)
{
    size_t i = 8;
    *idat_bytes = 0;
    while (i + 12 <= n) {
        size_t length = gf_be32(d + i);
        if (memcmp(d + i + 4, "IEND", 4) == 0)
            return 1;
        if (length > n - i - 12)
            return 0;
        if (memcmp(d + i + 4, "IDAT", 4) == 0)
            *idat_bytes += length;
        i += 12 + length;
    }
    return 0;
}

/* Deflate expands a byte to at most 1032 (a 258-byte match in two one-bit
 * codes). The inflated scanlines hold a filter byte per row and every
 * pixel's bits; Adam7 passes hold at least that much (each image row is in
 * some pass row), so the non-interlaced count bounds both layouts. */
static int png_size_check(const unsigned char *d, size_t n, const char *name)
{
    static const unsigned samples[7] = {1, 0, 3, 1, 2, 0, 4};  /* per colour type */
    uint64_t idat;
    if (n < 33 || memcmp(d + 12, "IHDR", 4) != 0 || !png_is_complete(d, n, &idat))
        return 0;
    const uint64_t width = gf_be32(d + 16), height = gf_be32(d + 20), depth = d[24];
    const unsigned type = d[25];
    if (type > 6 || samples[type] == 0 || width > (1u << 24) || height > (1u << 24) || depth > 16)
        return 0;  /* stb_image refuses it */
    const uint64_t raw = height + width * height * depth * samples[type] / 8;
    return check_declared_size(name, "PNG", width, height, raw, 1032 * idat + 1024, n);
}

/* ---- BMP and TGA --------------------------------------------------------------- */

/* A palette BMP's colour indices must stay inside its palette: stb_image
 * 2.27 reads the palette's entries into an uninitialised table of 256 and
 * looks every index up there. Its palette size is the room between the
 * headers and the pixels (3-byte entries after OS/2 headers, counted from
 * 24 bytes as stb does; 4-byte ones otherwise); under 1 entry nothing is
 * read into the table at all. The rows are whole here (checked first). */
static int bmp_palette_check(const unsigned char *d, uint64_t offset, uint64_t header,
                             uint64_t width, uint64_t rows, uint64_t bpp, uint64_t stride,
                             const char *name)
{
    if (bpp != 1 && bpp != 4 && bpp != 8)
        return 0;
    const int64_t room = (int64_t)offset - 14 - (header == 12 ? 24 : (int64_t)header);
    const int64_t entries = header == 12 ? room / 3 : room / 4;
    if (room >= 0 && (entries == 0 || entries > 256))
        return 0;  /* stb refuses it */
    if (room < 0)
        return refuse(name, "corrupt BMP (no room for its palette before the pixels)");
    if (entries >= (1 << bpp))
        return 0;  /* every index is in the palette */
    for (uint64_t y = 0; y < rows; y++) {
        const unsigned char *row = d + offset + y * stride;
        for (uint64_t x = 0; x < width; x++) {
            const unsigned bit = (unsigned)(x * bpp);
            const unsigned index = (row[bit / 8] >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
            if (index >= (unsigned)entries)
                return refuse(name, "corrupt BMP (a colour index past the palette)");
        }
    }
    return 0;
}

/* Uncompressed BMP: each row is padded to 4 bytes; the pixels start at the
 * offset the file header gives. OS/2 1.x headers (12 bytes) hold 16-bit
 * sizes; the others 32-bit ones, negative heights for top-down rows. */
static int bmp_data_check(const unsigned char *d, size_t n, const char *name)
{
    if (n < 26)
        return 0;  /* too short for stb to read a header: it says so itself */
    uint64_t offset = gf_le32(d + 10), header = gf_le32(d + 14), width, rows, bpp;
    if (header == 12) {
        width = gf_le16(d + 18);
        rows = gf_le16(d + 20);
        bpp = gf_le16(d + 24);
    } else {
        if (n < 34 || header < 40)
            return 0;
        const uint64_t compression = gf_le32(d + 30);
        const int32_t height = (int32_t)gf_le32(d + 22);
        width = gf_le32(d + 18);
        rows = height < 0 ? (uint64_t)(-(int64_t)height) : (uint64_t)height;
        bpp = gf_le16(d + 28);
        if (compression != 0 && compression != 3)
            return 0;  /* RLE and embedded JPEG/PNG: stb refuses them */
    }
    if (bpp == 0 || width > (1u << 24) || rows > (1u << 24))
        return 0;  /* stb refuses it */
    const uint64_t stride = (width * bpp + 31) / 32 * 4;
    if (offset + stride * rows > n)
        return refuse(name, truncated);
    return bmp_palette_check(d, offset, header, width, rows, bpp, stride, name);
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
    return gf_le16(d + 12) > 0 && gf_le16(d + 14) > 0 && (bpp == 8 || bpp == 15 || bpp == 16 ||
                                                     bpp == 24 || bpp == 32);
}

/* The RLE packets of a TGA from 'at' until they cover 'pixels' (a packet may
 * run past a row's end): a header byte, then one pixel for a run of (n & 127)
 * + 1, or that many pixels raw. stb_image reads only the pixels it still
 * needs of the last packet. */
static int tga_rle_check(const unsigned char *d, size_t n, size_t at, uint64_t pixels,
                         uint64_t pixel_bytes, const char *name)
{
    uint64_t done = 0;
    while (done < pixels) {
        if (at >= n)
            return refuse(name, truncated);
        const unsigned packet = d[at++];
        const uint64_t count = (packet & 127) + 1, left = pixels - done;
        const uint64_t covered = count < left ? count : left;
        const uint64_t bytes = (packet & 128 ? 1 : covered) * pixel_bytes;
        if (bytes > n - at)
            return refuse(name, truncated);
        at += bytes;
        done += covered;
    }
    return 0;
}

/* A colour-mapped TGA's map follows the image ID; stb_image skips as many
 * bytes as the map's first-entry index before reading it, so they count too.
 * A run packet of one pixel (two bytes or more) covers at most 128 pixels. */
static int tga_data_check(const unsigned char *d, size_t n, const char *name)
{
    const int type = d[2];
    const uint64_t width = gf_le16(d + 12), height = gf_le16(d + 14), pixels = width * height;
    const uint64_t map_bytes = d[1] ? gf_le16(d + 3) + (uint64_t)gf_le16(d + 5) * ((d[7] + 7u) / 8) : 0;
    const uint64_t start = 18 + d[0] + map_bytes, pixel_bytes = (d[16] + 7u) / 8;
    if (type < 8)
        return start + pixels * pixel_bytes > n ? refuse(name, truncated) : 0;
    if (check_declared_size(name, "TGA", width, height, pixels, 128 * (uint64_t)n, n) < 0)
        return -1;
    if (start > n)
        return refuse(name, truncated);
    return tga_rle_check(d, n, (size_t)start, pixels, pixel_bytes, name);
}

/* ---- GIF ------------------------------------------------------------------- */

/* Data sub-blocks from 'at': a length byte and that many bytes, until a
 * length of 0. Where the walk ends (past the 0), or n + 1 when the data ends
 * before the 0. */
static size_t gif_skip_sub_blocks(const unsigned char *d, size_t n, size_t at)
{
    while (at < n && d[at] != 0)
        at += 1 + (size_t)d[at];
    return at < n ? at + 1 : n + 1;
}

/* An extension block after its introducer 0x21, as stb_image reads it: a
 * graphic control extension of a length other than 4 is skipped by that
 * length alone; every other extension runs to its block terminator. */
static size_t gif_skip_extension(const unsigned char *d, size_t n, size_t at)
{
    if (at >= n)
        return n + 1;
    const unsigned label = d[at++];
    if (label == 0xF9) {
        if (at >= n)
            return n + 1;
        const size_t length = d[at++];
        if (length != 4)
            return at + length <= n ? at + length : n + 1;
        at += 4;
        if (at > n)
            return n + 1;
    }
    return gif_skip_sub_blocks(d, n, at);
}

/* The first image from its descriptor (after 0x2C): position and size (8
 * bytes), flags, a local colour table, the LZW code size, then the data
 * sub-blocks, which stb_image reads to their terminator. */
static int gif_image_check(const unsigned char *d, size_t n, size_t at, const char *name)
{
    if (n - at < 9)
        return refuse(name, truncated);
    const unsigned flags = d[at + 8];
    at += 9;
    if (flags & 0x80)
        at += 3 * ((size_t)2 << (flags & 7));
    if (at >= n)
        return refuse(name, truncated);
    if (d[at] > 12)
        return refuse(name, "corrupt GIF (an LZW code size over 12)");
    return gif_skip_sub_blocks(d, n, at + 1) > n ? refuse(name, truncated) : 0;
}

/* stb_image draws the first image onto a canvas of the logical screen's size,
 * which it allocates (16 bytes a pixel) before reading the image. The LZW
 * codes are at most 12 bits, and a code of w bits stands for at most 2^w
 * pixels (a string is at most one pixel longer than the codes added before
 * it), so a byte of data decodes to at most 8 * 4096 / 12 < 2731 pixels.
 * The canvas may be larger than the image, the rest background: 8192 pixels
 * a byte, and 65536 more, leave room for that. The walk then follows the
 * blocks from the header to the first image's data terminator (the rest of
 * the file is never read: a missing trailer 0x3B is fine). */
static int gif_data_check(const unsigned char *d, size_t n, const char *name)
{
    if (n < 13)
        return refuse(name, truncated);
    const uint64_t width = gf_le16(d + 6), height = gf_le16(d + 8);
    if (check_declared_size(name, "GIF", width, height, width * height,
                            8192 * (uint64_t)n + 65536, n) < 0)
        return -1;
    const unsigned flags = d[10];
    size_t at = 13 + (flags & 0x80 ? 3 * ((size_t)2 << (flags & 7)) : 0);
    while (at < n) {
        const unsigned tag = d[at++];
        if (tag == 0x2C)
            return gif_image_check(d, n, at, name);
        if (tag != 0x21)
            return 0;  /* a trailer before any image, or junk: stb refuses it */
        at = gif_skip_extension(d, n, at);
    }
    return refuse(name, truncated);
}

/* ---- PSD ------------------------------------------------------------------- */

/* PackBits as stbi__psd_decode_rle reads it, for 'samples' samples from *at:
 * n < 128 copies n + 1 bytes, n > 128 repeats the next byte 257 - n times,
 * 128 does nothing. */
static int psd_packbits_check(const unsigned char *d, size_t n, size_t *at, uint64_t samples,
                              const char *name)
{
    uint64_t done = 0;
    size_t i = *at;
    while (done < samples) {
        if (i >= n)
            return refuse(name, truncated);
        const unsigned code = d[i++];
        if (code == 128)
            continue;
        const uint64_t count = code < 128 ? code + 1 : 257 - code;
        const uint64_t bytes = code < 128 ? count : 1;
        if (count > samples - done)
            return refuse(name, "corrupt PSD (a PackBits run past the end of a channel)");
        if (bytes > n - i)
            return refuse(name, truncated);
        i += bytes;
        done += count;
    }
    *at = i;
    return 0;
}

/* RLE composite data: a 16-bit byte count per row of each channel, then the
 * rows. The counts' sum must be there, and so must all that stb_image reads:
 * the first four channels, each one PackBits stream of width x height
 * samples (8-bit ones, whatever the depth). */
static int psd_rle_check(const unsigned char *d, size_t n, size_t at, uint64_t channels,
                         uint64_t width, uint64_t height, const char *name)
{
    const uint64_t rows = channels * height;
    if (2 * rows > n - at)
        return refuse(name, truncated);
    uint64_t sum = 0;
    for (uint64_t r = 0; r < rows; r++)
        sum += gf_be16(d + at + 2 * r);
    at += 2 * rows;
    if (sum > n - at)
        return refuse(name, truncated);
    for (uint64_t c = 0; c < channels && c < 4; c++)
        if (psd_packbits_check(d, n, &at, width * height, name) < 0)
            return -1;
    return 0;
}

/* Header (26 bytes), then three sections each led by its 32-bit length
 * (colour mode data, image resources, layers and masks), then the
 * composite image: 16-bit compression, 0 raw (each channel's samples in
 * turn) or 1 RLE. Two bytes of PackBits make at most 128 samples. */
static int psd_data_check(const unsigned char *d, size_t n, const char *name)
{
    if (n < 26)
        return refuse(name, truncated);
    const uint64_t channels = gf_be16(d + 12), height = gf_be32(d + 14), width = gf_be32(d + 18);
    const uint64_t depth = gf_be16(d + 22);
    if (channels == 0)
        return refuse(name, "corrupt PSD (no channels)");
    if (channels > 16 || width > (1u << 24) || height > (1u << 24))
        return 0;  /* stb refuses it */
    if (check_declared_size(name, "PSD", width, height, width * height * channels,
                            64 * (uint64_t)n + 1024, n) < 0)
        return -1;
    size_t at = 26;
    for (int section = 0; section < 3; section++) {
        if (n - at < 4 || gf_be32(d + at) > n - at - 4)
            return refuse(name, truncated);
        at += 4 + gf_be32(d + at);
    }
    if (n - at < 2)
        return refuse(name, truncated);
    const unsigned compression = gf_be16(d + at);
    at += 2;
    if (compression == 1)
        return psd_rle_check(d, n, at, channels, width, height, name);
    if (compression == 0 && channels * height * width * (depth / 8) > n - at)
        return refuse(name, truncated);
    return 0;  /* other compressions: stb refuses them */
}

/* ---- Radiance HDR ------------------------------------------------------------ */

/* The file as stb_image's context reads it: a byte past the end reads 0. */
typedef struct {
    const unsigned char *d;
    size_t n, at;
} hdr_reader;

static int hdr_get8(hdr_reader *r)
{
    return r->at < r->n ? r->d[r->at++] : 0;
}

static int hdr_at_end(const hdr_reader *r)
{
    return r->at >= r->n;
}

/* stbi__hdr_gettoken: a line up to '\n' or the end of the data, of which at
 * most 1023 characters are kept (the rest of a longer line is skipped). */
static void hdr_token(hdr_reader *r, char line[1024])
{
    size_t length = 0;
    char c = (char)hdr_get8(r);
    while (!hdr_at_end(r) && c != '\n') {
        line[length++] = c;
        if (length == 1023) {
            while (!hdr_at_end(r) && hdr_get8(r) != '\n')
                ;
            break;
        }
        c = (char)hdr_get8(r);
    }
    line[length] = 0;
}

/* The header as stbi__hdr_load reads it: the identifier line, lines up to an
 * empty one (one of them the format), then "-Y height +X width". 0 when stb
 * would refuse the header itself. */
static int hdr_read_header(hdr_reader *r, long *width, long *height)
{
    char line[1024];
    hdr_token(r, line);
    if (strcmp(line, "#?RADIANCE") != 0 && strcmp(line, "#?RGBE") != 0)
        return 0;
    int valid = 0;
    for (;;) {
        hdr_token(r, line);
        if (line[0] == 0)
            break;
        if (strcmp(line, "FORMAT=32-bit_rle_rgbe") == 0)
            valid = 1;
    }
    hdr_token(r, line);
    if (!valid || strncmp(line, "-Y ", 3) != 0)
        return 0;
    char *token = line + 3;
    *height = (int)strtol(token, &token, 10);
    while (*token == ' ')
        ++token;
    if (strncmp(token, "+X ", 3) != 0)
        return 0;
    *width = (int)strtol(token + 3, NULL, 10);
    return *width >= 1 && *height >= 1 && *width <= (1 << 24) && *height <= (1 << 24);
}

/* One component of an RLE scanline: a count byte, then for a count over 128
 * a run of count - 128 copies of one byte, else a dump of count bytes. A
 * count of 0 never advances (stb_image loops for ever on it, and a byte
 * past the end reads as 0). */
static int hdr_rle_component_check(hdr_reader *r, long width, const char *name)
{
    long done = 0;
    while (done < width) {
        if (hdr_at_end(r))
            return refuse(name, truncated);
        const int count = hdr_get8(r);
        const long length = count > 128 ? count - 128 : count;
        const size_t bytes = count > 128 ? 1 : (size_t)count;
        if (count == 0)
            return refuse(name, "corrupt HDR (an RLE count of 0)");
        if (length > width - done)
            return refuse(name, "corrupt HDR (an RLE run past the end of a scanline)");
        if (bytes > r->n - r->at)
            return refuse(name, truncated);
        r->at += bytes;
        done += length;
    }
    return 0;
}

/* The pixel data along stbi__hdr_load: flat 4-byte pixels when the width is
 * under 8 or from 32768; otherwise each scanline starts 2, 2, width (16-bit,
 * 4 bytes that must all be there), then its four components RLE-coded in
 * turn. A scanline that does not
 * start 2, 2 (with the width's high bit clear) makes stb take its first 4
 * bytes as the image's first pixel and read the whole image flat from
 * there, wherever it is; a flat read past the end leaves pixels unset. */
static int hdr_pixels_check(hdr_reader *r, long width, long height, const char *name)
{
    const uint64_t flat_bytes = 4 * (uint64_t)width * (uint64_t)height;
    if (width < 8 || width >= 32768)
        return flat_bytes > r->n - r->at ? refuse(name, truncated) : 0;
    for (long row = 0; row < height; row++) {
        const size_t start = r->at;
        if (r->n - start < 4)
            return refuse(name, truncated);
        const int c1 = hdr_get8(r), c2 = hdr_get8(r), high = hdr_get8(r);
        if (c1 != 2 || c2 != 2 || (high & 0x80))
            return flat_bytes > r->n - start ? refuse(name, truncated) : 0;
        if ((high << 8 | hdr_get8(r)) != width)
            return refuse(name, "corrupt HDR (a scanline's length is not the width)");
        for (int component = 0; component < 4; component++)
            if (hdr_rle_component_check(r, width, name) < 0)
                return -1;
    }
    return 0;
}

/* stb_image allocates 12 bytes a pixel before reading any. A run of two
 * bytes makes at most 127 of a pixel's 4 components, a flat pixel takes 4
 * bytes: fewer than 32 pixels a byte either way. */
static int hdr_data_check(const unsigned char *d, size_t n, const char *name)
{
    hdr_reader r = {d, n, 0};
    long width, height;
    if (!hdr_read_header(&r, &width, &height))
        return 0;  /* stb refuses the header itself */
    if (check_declared_size(name, "HDR", (uint64_t)width, (uint64_t)height,
                            (uint64_t)width * (uint64_t)height, 32 * (uint64_t)n + 1024, n) < 0)
        return -1;
    return hdr_pixels_check(&r, width, height, name);
}

/* ---- entry points ------------------------------------------------------------- */

int gf_check_container(const unsigned char *data, size_t size, const char *name,
                       gf_jpeg_tables *tables)
{
    uint64_t idat;
    if (size >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0)
        return png_is_complete(data, size, &idat) ? 0 : refuse(name, truncated);
    const size_t jpeg = jpeg_start(data, size);
    if (jpeg > 0) {
        const char *problem = jpeg_problem(data, size, jpeg, tables);
        return problem ? refuse(name, problem) : 0;
    }
    return 0;
}

int gf_check_image_data(const unsigned char *data, size_t size, const char *name)
{
    const unsigned char *d = data;
    if (size >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
        return png_size_check(d, size, name);
    if (jpeg_start(d, size) > 0)
        return jpeg_size_check(d, size, name);
    if (size >= 2 && d[0] == 'B' && d[1] == 'M')
        return bmp_data_check(d, size, name);
    if (size >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return gif_data_check(d, size, name);
    if (size >= 4 && memcmp(d, "8BPS", 4) == 0)
        return psd_data_check(d, size, name);
    if ((size >= 11 && memcmp(d, "#?RADIANCE\n", 11) == 0) ||
        (size >= 7 && memcmp(d, "#?RGBE\n", 7) == 0))
        return hdr_data_check(d, size, name);
    if (looks_like_tga(d, size))
        return tga_data_check(d, size, name);
    return 0;
}
