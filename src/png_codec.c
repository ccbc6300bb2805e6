/* png_codec.c - PNG on libdeflate: decode (one inflate of all IDAT data,
 * then unfilter and expand to stb_image's 8-bit result) and encode (the
 * rows filtered and deflated in bands on threads, joined into one zlib
 * stream). See png_codec.h for what is left to stb_image. */
#include "png_codec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Adler-32 of a concatenation (zlib's adler32_combine). */
uint32_t gf_adler32_combine(uint32_t adler_a, uint32_t adler_b, size_t length_b)
{
    const uint32_t base = 65521;
    const uint32_t rem = (uint32_t)(length_b % base);
    uint32_t sum1 = adler_a & 0xffff;
    uint32_t sum2 = (uint32_t)(((uint64_t)rem * sum1) % base);
    sum1 += (adler_b & 0xffff) + base - 1;
    sum2 += ((adler_a >> 16) & 0xffff) + ((adler_b >> 16) & 0xffff) + base - rem;
    if (sum1 >= base)
        sum1 -= base;
    if (sum1 >= base)
        sum1 -= base;
    if (sum2 >= 2 * base)
        sum2 -= 2 * base;
    if (sum2 >= base)
        sum2 -= base;
    return sum1 | (sum2 << 16);
}

#ifndef GF_HAVE_LIBDEFLATE

int gf_png_decode(const unsigned char *data, size_t size, const char *name,
                  unsigned char **pixels, int *width, int *height, int *channels,
                  const char **corrupt)
{
    (void)data, (void)size, (void)name, (void)pixels, (void)width, (void)height, (void)channels;
    *corrupt = NULL;
    return GF_PNG_NOT_HANDLED;
}

int gf_png_encode(const unsigned char *pixels, int width, int height, int channels, int level,
                  unsigned char **out, size_t *out_size)
{
    (void)pixels, (void)width, (void)height, (void)channels, (void)level, (void)out, (void)out_size;
    return GF_PNG_NOT_HANDLED;
}

int gf_png_zlib_bands(const unsigned char *data, size_t size, size_t band_size, int level,
                      int threads, unsigned char **out, size_t *out_size)
{
    (void)data, (void)size, (void)band_size, (void)level, (void)threads, (void)out, (void)out_size;
    gf_set_error("PNG bands need libdeflate");
    return -1;
}

#else

#include <libdeflate.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "bytes.h"

/* ==== decode ================================================================ */

/* What the chunks before IEND said, as stb_image 2.27 keeps it. */
typedef struct {
    uint32_t width, height;
    int depth, color, interlace;
    int samples;                  /* per pixel in the data: 1..4 (palette: 1) */
    int palette_alpha;            /* a palette image with tRNS: RGBA out */
    unsigned palette_entries;     /* entries any PLTE defined (stb's array is uninitialised past them) */
    unsigned char palette[1024];  /* RGBA; alpha 255 unless tRNS */
    int has_trans;                /* gray / RGB tRNS: one more channel out */
    uint8_t trans8[3];            /* the key as stb scales it (depth <= 8) */
    uint16_t trans16[3];          /* the key at depth 16 */
    unsigned char *idat;
    size_t idat_size, idat_capacity;
    const char *name;
} png_state;

#define CHUNK(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (uint32_t)(d))

static int corrupt_png(const png_state *s, const char *what)
{
    gf_set_error("%s: corrupt PNG (%s)", s->name, what);
    return GF_PNG_FAILED;
}

/* Colour type and depth pairs of the PNG spec; stb_image takes a few more. */
static int standard_depth(int color, int depth)
{
    switch (color) {
    case 0: return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
    case 3: return depth <= 8;
    default: return depth == 8 || depth == 16;
    }
}

static int read_ihdr(png_state *s, const unsigned char *p, uint32_t length)
{
    if (length != 13)
        return corrupt_png(s, "IHDR is not 13 bytes");
    s->width = gf_be32(p);
    s->height = gf_be32(p + 4);
    s->depth = p[8];
    s->color = p[9];
    s->interlace = p[12];
    const int d = s->depth;
    if (s->width == 0 || s->height == 0 || s->width > (1u << 24) || s->height > (1u << 24))
        return corrupt_png(s, "bad image size in IHDR");
    if ((d != 1 && d != 2 && d != 4 && d != 8 && d != 16) || s->color > 6 ||
        (s->color == 3 && d == 16) || (s->color != 3 && (s->color & 1)) || p[10] || p[11] ||
        s->interlace > 1)
        return corrupt_png(s, "bad IHDR");
    if (s->interlace || !standard_depth(s->color, d))
        return GF_PNG_NOT_HANDLED;
    s->samples = s->color == 3 ? 1 : (s->color & 2 ? 3 : 1) + (s->color & 4 ? 1 : 0);
    const int limit_n = s->color == 3 ? 4 : s->samples;
    if ((1u << 30) / s->width / (uint32_t)limit_n < s->height)
        return corrupt_png(s, "image too large");
    return GF_PNG_DONE;
}

static int read_plte(png_state *s, const unsigned char *p, uint32_t length)
{
    if (length > 256 * 3 || length % 3)
        return corrupt_png(s, "bad PLTE length");
    const unsigned entries = length / 3;
    for (unsigned i = 0; i < entries; i++) {
        memcpy(s->palette + 4 * i, p + 3 * i, 3);
        s->palette[4 * i + 3] = 255;
    }
    s->palette_entries = entries > s->palette_entries ? entries : s->palette_entries;
    return GF_PNG_DONE;
}

