/* zlib_bands.c - one zlib stream from bands deflated apart, on threads
 * (zlib_bands.h). */
#include "zlib_bands.h"

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

int gf_png_zlib_bands(const unsigned char *data, size_t size, size_t band_size, int level,
                      int threads, unsigned char **out, size_t *out_size)
{
    (void)data, (void)size, (void)band_size, (void)level, (void)threads, (void)out, (void)out_size;
    gf_set_error("PNG bands need libdeflate");
    return -1;
}

#else

#include <libdeflate.h>
#include <stdatomic.h>

#include "bytes.h"

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

typedef gf_zlib_band band;

typedef struct {
    band *bands;
    size_t count;
    int level;
    gf_band_fill fill;
    atomic_size_t next;
} band_work;

static void compress_band(band *b, struct libdeflate_compressor *c, gf_band_fill fill)
{
    if (b->rows.rows && fill(&b->rows, b->data) < 0) {
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
            compress_band(&w->bands[i], c, w->fill);
        else
            w->bands[i].failed = 1;
    }
    libdeflate_free_compressor(c);
    return NULL;
}

/* zlib's FLEVEL, as libdeflate writes it for the level */
static unsigned char zlib_flags(int level)
{
    const unsigned flevel = level < 2 ? 0 : level < 6 ? 1 : level == 6 ? 2 : 3;
    const unsigned flg = flevel << 6;
    return (unsigned char)(flg + (31 - (0x78 * 256 + flg) % 31) % 31);
}

/* Join the bands' deflate data into one zlib stream, into the sink. */
static int join_bands(const band *bands, size_t count, int level, const gf_zlib_sink *sink)
{
    size_t total = 2 + 4;
    for (size_t i = 0; i < count; i++)
        total += bands[i].out_size;
    const unsigned char header[2] = {0x78, zlib_flags(level)};
    if (sink->begin(sink->ctx, total) < 0 || sink->put(sink->ctx, header, 2) < 0)
        return -1;
    uint32_t adler = 1;
    for (size_t i = 0; i < count; i++) {
        if (sink->put(sink->ctx, bands[i].out, bands[i].out_size) < 0)
            return -1;
        adler = i ? gf_adler32_combine(adler, bands[i].adler, bands[i].size) : bands[i].adler;
    }
    unsigned char trailer[4];
    gf_put_be32(trailer, adler);
    return sink->put(sink->ctx, trailer, 4);
}

int gf_deflate_bands(gf_zlib_band *bands, size_t count, int level, int threads,
                     gf_band_fill fill, const gf_zlib_sink *sink)
{
    band_work w = {bands, count, level, fill, 0};
    gf_run_shared(band_worker, &w, (size_t)threads > count ? (int)count : threads);
    int failed = 0;
    for (size_t i = 0; i < count; i++)
        failed = bands[i].failed > failed ? bands[i].failed : failed;
    int r = -1;
    if (failed == 1)
        gf_set_error("out of memory for the PNG data");
    else if (failed == 2)
        gf_set_error("internal error: a deflate band could not be joined");
    else
        r = join_bands(bands, count, level, sink);
    for (size_t i = 0; i < count; i++)
        free(bands[i].out);
    return r;
}

/* A sink into one malloc'ed buffer. */
typedef struct {
    unsigned char *data;
    size_t size;
} buffer_sink;

static int buffer_begin(void *ctx, size_t total)
{
    buffer_sink *b = ctx;
    b->data = gf_malloc_large(total);
    if (!b->data)
        gf_set_error("out of memory for the PNG data");
    return b->data ? 0 : -1;
}

static int buffer_put(void *ctx, const unsigned char *data, size_t size)
{
    buffer_sink *b = ctx;
    memcpy(b->data + b->size, data, size);
    b->size += size;
    return 0;
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
    buffer_sink b = {NULL, 0};
    const gf_zlib_sink sink = {buffer_begin, buffer_put, &b};
    const int r = gf_deflate_bands(bands, count, level, threads, NULL, &sink);
    free(bands);
    if (r < 0) {
        free(b.data);
        return -1;
    }
    *out = b.data;
    *out_size = b.size;
    return 0;
}

#endif
