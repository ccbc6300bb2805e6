/* stream.c - see stream.h.
 *
 * A band is `band` output rows, a multiple of the encoder's strip. Its
 * window holds the rows the chain reads: `above` rows over it (the sum of
 * the masks' anchors) and `below` under it, cut at the image's edges. The
 * chain runs on the window as on a whole image; a row near a cut edge is
 * then wrong, by at most the rows the chain reaches, so the band's rows are
 * right. Two windows take turns: while one is filtered, encoded and
 * written, a thread fills the other with the next band's rows (those the
 * two share copied, the rest decoded), so the one-core decode runs beside
 * the threaded filter and encoder. */
#include "stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_conv.h"
#include "exif.h"
#include "jpeg_rows.h"
#include "jpeg_turbo.h"
#include "util.h"

/* A band's pixels, about: large enough that a band's strips keep the
 * cores busy, small against the image. */
#define BAND_BYTES ((size_t)32 << 20)
/* Rows decoded at a time for --gray, through a colour scratch. */
#define GRAY_ROWS 16

/* GPUFILTER_STREAM_BAND_ROWS (for the tests): every input that can stream
 * does, in bands of about that many rows; 0 when unset. */
static int forced_band_rows(void)
{
    const char *text = getenv("GPUFILTER_STREAM_BAND_ROWS");
    char *end;
    long v = text ? strtol(text, &end, 10) : 0;
    return text && *text && !*end && v > 0 && v < (1 << 20) ? (int)v : 0;
}

int gf_stream_wanted(const gf_job *job, gf_backend_kind backend, const gf_image_probe *probe,
                     const unsigned char *data, size_t size)
{
    /* 8-bit rows only: --depth 16 filters the whole image at 16 bits */
    if (!job->output || job->format != GF_FORMAT_JPEG || job->stats || job->verify ||
        job->depth == 16 || probe->depth == 16 ||
        (backend != GF_BACKEND_CPU && backend != GF_BACKEND_REFERENCE) ||
        job->pipeline.border == GF_BORDER_WRAP || !gf_jpeg_starts(data, size) ||
        probe->orientation > GF_ORIENTATION_STORED || !gf_jpeg_rows_available())
        return 0;
    for (int i = 0; i < job->pipeline.count; i++)
        if (job->pipeline.ops[i].kind != GF_OP_CONVOLVE)
            return 0;
    const size_t bytes = (size_t)probe->width * (size_t)probe->height * (size_t)probe->channels;
    return bytes >= GF_STREAM_MIN_BYTES || forced_band_rows() > 0;
}

/* ---- one call ------------------------------------------------------------------ */

/* Image rows [first, first + rows) of the decoded image. */
typedef struct {
    unsigned char *pixels;
    int first, rows;
} window;

typedef struct {
    const gf_job *job;
    int fast;                   /* cpu_conv.c, else the reference's loops */
    gf_jpeg_rows *decoder;
    gf_jpeg_stream *encoder;
    gf_output *out;
    int marked;                 /* the encoder's first piece went out with the mark */
    int sink_failed;            /* the output failed (its error set), not the encoder */
    int width, height, colour;  /* colour: the decoder's channels; channels: after --gray */
    int channels, band, above, below;
    size_t pitch;               /* bytes of a row */
    window windows[2];          /* one filtered while the other is decoded */
    unsigned char *work[2], *gray;
    double decode_ms, filter_ms, encode_ms;
} stream;

/* The encoder's first piece (SOI and the JFIF segment), marked as
 * gf_image_save marks a whole file. */
static int write_marked(stream *s, const unsigned char *data, size_t size)
{
    unsigned char *copy = malloc(size);
    size_t marked_size = size;
    if (copy)
        memcpy(copy, data, size);
    if (!copy || gf_image_mark(GF_FORMAT_JPEG, &copy, &marked_size) < 0) {
        free(copy);
        gf_set_error("%s: out of memory", s->job->output);
        return -1;
    }
    const int status = gf_output_write(s->out, copy, marked_size);
    free(copy);
    return status;
}

/* The encoder's pieces, in order, into the output. */
static int write_piece(void *user, const unsigned char *data, size_t size)
{
    stream *s = user;
    const int status = s->marked ? gf_output_write(s->out, data, size) : write_marked(s, data, size);
    s->marked = 1;
    s->sink_failed |= status < 0;
    return status;
}

/* Rows the chain reads over (above) and under (below) a row. */
static void chain_reach(const gf_pipeline *pipeline, int *above, int *below)
{
    *above = *below = 0;
    for (int i = 0; i < pipeline->count; i++) {
        const int h = pipeline->ops[i].mask->height;
        *above += h / 2;
        *below += h - 1 - h / 2;
    }
}