/* stb_image keeps the palette length of the last PLTE for tRNS's checks. */
static int read_trns(png_state *s, const unsigned char *p, uint32_t length, unsigned palette_len)
{
    static const uint8_t depth_scale[17] = {0, 0xff, 0x55, 0, 0x11, 0, 0, 0, 1};
    if (s->idat_size)
        return corrupt_png(s, "tRNS after IDAT");
    if (s->color == 3) {
        if (palette_len == 0)
            return corrupt_png(s, "tRNS before PLTE");
        if (length > palette_len)
            return corrupt_png(s, "tRNS longer than the palette");
        s->palette_alpha = 1;
        for (uint32_t i = 0; i < length; i++)
            s->palette[4 * i + 3] = p[i];
        return GF_PNG_DONE;
    }
    if (!(s->samples & 1))
        return corrupt_png(s, "tRNS on an image with alpha");
    if (length != (uint32_t)s->samples * 2)
        return corrupt_png(s, "bad tRNS length");
    s->has_trans = 1;
    for (int k = 0; k < s->samples; k++) {
        s->trans16[k] = (uint16_t)gf_be16(p + 2 * k);
        /* stb: (stbi_uc)(v & 255) * scale, stored in a byte */
        s->trans8[k] = (uint8_t)((gf_be16(p + 2 * k) & 255) * depth_scale[s->depth]);
    }
    return GF_PNG_DONE;
}

/* The IDAT bytes of the whole file, counted on a first walk of the chunks. */
static size_t count_idat(const unsigned char *data, size_t size)
{
    size_t total = 0;
    for (size_t i = 8; size - i >= 12;) {
        const size_t length = gf_be32(data + i);
        if (memcmp(data + i + 4, "IEND", 4) == 0 || length > size - i - 12)
            break;
        if (memcmp(data + i + 4, "IDAT", 4) == 0)
            total += length;
        i += 12 + length;
    }
    return total;
}

static int read_chunk(png_state *s, uint32_t type, const unsigned char *p, uint32_t length,
                      int *first, unsigned *palette_len)
{
    if (type == CHUNK('C', 'g', 'B', 'I'))
        return GF_PNG_NOT_HANDLED;  /* Apple's variant: stb's de_iphone */
    if (*first && type != CHUNK('I', 'H', 'D', 'R'))
        return corrupt_png(s, "the first chunk is not IHDR");
    switch (type) {
    case CHUNK('I', 'H', 'D', 'R'):
        if (!*first)
            return corrupt_png(s, "two IHDR chunks");
        *first = 0;
        return read_ihdr(s, p, length);
    case CHUNK('P', 'L', 'T', 'E'):
        *palette_len = length / 3;
        return read_plte(s, p, length);
    case CHUNK('t', 'R', 'N', 'S'):
        return read_trns(s, p, length, *palette_len);
    case CHUNK('I', 'D', 'A', 'T'):
        if (s->color == 3 && *palette_len == 0)
            return corrupt_png(s, "no PLTE before IDAT");
        if (length > s->idat_capacity - s->idat_size)
            return corrupt_png(s, "IDAT");  /* not reached: count_idat saw the same chunks */
        memcpy(s->idat + s->idat_size, p, length);
        s->idat_size += length;
        return GF_PNG_DONE;
    default:
        /* an unknown critical chunk: stb refuses it with its own words */
        return (type & (1u << 29)) ? GF_PNG_DONE : GF_PNG_NOT_HANDLED;
    }
}

/* The chunks from the signature to IEND; stb_image ignores the CRCs. */
static int read_chunks(png_state *s, const unsigned char *data, size_t size)
{
    int first = 1;
    unsigned palette_len = 0;
    for (size_t i = 8;;) {
        if (size - i < 8)
            return corrupt_png(s, "cut short before IEND");
        const uint32_t length = gf_be32(data + i), type = gf_be32(data + i + 4);
        if (type == CHUNK('I', 'E', 'N', 'D'))
            return first ? corrupt_png(s, "the first chunk is not IHDR") : GF_PNG_DONE;
        if (size - i < 12 || length > size - i - 12)
            return corrupt_png(s, "a chunk is cut short");
        const int r = read_chunk(s, type, data + i + 8, length, &first, &palette_len);
        if (r != GF_PNG_DONE)
            return r;
        i += 12 + (size_t)length;
    }
}

static inline int paeth(int a, int b, int c)
{
    const int p = a + b - c;
    const int pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    if (pa <= pb && pa <= pc)
        return a;
    return pb <= pc ? b : c;
}

/* Undo one row's filter in place; prior is the row above (zeros for the
 * first row), bpp the bytes per pixel (1 below 8 bits). */
