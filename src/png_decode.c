/* png_decode.c - PNG on libdeflate: one inflate of all IDAT data, then
 * unfilter and expand to stb_image's result (8 bits, or 16 for a 16-bit
 * file). See png_codec.h for what is left to stb_image. */
#include "png_codec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#ifndef GF_HAVE_LIBDEFLATE

int gf_png_decode(const unsigned char *data, size_t size, const char *name,
                  unsigned char **pixels, int *width, int *height, int *channels, int *depth,
                  const char **corrupt)
{
    (void)data, (void)size, (void)name, (void)pixels, (void)width, (void)height, (void)channels;
    (void)depth;
    *corrupt = NULL;
    return GF_PNG_NOT_HANDLED;
}

#else

#include <libdeflate.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

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

/* Undo one row's filter in place over bytes [from, to); prior is the row
 * above (zeros for the first row), bpp the bytes per pixel (1 below 8
 * bits). Byte i needs bytes i - bpp of its row and i - bpp, i of prior. */
static void unfilter_range(int filter, unsigned char *row, const unsigned char *prior, size_t from,
                           size_t to, size_t bpp)
{
    size_t i = from;
    switch (filter) {
    case 1:
        for (i = i < bpp ? bpp : i; i < to; i++)
            row[i] = (unsigned char)(row[i] + row[i - bpp]);
        break;
    case 2:
        for (; i < to; i++)
            row[i] = (unsigned char)(row[i] + prior[i]);
        break;
    case 3:
        for (; i < bpp && i < to; i++)
            row[i] = (unsigned char)(row[i] + (prior[i] >> 1));
        for (; i < to; i++)
            row[i] = (unsigned char)(row[i] + ((row[i - bpp] + prior[i]) >> 1));
        break;
    case 4:
        for (; i < bpp && i < to; i++)
            row[i] = (unsigned char)(row[i] + prior[i]);
        for (; i < to; i++)
            row[i] = (unsigned char)(row[i] + gf_png_paeth(row[i - bpp], prior[i], prior[i - bpp]));
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

/* A 16-bit row (big-endian samples) to host-order samples; with a tRNS
 * key, alpha 0 where every sample matches it, else 65535 (stbi_load_16). */
static void expand_row16(const png_state *s, const unsigned char *row, unsigned char *out)
{
    uint16_t *o = (uint16_t *)(void *)out;
    const size_t w = s->width;
    const int n = s->samples;
    if (!s->has_trans) {
        for (size_t i = 0; i < w * (size_t)n; i++)
            o[i] = (uint16_t)gf_be16(row + 2 * i);
        return;
    }
    for (size_t x = 0; x < w; x++, o += n + 1) {
        int match = 1;
        for (int k = 0; k < n; k++) {
            o[k] = (uint16_t)gf_be16(row + 2 * (x * (size_t)n + (size_t)k));
            match &= o[k] == s->trans16[k];
        }
        o[n] = match ? 0 : 65535;
    }
}

/* One unfiltered row to stb's output (8 bits, or 16 for a 16-bit file); 0,
 * or NOT_HANDLED for a palette index past the defined entries (stb reads
 * uninitialised memory). */
static int expand_row(const png_state *s, const unsigned char *row, unsigned char *out)
{
    static const unsigned depth_scale[9] = {0, 0xff, 0x55, 0, 0x11, 0, 0, 0, 1};
    const uint32_t w = s->width;
    const int n = s->samples, d = s->depth;
    if (d == 16) {
        expand_row16(s, row, out);
        return GF_PNG_DONE;
    }
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
            o[k] = d == 8 ? row[i] : (unsigned char)low_depth_sample(row, x, d, depth_scale[d]);
            match &= o[k] == s->trans8[k];
        }
        o[n] = match ? 0 : 255;
    }
    return GF_PNG_DONE;
}

/* ==== unfilter on threads ================================================== */

/* Rows are unfiltered as a wavefront: a thread takes the next row and
 * walks it in steps of STEP bytes, each step waiting until the row above
 * is done past the step's end (filters 2-4 read it; 0 and 1 do not).
 * Rows are taken in order by threads that all run, so a wait always ends.
 * With STEP bytes a step, a row of R bytes keeps up to R / STEP threads
 * busy; each thread expands its row to the output when it is done. The
 * first failing row's result is kept, as the serial walk would give. */
#define UNFILTER_STEP 2048
#define UNFILTER_MIN_BYTES ((size_t)4 << 20)  /* less: one thread */
#define UNKNOWN_FILTER 2                        /* a row's result beside GF_PNG_* */

typedef struct {
    const png_state *s;
    unsigned char *raw, *out;
    const unsigned char *zeros;
    size_t row_bytes, out_row, bpp;
    atomic_size_t *done;      /* per row: bytes unfiltered (row_bytes when done or failed) */
    atomic_uint next_row;
    atomic_uint first_failed;  /* the lowest failing row, or height */
    pthread_mutex_t lock;
    int result;                /* the first failing row's result */
} unfilter_work;

static void wait_for_row(atomic_size_t *done, size_t bytes)
{
    for (unsigned spins = 0; atomic_load_explicit(done, memory_order_acquire) < bytes; spins++)
        if (spins >= 64)
            sched_yield();
}

static void row_failed(unfilter_work *w, uint32_t y, int result)
{
    pthread_mutex_lock(&w->lock);
    if (y < atomic_load(&w->first_failed)) {
        atomic_store(&w->first_failed, y);
        w->result = result;
    }
    pthread_mutex_unlock(&w->lock);
}