/* Decode the image's next 'rows' rows into dst, through the colour
 * scratch when --gray converts them. */
static int decode_rows(stream *s, unsigned char *dst, int rows)
{
    if (s->channels == s->colour)
        return gf_jpeg_rows_read(s->decoder, dst, rows);
    for (int done = 0; done < rows; done += GRAY_ROWS) {
        const int n = rows - done < GRAY_ROWS ? rows - done : GRAY_ROWS;
        if (gf_jpeg_rows_read(s->decoder, s->gray, n) < 0)
            return -1;
        gf_image view = {s->width, n, s->colour, s->gray, 0, 8};
        gf_image_to_gray(&view);
        memcpy(dst + (size_t)done * s->pitch, s->gray, (size_t)n * s->pitch);
    }
    return 0;
}

/* Make dst hold image rows [first, last): those prev has are copied, the
 * rest decoded (prev is only read: the filter may be reading it too). */
static int fill_window(stream *s, window *dst, const window *prev, int first, int last)
{
    const int kept_to = prev->first + prev->rows;
    const int kept = kept_to > first ? kept_to - first : 0;
    if (kept > 0)
        memcpy(dst->pixels, prev->pixels + (size_t)(first - prev->first) * s->pitch,
               (size_t)kept * s->pitch);
    const double t0 = gf_now_ms();
    const int status = decode_rows(s, dst->pixels + (size_t)kept * s->pitch, last - first - kept);
    s->decode_ms += gf_now_ms() - t0;
    dst->first = first;
    dst->rows = last - first;
    return status;
}

/* The chain over the window, which it leaves as it is (the next window
 * takes rows of it), through two work buffers; the result in one of them. */
static const unsigned char *filter_window(stream *s, const window *w)
{
    const gf_pipeline *pipeline = &s->job->pipeline;
    const int filtered = gf_pipeline_channels_filtered(pipeline, s->channels);
    const unsigned char *src = w->pixels;
    unsigned char *dst = s->work[0];
    const double t0 = gf_now_ms();
    for (int i = 0; i < pipeline->count; i++) {
        const gf_mask *mask = pipeline->ops[i].mask;
        if (!s->fast)
            gf_conv2d_cpu(src, dst, s->width, w->rows, s->channels, filtered, mask,
                          pipeline->border);
        else if (gf_conv2d_fast(src, dst, s->width, w->rows, s->channels, filtered, mask,
                                pipeline->border, 0) < 0)
            return NULL;
        src = dst;
        dst = dst == s->work[0] ? s->work[1] : s->work[0];
    }
    s->filter_ms += gf_now_ms() - t0;
    return src;
}

/* Band k's output rows [y0, y1) and the window [first, last) it reads. */
typedef struct {
    int y0, y1, first, last;
} band_span;

static band_span span_of(const stream *s, int k)
{
    band_span b;
    b.y0 = k * s->band;
    b.y1 = b.y0 + s->band < s->height ? b.y0 + s->band : s->height;
    b.first = b.y0 - s->above > 0 ? b.y0 - s->above : 0;
    b.last = b.y1 + s->below < s->height ? b.y1 + s->below : s->height;
    return b;
}

/* The band's rows filtered from its window, encoded and written. */
static int filter_and_encode(stream *s, const window *w, band_span b)
{
    const unsigned char *result = filter_window(s, w);
    if (!result) {
        gf_set_error("%s: out of memory for the CPU convolution", s->job->input);
        return GF_EXIT_FILE;
    }
    const double t0 = gf_now_ms();
    const int status = gf_jpeg_stream_write(s->encoder, result + (size_t)(b.y0 - b.first) * s->pitch,
                                            b.y1 - b.y0);
    s->encode_ms += gf_now_ms() - t0;
    if (status < 0 && !s->sink_failed)
        gf_set_error("%s: the JPEG encoder failed", s->job->output);
    return status < 0 ? GF_EXIT_FILE : 0;
}

/* The next band's window, decoded on a thread beside the filter. */
typedef struct {
    stream *s;
    window *dst;
    const window *prev;
    band_span span;
    int status;
} fill_job;

static void *fill_ahead(void *arg)
{
    fill_job *f = arg;
    f->status = fill_window(f->s, f->dst, f->prev, f->span.first, f->span.last);
    return NULL;
}

/* Every band: its window decoded (the next one on a thread while this one
 * is filtered, encoded and written). 0, GF_EXIT_FILE, or
 * GF_STREAM_DECLINED (the decoder failed). */