static void unfilter_row(int filter, unsigned char *row, const unsigned char *prior, size_t n,
                         size_t bpp)
{
    size_t i;
    switch (filter) {
    case 1:
        for (i = bpp; i < n; i++)
            row[i] = (unsigned char)(row[i] + row[i - bpp]);
        break;
    case 2:
        for (i = 0; i < n; i++)
            row[i] = (unsigned char)(row[i] + prior[i]);
        break;
    case 3:
        for (i = 0; i < bpp && i < n; i++)
            row[i] = (unsigned char)(row[i] + (prior[i] >> 1));
        for (; i < n; i++)
            row[i] = (unsigned char)(row[i] + ((row[i - bpp] + prior[i]) >> 1));
        break;
    case 4:
        for (i = 0; i < bpp && i < n; i++)
            row[i] = (unsigned char)(row[i] + prior[i]);
        for (; i < n; i++)
            row[i] = (unsigned char)(row[i] + paeth(row[i - bpp], prior[i], prior[i - bpp]));
        break;
    default:
        break;
    }
}

/* Sample x of a row at depth < 8, as stb scales it (gray to 0..255). */
static inline unsigned low_depth_sample(const unsigned char *row, uint32_t x, int depth,
                                        unsigned scale)
{
    const size_t bit = (size_t)x * (size_t)depth;
    const unsigned shift = 8 - (unsigned)depth - (unsigned)(bit & 7);
    return ((row[bit >> 3] >> shift) & ((1u << depth) - 1)) * scale & 255;
}

/* One unfiltered row to stb's 8-bit output; 0, or NOT_HANDLED for a
 * palette index past the defined entries (stb reads uninitialised memory). */
static int expand_row(const png_state *s, const unsigned char *row, unsigned char *out)
{
    static const unsigned depth_scale[9] = {0, 0xff, 0x55, 0, 0x11, 0, 0, 0, 1};
    const uint32_t w = s->width;
    const int n = s->samples, d = s->depth;
    if (s->color == 3) {
        const int out_n = s->palette_alpha ? 4 : 3;
        for (uint32_t x = 0; x < w; x++) {
            const unsigned index = d == 8 ? row[x] : low_depth_sample(row, x, d, 1);
            if (index >= s->palette_entries)
                return GF_PNG_NOT_HANDLED;
            memcpy(out + (size_t)x * (size_t)out_n, s->palette + 4 * index, (size_t)out_n);
        }
        return GF_PNG_DONE;
    }
    if (!s->has_trans) {
        if (d == 8)
            memcpy(out, row, (size_t)w * (size_t)n);
        else if (d == 16)
            for (size_t i = 0; i < (size_t)w * (size_t)n; i++)
                out[i] = row[2 * i];  /* stb: v >> 8 */
        else
            for (uint32_t x = 0; x < w; x++)
                out[x] = (unsigned char)low_depth_sample(row, x, d, depth_scale[d]);
        return GF_PNG_DONE;
    }
    /* gray or RGB with a tRNS key: alpha 0 where every sample matches */
    for (uint32_t x = 0; x < w; x++) {
        unsigned char *o = out + (size_t)x * (size_t)(n + 1);
        int match = 1;
        for (int k = 0; k < n; k++) {
            const size_t i = (size_t)x * (size_t)n + (size_t)k;
            if (d == 16) {
                o[k] = row[2 * i];
                match &= gf_be16(row + 2 * i) == s->trans16[k];
            } else {
                o[k] = d == 8 ? row[i] : (unsigned char)low_depth_sample(row, x, d, depth_scale[d]);
                match &= o[k] == s->trans8[k];
            }
        }
        o[n] = match ? 0 : 255;
    }
    return GF_PNG_DONE;
}

/* Unfilter and expand every row of the inflated data (raw_len bytes). */
static int unfilter_image(const png_state *s, unsigned char *raw, size_t row_bytes,
                          unsigned char *out, size_t out_row)
{
    const size_t bpp = s->depth < 8 ? 1 : (size_t)s->samples * (size_t)s->depth / 8;
    unsigned char *zeros = calloc(1, row_bytes + 1);
    if (!zeros) {
        gf_set_error("%s: out of memory", s->name);
        return GF_PNG_FAILED;
    }
    const unsigned char *prior = zeros;
    int r = GF_PNG_DONE;
    for (uint32_t y = 0; y < s->height && r == GF_PNG_DONE; y++) {
        unsigned char *row = raw + (size_t)y * (row_bytes + 1);
        if (row[0] > 4) {
            r = corrupt_png(s, "a row has an unknown filter");
            break;
        }
        unfilter_row(row[0], row + 1, prior, row_bytes, bpp);
        r = expand_row(s, row + 1, out + (size_t)y * out_row);
        prior = row + 1;
    }
    free(zeros);
    return r;
}

/* The zlib header as stb_image checks it (no Adler-32 check either), then
 * the deflate data into exactly raw_len bytes. */
static int inflate_idat(const png_state *s, unsigned char *raw, size_t raw_len,
                        const char **corrupt)
{
    const unsigned char *z = s->idat;
    if (s->idat_size < 2 || (z[0] * 256 + z[1]) % 31 != 0 || (z[1] & 32) || (z[0] & 15) != 8)
        return corrupt_png(s, "bad zlib header");
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    if (!d) {
        gf_set_error("%s: out of memory", s->name);
        return GF_PNG_FAILED;
    }
    size_t in_used = 0, out_len = 0;
    const enum libdeflate_result r =
        libdeflate_deflate_decompress_ex(d, z + 2, s->idat_size - 2, raw, raw_len, &in_used, &out_len);
    libdeflate_free_decompressor(d);
    if (r == LIBDEFLATE_SUCCESS)
        return out_len < raw_len ? corrupt_png(s, "not enough pixel data") : GF_PNG_DONE;
    /* more data than the pixels need (stb takes it), or data libdeflate
     * refuses: stb_image decides, with this message if it fails too */
    if (r != LIBDEFLATE_INSUFFICIENT_SPACE)
        *corrupt = "bad deflate data in IDAT";
    return GF_PNG_NOT_HANDLED;
}