/* Unfilter row y step by step, then expand it; its progress is published
 * in done[y] (the whole row, also when it fails, so that no wait stalls). */
static void unfilter_one_row(unfilter_work *w, uint32_t y)
{
    const png_state *s = w->s;
    const size_t n = w->row_bytes;
    unsigned char *row = w->raw + (size_t)y * (n + 1);
    const unsigned char *prior = y ? row - n : w->zeros;
    const int filter = row[0];
    int result = GF_PNG_DONE;
    if (filter > 4) {
        result = UNKNOWN_FILTER;  /* the message is set on the calling thread */
    } else {
        for (size_t from = 0; from < n; from += UNFILTER_STEP) {
            const size_t to = n - from < UNFILTER_STEP ? n : from + UNFILTER_STEP;
            if (y && filter >= 2)
                wait_for_row(&w->done[y - 1], to);
            unfilter_range(filter, row + 1, prior, from, to, w->bpp);
            atomic_store_explicit(&w->done[y], to, memory_order_release);
        }
        result = expand_row(s, row + 1, w->out + (size_t)y * w->out_row);
    }
    atomic_store_explicit(&w->done[y], n, memory_order_release);
    if (result != GF_PNG_DONE)
        row_failed(w, y, result);
}

static void *unfilter_worker(void *arg)
{
    unfilter_work *w = arg;
    for (uint32_t y; (y = atomic_fetch_add(&w->next_row, 1)) < w->s->height;)
        if (y < atomic_load(&w->first_failed))
            unfilter_one_row(w, y);
        else
            atomic_store_explicit(&w->done[y], w->row_bytes, memory_order_release);
    return NULL;
}

/* Unfilter and expand every row of the inflated data on 'threads' threads. */
static int unfilter_image(const png_state *s, unsigned char *raw, size_t row_bytes,
                          unsigned char *out, size_t out_row, int threads)
{
    unfilter_work w = {
        .s = s, .raw = raw, .out = out, .row_bytes = row_bytes, .out_row = out_row,
        .bpp = s->depth < 8 ? 1 : (size_t)s->samples * (size_t)s->depth / 8,
        .result = GF_PNG_DONE,
    };
    unsigned char *zeros = calloc(1, row_bytes + 1);
    w.done = calloc(s->height, sizeof *w.done);
    if (!zeros || !w.done) {
        free(zeros);
        free(w.done);
        gf_set_error("%s: out of memory", s->name);
        return GF_PNG_FAILED;
    }
    w.zeros = zeros;
    atomic_init(&w.next_row, 0);
    atomic_init(&w.first_failed, s->height);
    pthread_mutex_init(&w.lock, NULL);
    gf_run_shared(unfilter_worker, &w, threads);
    pthread_mutex_destroy(&w.lock);
    free(zeros);
    free(w.done);
    return w.result == UNKNOWN_FILTER ? corrupt_png(s, "a row has an unknown filter") : w.result;
}

static int unfilter_threads(const png_state *s, size_t raw_len)
{
    if (raw_len < UNFILTER_MIN_BYTES || s->height < 2)
        return 1;
    const int threads = gf_image_threads();
    return threads < 1 ? 1 : threads;
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

static int decode_image(png_state *s, unsigned char **pixels, int *channels, int *depth,
                        const char **corrupt)
{
    const size_t row_bytes = ((size_t)s->samples * s->width * (size_t)s->depth + 7) / 8;
    const size_t raw_len = (row_bytes + 1) * s->height;
    const int out_n = s->color == 3 ? (s->palette_alpha ? 4 : 3) : s->samples + s->has_trans;
    const size_t out_row = (size_t)s->width * (size_t)out_n * (s->depth == 16 ? 2 : 1);
    if (s->idat_size == 0)
        return corrupt_png(s, "no IDAT data");
    unsigned char *raw = gf_malloc_large(raw_len);
    unsigned char *out = gf_malloc_large(out_row * s->height);
    int r = raw && out ? GF_PNG_DONE : GF_PNG_FAILED;
    if (r != GF_PNG_DONE)
        gf_set_error("%s: out of memory", s->name);
    if (r == GF_PNG_DONE)
        r = inflate_idat(s, raw, raw_len, corrupt);
    if (r == GF_PNG_DONE)
        r = unfilter_image(s, raw, row_bytes, out, out_row, unfilter_threads(s, raw_len));
    free(raw);
    if (r != GF_PNG_DONE) {
        free(out);
        return r;
    }
    *pixels = out;
    *channels = out_n;
    *depth = s->depth == 16 ? 16 : 8;
    return GF_PNG_DONE;
}

int gf_png_decode(const unsigned char *data, size_t size, const char *name,
                  unsigned char **pixels, int *width, int *height, int *channels, int *depth,
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
    s->idat = gf_malloc_large(s->idat_capacity);
    int r = s->idat ? read_chunks(s, data, size) : GF_PNG_FAILED;
    if (!s->idat)
        gf_set_error("%s: out of memory", name);
    if (r == GF_PNG_DONE)
        r = decode_image(s, pixels, channels, depth, corrupt);
    if (r == GF_PNG_DONE) {
        *width = (int)s->width;
        *height = (int)s->height;
    }
    free(s->idat);
    free(s);
    return r;
}

#endif
