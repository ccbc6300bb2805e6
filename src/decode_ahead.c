/* decode_ahead.c - see decode_ahead.h. */
#include "decode_ahead.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "jpeg_rows.h"
#include "exif.h"
#include "util.h"

/* Rows decoded between two reports to the waiting threads. */
#define BAND_ROWS 16

struct gf_decode_ahead {
    gf_jpeg_rows *decoder;
    gf_image *img;
    unsigned char *pixels;  /* img's buffer: the backend takes it from img (backend.h's upload) */
    int width, height, channels;
    char *name;
    double timeout_s, began_ms, ms;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t more;
    int rows;       /* rows decoded, under lock */
    int failed;     /* 1 damaged, 2 past the time limit: no more rows, under lock */
};

int gf_decode_ahead_wanted(const gf_job *job, gf_backend_kind backend, const gf_image_probe *probe,
                           const unsigned char *data, size_t size)
{
    return job->output && !job->verify && !job->gray && job->depth != 16 && probe->depth == 8 &&
           backend == GF_BACKEND_CPU && job->pipeline.count > 0 &&
           job->pipeline.ops[0].kind == GF_OP_CONVOLVE && gf_jpeg_starts(data, size) &&
           probe->orientation <= GF_ORIENTATION_STORED &&
           gf_jpeg_rows_available();
}

static void report(gf_decode_ahead *d, int rows, int failed)
{
    pthread_mutex_lock(&d->lock);
    d->rows = rows;
    d->failed = failed;
    pthread_cond_broadcast(&d->more);
    pthread_mutex_unlock(&d->lock);
}

static void *decode_rows(void *arg)
{
    gf_decode_ahead *d = arg;
    const size_t pitch = (size_t)d->width * (size_t)d->channels;
    int failed = 0, y = 0;
    while (y < d->height && !failed) {
        const int rows = d->height - y < BAND_ROWS ? d->height - y : BAND_ROWS;
        if (gf_jpeg_rows_read(d->decoder, d->pixels + (size_t)y * pitch, rows) < 0)
            failed = 1;
        else if (d->timeout_s > 0 && gf_now_ms() - d->began_ms > d->timeout_s * 1e3)
            failed = 2;
        else
            y += rows;
        report(d, y, failed);
    }
    d->ms = gf_now_ms() - d->began_ms;
    return NULL;
}

static void free_ahead(gf_decode_ahead *d)
{
    gf_jpeg_rows_close(d->decoder);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->more);
    free(d->name);
    free(d);
}

gf_decode_ahead *gf_decode_ahead_start(const unsigned char *data, size_t size,
                                       const gf_image_probe *probe, const char *name)
{
    gf_decode_ahead *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->more, NULL);
    d->began_ms = gf_now_ms();
    d->timeout_s = gf_image_decode_timeout();
    int width, height, channels;
    d->decoder = gf_jpeg_rows_open(data, size, &width, &height, &channels);
    const size_t reserved = gf_image_memory_estimate(probe->width, probe->height,
                                                     probe->channels, 8);
    /* the shape stb_image reported, as the whole-image decoder checks */
    if (!d->decoder || width != probe->width || height != probe->height ||
        channels != probe->channels || !(d->name = strdup(name)) ||
        gf_image_reserve_memory(name, reserved) < 0) {
        free_ahead(d);
        return NULL;
    }
    d->width = width, d->height = height, d->channels = channels;
    if (!(d->img = gf_image_new_depth(width, height, channels, 8)) ||
        !(d->pixels = d->img->pixels) || pthread_create(&d->thread, NULL, decode_rows, d) != 0) {
        gf_image_free(d->img);
        gf_image_release_memory(reserved);
        free_ahead(d);
        return NULL;
    }
    d->img->reserved = reserved;
    return d;
}

gf_image *gf_decode_ahead_image(gf_decode_ahead *d)
{
    return d->img;
}

/* 0 once row 'row' is decoded, -1 when it never will be. */
static int wait_for_row(void *arg, int row)
{
    gf_decode_ahead *d = arg;
    pthread_mutex_lock(&d->lock);
    while (d->rows <= row && !d->failed)
        pthread_cond_wait(&d->more, &d->lock);
    const int there = d->rows > row;
    pthread_mutex_unlock(&d->lock);
    return there ? 0 : -1;
}

gf_rows_ready gf_decode_ahead_rows(gf_decode_ahead *d)
{
    return (gf_rows_ready){wait_for_row, d};
}

int gf_decode_ahead_finish(gf_decode_ahead *d, double *ms)
{
    pthread_join(d->thread, NULL);
    const int failed = d->failed;
    if (ms)
        *ms = d->ms;
    if (failed == 2)
        gf_set_error("%s: decoding did not finish within %g s (--decode-timeout); a corrupt or "
                     "hostile file?", d->name, d->timeout_s);
    free_ahead(d);
    return failed == 0 ? 0 : (failed == 1 ? -1 : -2);
}