static int decode_image(png_state *s, unsigned char **pixels, int *channels, const char **corrupt)
{
    const size_t row_bytes = ((size_t)s->samples * s->width * (size_t)s->depth + 7) / 8;
    const size_t raw_len = (row_bytes + 1) * s->height;
    const int out_n = s->color == 3 ? (s->palette_alpha ? 4 : 3) : s->samples + s->has_trans;
    const size_t out_row = (size_t)s->width * (size_t)out_n;
    if (s->idat_size == 0)
        return corrupt_png(s, "no IDAT data");
    unsigned char *raw = malloc(raw_len);
    unsigned char *out = malloc(out_row * s->height);
    int r = raw && out ? GF_PNG_DONE : GF_PNG_FAILED;
    if (r != GF_PNG_DONE)
        gf_set_error("%s: out of memory", s->name);
    if (r == GF_PNG_DONE)
        r = inflate_idat(s, raw, raw_len, corrupt);
    if (r == GF_PNG_DONE)
        r = unfilter_image(s, raw, row_bytes, out, out_row);
    free(raw);
    if (r != GF_PNG_DONE) {
        free(out);
        return r;
    }
    *pixels = out;
    *channels = out_n;
    return GF_PNG_DONE;
}

int gf_png_decode(const unsigned char *data, size_t size, const char *name,
                  unsigned char **pixels, int *width, int *height, int *channels,
                  const char **corrupt)
{
    *corrupt = NULL;
    if (size < 8 || memcmp(data, "\x89PNG\r\n\x1a\n", 8) != 0)
        return GF_PNG_NOT_HANDLED;
    png_state *s = calloc(1, sizeof *s);
    if (!s) {
        gf_set_error("%s: out of memory", name);
        return GF_PNG_FAILED;
    }
    s->name = name;
    s->idat_capacity = count_idat(data, size);
    s->idat = malloc(s->idat_capacity ? s->idat_capacity : 1);
    int r = s->idat ? read_chunks(s, data, size) : GF_PNG_FAILED;
    if (!s->idat)
        gf_set_error("%s: out of memory", name);
    if (r == GF_PNG_DONE)
        r = decode_image(s, pixels, channels, corrupt);
    if (r == GF_PNG_DONE) {
        *width = (int)s->width;
        *height = (int)s->height;
    }
    free(s->idat);
    free(s);
    return r;
}

/* ==== joining deflate streams ============================================== */

/* libdeflate ends every stream with a final block. To join band streams,
 * each but the last is walked block by block (Huffman codes decoded,
 * nothing written) to find its last block's header and its exact end bit;
 * the final bit is cleared, and an empty stored block (3 header bits, the
 * padding, 00 00 FF FF) puts the end on a byte boundary, where the next
 * band's stream starts, as after zlib's Z_SYNC_FLUSH. */

typedef struct {
    const unsigned char *data;
    size_t size, next;  /* next byte to load into buf */
    uint64_t buf;       /* bits past 'count' are zeros or the next bytes' */
    int count;          /* valid bits in buf; below 0: read past the end */
} bit_reader;

/* At least 56 bits in buf, but for the stream's last bytes. */
static inline void refill(bit_reader *b)
{
    if (b->count < 0)
        return;
    if (b->size - b->next >= 8) {
        uint64_t v = 0;
        for (int k = 7; k >= 0; k--)  /* little-endian load; one mov with -O2 */
            v = v << 8 | b->data[b->next + (size_t)k];
        b->buf |= v << b->count;
        b->next += (size_t)(63 - b->count) >> 3;
        b->count |= 56;
        return;
    }
    while (b->count <= 56 && b->next < b->size) {
        b->buf |= (uint64_t)b->data[b->next++] << b->count;
        b->count += 8;
    }
}

static inline void drop_bits(bit_reader *b, unsigned n)
{
    b->buf >>= n;
    b->count -= (int)n;
}

static inline unsigned get_bits(bit_reader *b, unsigned n)
{
    if (b->count < (int)n)
        refill(b);
    const unsigned v = (unsigned)(b->buf & ((1u << n) - 1));
    drop_bits(b, n);
    return v;
}

static size_t bit_position(const bit_reader *b)
{
    return b->next * 8 - (size_t)b->count;
}

/* A canonical Huffman code: a table indexed by the next 'bits' stream bits
 * (at most TABLE_BITS) for the short codes, the counts and the symbols in
 * code order for the longer ones (LONG_CODE in the table). What an entry
 * holds is entry_of's, 0 where no code is: litlen and distance entries
 * the kind in bits 5-6 and the bits to drop (code and extra bits) in bits
 * 0-4; precode entries the symbol above bit 5 and the code length. */
#define TABLE_BITS 11
#define LONG_CODE 0xFFFF