static int run_bands(stream *s)
{
    const int bands = (s->height + s->band - 1) / s->band;
    window *current = &s->windows[0], *next = &s->windows[1];
    const window none = {NULL, 0, 0};
    const band_span first = span_of(s, 0);
    if (fill_window(s, current, &none, first.first, first.last) < 0)
        return GF_STREAM_DECLINED;
    for (int k = 0; k < bands; k++) {
        fill_job ahead = {s, next, current, k + 1 < bands ? span_of(s, k + 1) : span_of(s, k), 0};
        pthread_t thread;
        const int threaded = k + 1 < bands && pthread_create(&thread, NULL, fill_ahead, &ahead) == 0;
        const int status = filter_and_encode(s, current, span_of(s, k));
        if (threaded)
            pthread_join(thread, NULL);
        else if (k + 1 < bands && status == 0)
            fill_ahead(&ahead);  /* no thread to spare: after, on this one */
        if (status != 0)
            return status;
        if (ahead.status < 0)
            return GF_STREAM_DECLINED;
        window *t = current;
        current = next;
        next = t;
    }
    return 0;
}

/* The band's height: about BAND_BYTES, a multiple of the encoder's strip. */
static int band_rows(const stream *s)
{
    const int strip = gf_jpeg_stream_strip_rows(s->encoder);
    const int forced = forced_band_rows();
    size_t strips = forced ? (size_t)(forced + strip - 1) / (size_t)strip
                           : BAND_BYTES / ((size_t)strip * s->pitch);
    strips = strips < 1 ? 1 : strips;
    const size_t rows = strips * (size_t)strip;
    return rows < (size_t)s->height ? (int)rows : s->height;
}

static int allocate_buffers(stream *s)
{
    const size_t bytes = (size_t)(s->above + s->band + s->below) * s->pitch;
    s->windows[0].pixels = gf_malloc_large(bytes);
    s->windows[1].pixels = gf_malloc_large(bytes);
    s->work[0] = gf_malloc_large(bytes);
    s->work[1] = s->job->pipeline.count > 1 ? gf_malloc_large(bytes) : NULL;
    s->gray = s->channels != s->colour ? malloc((size_t)GRAY_ROWS * s->width * s->colour) : NULL;
    if (s->windows[0].pixels && s->windows[1].pixels && s->work[0] &&
        (s->work[1] || s->job->pipeline.count < 2) &&
        (s->gray || s->channels == s->colour))
        return 0;
    gf_set_error("%s: out of memory for a band of %d rows", s->job->input, s->band);
    return -1;
}

static void free_stream(stream *s)
{
    gf_jpeg_rows_close(s->decoder);
    gf_jpeg_stream_free(s->encoder);
    gf_output_discard(s->out);
    free(s->windows[0].pixels);
    free(s->windows[1].pixels);
    free(s->work[0]);
    free(s->work[1]);
    free(s->gray);
}

static void report(const stream *s, const char *backend_name, double started)
{
    fprintf(stderr, "gpufilter: %s %dx%dx%d on %s, streamed in bands of %d rows (%d of halo): "
            "decode %.1f ms, filter %.1f ms, encode %.1f ms, all %.1f ms\n", s->job->input,
            s->width, s->height, s->channels, backend_name, s->band, s->above + s->below,
            s->decode_ms, s->filter_ms, s->encode_ms, gf_now_ms() - started);
}

int gf_stream_run(const gf_job *job, const char *backend_name, const unsigned char *data,
                  size_t size)
{
    const double started = gf_now_ms();
    stream s = {.job = job, .fast = strcmp(backend_name, "reference") != 0};
    s.decoder = gf_jpeg_rows_open(data, size, &s.width, &s.height, &s.colour);
    if (!s.decoder)
        return GF_STREAM_DECLINED;
    s.channels = job->gray && s.colour == 3 ? 1 : s.colour;
    s.pitch = (size_t)s.width * (size_t)s.channels;
    chain_reach(&job->pipeline, &s.above, &s.below);
    s.encoder = gf_jpeg_stream_new(s.width, s.height, s.channels, job->quality, write_piece, &s);
    if (!s.encoder) {
        free_stream(&s);
        return GF_STREAM_DECLINED;
    }
    s.band = band_rows(&s);
    int status = GF_EXIT_FILE;
    if (allocate_buffers(&s) == 0 && (s.out = gf_output_open(job->output)))
        status = run_bands(&s);
    if (status == 0 && gf_jpeg_stream_end(s.encoder) < 0)
        status = GF_EXIT_FILE;  /* the output's error (EOI is the sink's alone) */
    if (status == 0) {
        status = gf_output_commit(s.out) == 0 ? 0 : GF_EXIT_FILE;
        s.out = NULL;
    }
    if (status == 0 && job->verbose)
        report(&s, backend_name, started);
    free_stream(&s);
    return status;
}