typedef struct {
    uint16_t entry[1 << TABLE_BITS];
    unsigned bits;
    uint16_t count[16];
    uint16_t sorted[288];
    uint16_t (*entry_of)(unsigned sym, unsigned len);
} huffman;

enum { KIND_LITERAL = 1 << 5, KIND_LENGTH = 2 << 5, KIND_END = 3 << 5 };

static uint16_t litlen_entry(unsigned sym, unsigned len)
{
    if (sym < 256)
        return (uint16_t)(KIND_LITERAL | len);
    if (sym == 256)
        return (uint16_t)(KIND_END | len);
    if (sym > 285)
        return 0;
    return (uint16_t)(KIND_LENGTH | (len + (sym >= 265 && sym < 285 ? (sym - 261) / 4 : 0)));
}

static uint16_t dist_entry(unsigned sym, unsigned len)
{
    return sym < 30 ? (uint16_t)(KIND_LITERAL | (len + (sym >= 4 ? sym / 2 - 1 : 0))) : 0;
}

static uint16_t precode_entry(unsigned sym, unsigned len)
{
    return (uint16_t)(sym << 5 | len);
}

static int build_huffman(huffman *h, const uint8_t *lengths, unsigned n,
                         uint16_t (*entry_of)(unsigned sym, unsigned len))
{
    unsigned next_code[16], offset[16], max = 0;
    memset(h->count, 0, sizeof h->count);
    for (unsigned i = 0; i < n; i++) {
        h->count[lengths[i]]++;
        max = lengths[i] > max ? lengths[i] : max;
    }
    h->entry_of = entry_of;
    h->bits = max == 0 ? 1 : max < TABLE_BITS ? max : TABLE_BITS;
    memset(h->entry, 0, sizeof(uint16_t) << h->bits);
    h->count[0] = 0;
    unsigned code = 0;
    offset[1] = 0;
    for (unsigned len = 1; len <= 15; len++) {
        code = (code + h->count[len - 1]) << 1;
        next_code[len] = code;
        if (len > 1)
            offset[len] = offset[len - 1] + h->count[len - 1];
        if (code + h->count[len] > (1u << len))
            return -1;  /* over-subscribed */
    }
    for (unsigned sym = 0; sym < n; sym++) {
        const unsigned len = lengths[sym];
        if (!len)
            continue;
        h->sorted[offset[len]++] = (uint16_t)sym;
        unsigned c = next_code[len]++, rev = 0;
        for (unsigned k = 0; k < len; k++, c >>= 1)
            rev = (rev << 1) | (c & 1);
        if (len > h->bits) {
            h->entry[rev & ((1u << h->bits) - 1)] = LONG_CODE;
            continue;
        }
        const uint16_t e = entry_of(sym, len);
        for (unsigned i = rev; i < (1u << h->bits); i += 1u << len)
            h->entry[i] = e;
    }
    return 0;
}

/* A code longer than the table, bit by bit (zlib's puff); the reader holds
 * 15 bits or more (or zeros past the stream's end). */
static unsigned long_code(const bit_reader *b, const huffman *h)
{
    int code = 0, first = 0, index = 0;
    for (unsigned len = 1; len <= 15; len++) {
        code |= (int)((b->buf >> (len - 1)) & 1);
        const int count = h->count[len];
        if (code - count < first)
            return h->entry_of(h->sorted[index + (code - first)], len);
        index += count;
        first = (first + count) << 1;
        code <<= 1;
    }
    return 0;
}

typedef struct {
    huffman litlen, dist;
} block_codes;

static void fixed_codes(block_codes *codes)
{
    uint8_t lengths[288];
    memset(lengths, 8, 144);
    memset(lengths + 144, 9, 112);
    memset(lengths + 256, 7, 24);
    memset(lengths + 280, 8, 8);
    build_huffman(&codes->litlen, lengths, 288, litlen_entry);
    memset(lengths, 5, 32);
    build_huffman(&codes->dist, lengths, 32, dist_entry);
}

/* The code lengths of a dynamic block, read with the precode. */
static int read_code_lengths(bit_reader *b, const huffman *pre, uint8_t *all, unsigned total)
{
    for (unsigned i = 0; i < total;) {
        if (b->count < 16)
            refill(b);
        const unsigned e = pre->entry[b->buf & ((1u << pre->bits) - 1)];
        if (!e || e == LONG_CODE)  /* precode lengths are 7 bits at most */
            return -1;
        drop_bits(b, e & 31);
        const unsigned sym = e >> 5;
        unsigned repeat = 1, value = sym;
        if (sym == 16) {
            if (i == 0)
                return -1;
            value = all[i - 1], repeat = 3 + get_bits(b, 2);
        } else if (sym == 17) {
            value = 0, repeat = 3 + get_bits(b, 3);
        } else if (sym == 18) {
            value = 0, repeat = 11 + get_bits(b, 7);
        }
        if (repeat > total - i || b->count < 0)
            return -1;
        memset(all + i, (int)value, repeat);
        i += repeat;
    }
    return 0;
}

static int dynamic_codes(bit_reader *b, block_codes *codes)
{
    static const uint8_t order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    const unsigned nlit = get_bits(b, 5) + 257, ndist = get_bits(b, 5) + 1, nclen = get_bits(b, 4) + 4;
    uint8_t lengths[19] = {0}, all[288 + 32] = {0};
    for (unsigned i = 0; i < nclen; i++)
        lengths[order[i]] = (uint8_t)get_bits(b, 3);
    /* the precode's table goes where the litlen table will be built */
    if (nlit > 286 || build_huffman(&codes->litlen, lengths, 19, precode_entry) < 0 ||
        read_code_lengths(b, &codes->litlen, all, nlit + ndist) < 0)
        return -1;
    if (build_huffman(&codes->litlen, all, nlit, litlen_entry) < 0 ||
        build_huffman(&codes->dist, all + nlit, ndist, dist_entry) < 0)
        return -1;
    return 0;
}

/* The codes of one Huffman block, to its end-of-block code. Each turn
 * starts with 48 bits or more in buf (a length and a distance with their
 * extra bits take at most 48), but for the stream's last bytes. */
static int skip_symbols(bit_reader *b, const block_codes *codes)
{
    const unsigned lmask = (1u << codes->litlen.bits) - 1, dmask = (1u << codes->dist.bits) - 1;
    for (;;) {
        if (b->count < 48)
            refill(b);
        unsigned e = codes->litlen.entry[b->buf & lmask];
        if (e == LONG_CODE)
            e = long_code(b, &codes->litlen);
        drop_bits(b, e & 31);
        const unsigned kind = e & (3 << 5);
        if (kind == KIND_LENGTH) {
            e = codes->dist.entry[b->buf & dmask];
            if (e == LONG_CODE)
                e = long_code(b, &codes->dist);
            if (!e)
                return -1;
            drop_bits(b, e & 31);
        } else if (kind != KIND_LITERAL) {
            return kind == KIND_END && b->count >= 0 ? 0 : -1;
        }
        if (b->count < 0)
            return -1;
    }
}

/* Walk a whole deflate stream: where its final block's header bit is and
 * the bit where that block ends; -1 if it is not one complete stream. */
static int walk_stream(const unsigned char *data, size_t size, size_t *final_bit, size_t *end_bit)
{
    bit_reader b = {data, size, 0, 0, 0};
    block_codes *codes = malloc(sizeof *codes);
    int r = codes ? 0 : -1, final = 0;
    while (r == 0 && !final) {
        *final_bit = bit_position(&b);
        final = (int)get_bits(&b, 1);
        const unsigned type = get_bits(&b, 2);
        if (type == 0) {
            drop_bits(&b, (unsigned)b.count % 8);  /* to the byte boundary */
            const unsigned len = get_bits(&b, 16), nlen = get_bits(&b, 16);
            const size_t at = bit_position(&b) / 8;
            if (b.count < 0 || len != (~nlen & 0xffff) || len > size - at)
                r = -1;
            else  /* the reader starts again on the byte after the stored data */
                b = (bit_reader){data, size, at + len, 0, 0};
        } else if (type == 1) {
            fixed_codes(codes);
            r = skip_symbols(&b, codes);
        } else if (type == 2) {
            r = dynamic_codes(&b, codes);
            r = r == 0 ? skip_symbols(&b, codes) : r;
        } else {
            r = -1;
        }
        if (b.count < 0)
            r = -1;
    }
    free(codes);
    *end_bit = r == 0 ? bit_position(&b) : 0;
    return r == 0 && (*end_bit + 7) / 8 == size ? 0 : -1;
}

/* Turn a complete deflate stream (with room for 5 more bytes) into one that
 * goes on: final bit cleared, an empty stored block to the byte boundary. */
static int open_stream(unsigned char *data, size_t *size)
{
    size_t final_bit, end;
    if (walk_stream(data, *size, &final_bit, &end) < 0)
        return -1;
    data[final_bit / 8] &= (unsigned char)~(1u << (final_bit % 8));
    data[end / 8] &= (unsigned char)((1u << (end % 8)) - 1);  /* BFINAL 0, BTYPE 00, padding */
    size_t n = (end + 3 + 7) / 8;
    if (n > (end + 7) / 8)
        data[n - 1] = 0;
    memcpy(data + n, "\x00\x00\xff\xff", 4);
    *size = n + 4;
    return 0;
}

/* ==== bands on threads ======================================================= */

/* The image rows a band filters first (encode), or none (rows == 0). */
typedef struct {
    const unsigned char *pixels;
    int width, channels;
    uint32_t y0, rows;
} band_rows;

typedef struct {
    unsigned char *data;  /* the band's bytes (filtered in place when rows) */
    size_t size;
    band_rows rows;
    int last;
    unsigned char *out;   /* its deflate data */
    size_t out_size;
    uint32_t adler;
    int failed;           /* 1 no memory, 2 the walk did not match */
} band;

typedef struct {
    band *bands;
    size_t count;
    int level;
    atomic_size_t next;
} band_work;

static int filter_rows(const band_rows *r, unsigned char *out);

static void compress_band(band *b, struct libdeflate_compressor *c)
{
    if (b->rows.rows && filter_rows(&b->rows, b->data) < 0) {
        b->failed = 1;
        return;
    }
    b->adler = libdeflate_adler32(1, b->data, b->size);
    const size_t bound = libdeflate_deflate_compress_bound(c, b->size) + 8;
    b->out = malloc(bound);
    if (!b->out) {
        b->failed = 1;
        return;
    }
    b->out_size = libdeflate_deflate_compress(c, b->data, b->size, b->out, bound - 8);
    if (b->out_size == 0)
        b->failed = 1;
    else if (!b->last && open_stream(b->out, &b->out_size) < 0)
        b->failed = 2;
}

/* Each worker takes the next band until none is left. */
static void *band_worker(void *arg)
{
    band_work *w = arg;
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(w->level);
    for (size_t i; (i = atomic_fetch_add(&w->next, 1)) < w->count;) {
        if (c)
            compress_band(&w->bands[i], c);
        else
            w->bands[i].failed = 1;
    }
    libdeflate_free_compressor(c);
    return NULL;
}

/* The workers: the calling thread and threads - 1 more (fewer if they
 * cannot start; the bands still all get done). */
static void run_bands(band_work *w, int threads)
{
    pthread_t ids[64];
    int started = 0;
    if (threads > 64)
        threads = 64;
    if ((size_t)threads > w->count)
        threads = (int)w->count;
    for (int t = 1; t < threads; t++)
        if (pthread_create(&ids[started], NULL, band_worker, w) == 0)
            started++;
    band_worker(w);
    for (int t = 0; t < started; t++)
        pthread_join(ids[t], NULL);
}

/* zlib's FLEVEL, as libdeflate writes it for the level */
static unsigned char zlib_flags(int level)
{
    const unsigned flevel = level < 2 ? 0 : level < 6 ? 1 : level == 6 ? 2 : 3;
    const unsigned flg = flevel << 6;
    return (unsigned char)(flg + (31 - (0x78 * 256 + flg) % 31) % 31);
}

/* Join the bands' deflate data into one zlib stream. */
static int join_bands(const band *bands, size_t count, int level, unsigned char **out, size_t *out_size)
{
    size_t total = 2 + 4;
    for (size_t i = 0; i < count; i++)
        total += bands[i].out_size;
    unsigned char *z = malloc(total);
    if (!z) {
        gf_set_error("out of memory for the PNG data");
        return -1;
    }
    z[0] = 0x78;
    z[1] = zlib_flags(level);
    size_t at = 2;
    uint32_t adler = 1;
    for (size_t i = 0; i < count; i++) {
        memcpy(z + at, bands[i].out, bands[i].out_size);
        at += bands[i].out_size;
        adler = i ? gf_adler32_combine(adler, bands[i].adler, bands[i].size) : bands[i].adler;
    }
    gf_put_be32(z + at, adler);
    *out = z;
    *out_size = total;
    return 0;
}

static int deflate_bands(band *bands, size_t count, int level, int threads, unsigned char **out,
                         size_t *out_size)
{
    band_work w = {bands, count, level, 0};
    run_bands(&w, threads);
    int failed = 0;
    for (size_t i = 0; i < count; i++)
        failed = bands[i].failed > failed ? bands[i].failed : failed;
    int r = -1;
    if (failed == 1)
        gf_set_error("out of memory for the PNG data");
    else if (failed == 2)
        gf_set_error("internal error: a deflate band could not be joined");
    else
        r = join_bands(bands, count, level, out, out_size);
    for (size_t i = 0; i < count; i++)
        free(bands[i].out);
    return r;
}

int gf_png_zlib_bands(const unsigned char *data, size_t size, size_t band_size, int level,
                      int threads, unsigned char **out, size_t *out_size)
{
    const size_t count = size && band_size ? (size + band_size - 1) / band_size : 1;
    band *bands = calloc(count, sizeof *bands);
    if (!bands) {
        gf_set_error("out of memory for the PNG data");
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        const size_t at = i * band_size;
        bands[i].data = (unsigned char *)data + at;  /* read only: no rows to filter */
        bands[i].size = count == 1 ? size : (i + 1 == count ? size - at : band_size);
        bands[i].last = i + 1 == count;
    }
    const int r = deflate_bands(bands, count, level, threads, out, out_size);
    free(bands);
    return r;
}

/* ==== encode ================================================================= */

/* One row filtered with type f into out (the first bpp bytes see zeros on
 * their left); returns stb_image_write's estimate, the sum of the bytes'
 * magnitudes as signed chars. One plain loop per filter, for the
 * vectorizer. */
static unsigned filter_row(int f, const unsigned char *row, const unsigned char *prior,
                           size_t n, size_t bpp, unsigned char *out)
{
    size_t i;
    switch (f) {
    case 0:
        memcpy(out, row, n);
        break;
    case 1:
        memcpy(out, row, bpp);
        for (i = bpp; i < n; i++)
            out[i] = (unsigned char)(row[i] - row[i - bpp]);
        break;
    case 2:
        for (i = 0; i < n; i++)
            out[i] = (unsigned char)(row[i] - prior[i]);
        break;
    case 3:
        for (i = 0; i < bpp; i++)
            out[i] = (unsigned char)(row[i] - (prior[i] >> 1));
        for (i = bpp; i < n; i++)
            out[i] = (unsigned char)(row[i] - ((row[i - bpp] + prior[i]) >> 1));
        break;
    default:
        for (i = 0; i < bpp; i++)
            out[i] = (unsigned char)(row[i] - prior[i]);
        for (i = bpp; i < n; i++)
            out[i] = (unsigned char)(row[i] - paeth(row[i - bpp], prior[i], prior[i - bpp]));
        break;
    }
    unsigned est = 0;
    for (i = 0; i < n; i++)
        est += (unsigned)abs((signed char)out[i]);
    return est;
}


/* A band's rows with stb_image_write's choice: of the five filters in
 * order, the first with the smallest estimate; the first row's prior is
 * zeros (stb's first-row variants are the same bytes). */
static int filter_rows(const band_rows *r, unsigned char *out)
{
    const size_t n = (size_t)r->width * (size_t)r->channels, bpp = (size_t)r->channels;
    unsigned char *scratch = malloc(3 * n);  /* best, trial, zeros */
    if (!scratch)
        return -1;
    unsigned char *zeros = scratch + 2 * n;
    memset(zeros, 0, n);
    for (uint32_t j = 0; j < r->rows; j++) {
        const size_t y = (size_t)r->y0 + j;
        const unsigned char *row = r->pixels + y * n;
        const unsigned char *prior = y ? row - n : zeros;
        unsigned char *best = scratch, *trial = scratch + n;
        unsigned best_est = filter_row(0, row, prior, n, bpp, best);
        int best_f = 0;
        for (int f = 1; f < 5; f++) {
            const unsigned est = filter_row(f, row, prior, n, bpp, trial);
            if (est < best_est) {
                unsigned char *t = best;
                best = trial, trial = t, best_est = est, best_f = f;
            }
        }
        unsigned char *dest = out + (size_t)j * (n + 1);
        dest[0] = (unsigned char)best_f;
        memcpy(dest + 1, best, n);
    }
    free(scratch);
    return 0;
}

static unsigned char *put_chunk(unsigned char *o, const char *type, const unsigned char *data,
                                size_t length)
{
    gf_put_be32(o, (uint32_t)length);
    memcpy(o + 4, type, 4);
    if (length)
        memcpy(o + 8, data, length);
    gf_put_be32(o + 8 + length, libdeflate_crc32(0, o + 4, 4 + length));
    return o + 12 + length;
}

/* Signature, IHDR, the zlib stream in IDAT chunks of at most 1 MiB, IEND. */
static int write_container(int width, int height, int channels, const unsigned char *z,
                           size_t z_size, unsigned char **out, size_t *out_size)
{
    static const unsigned char color_type[5] = {0, 0, 4, 2, 6};
    const size_t max_idat = (size_t)1 << 20;
    const size_t chunks = (z_size + max_idat - 1) / max_idat;
    const size_t total = 8 + 25 + chunks * 12 + z_size + 12;
    unsigned char *png = malloc(total);
    if (!png) {
        gf_set_error("out of memory for the PNG file");
        return -1;
    }
    unsigned char ihdr[13] = {0};
    gf_put_be32(ihdr, (uint32_t)width);
    gf_put_be32(ihdr + 4, (uint32_t)height);
    ihdr[8] = 8;
    ihdr[9] = color_type[channels];
    memcpy(png, "\x89PNG\r\n\x1a\n", 8);
    unsigned char *o = put_chunk(png + 8, "IHDR", ihdr, 13);
    for (size_t at = 0; at < z_size; at += max_idat)
        o = put_chunk(o, "IDAT", z + at, z_size - at < max_idat ? z_size - at : max_idat);
    o = put_chunk(o, "IEND", NULL, 0);
    *out = png;
    *out_size = (size_t)(o - png);
    return 0;
}

/* Bands of at least 256 KiB of filtered rows, a fixed size (the output
 * does not depend on the core count): small enough that a 512x512 RGB
 * image spreads over 3 cores, large enough that each band's fresh
 * dictionary costs under 1% of the size. */
#define BAND_BYTES ((size_t)256 << 10)

static int encode_threads(void)
{
    const int n = gf_image_threads();
    return n > 64 ? 64 : n;
}

int gf_png_encode(const unsigned char *pixels, int width, int height, int channels, int level,
                  unsigned char **out, size_t *out_size)
{
    if (width < 1 || height < 1 || channels < 1 || channels > 4)
        return GF_PNG_NOT_HANDLED;
    const size_t row = (size_t)width * (size_t)channels + 1;
    const size_t rows_per_band = (BAND_BYTES + row - 1) / row;
    const size_t count = ((size_t)height + rows_per_band - 1) / rows_per_band;
    unsigned char *filtered = malloc(row * (size_t)height);
    band *bands = calloc(count, sizeof *bands);
    int r = -1;
    if (!filtered || !bands) {
        gf_set_error("out of memory for the PNG data");
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        const size_t y0 = i * rows_per_band;
        const size_t rows = i + 1 == count ? (size_t)height - y0 : rows_per_band;
        bands[i] = (band){.data = filtered + y0 * row, .size = rows * row, .last = i + 1 == count,
                          .rows = {pixels, width, channels, (uint32_t)y0, (uint32_t)rows}};
    }
    unsigned char *z = NULL;
    size_t z_size = 0;
    if (deflate_bands(bands, count, level, encode_threads(), &z, &z_size) == 0) {
        free(filtered);
        filtered = NULL;
        r = write_container(width, height, channels, z, z_size, out, out_size);
        free(z);
    }
done:
    free(filtered);
    free(bands);
    return r == 0 ? GF_PNG_DONE : GF_PNG_FAILED;
}

#endif
