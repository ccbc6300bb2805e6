/* gpu_batch.c - the GPU codec stage of a batch (see gpu_batch.h).
 *
 * Each GPU thread owns a CUDA backend (its stream and two image buffers),
 * an nvJPEG codec on that stream and DECODE_BATCH decode buffers: it takes
 * up to DECODE_BATCH files from the queue, decodes them in one nvJPEG call,
 * then copies each into the backend's buffer on the device, runs the
 * operations and encodes from the result. Two threads per device overlap
 * one batch's host work (parsing, retrieving the streams) with the other's
 * GPU work. */
#include "gpu_batch.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "exif.h"
#include "jpeg_rows.h"
#include "nvjpeg_codec.h"
#include "pipeline.h"
#include "util.h"

/* Measured on an H100 with 16 cores: 3, 4 or 6 threads, or batches of 8
 * or 32, were no faster; writers: a 12 Mpx JPEG takes ~9 ms to write. */
enum { DECODE_BATCH = 16, GPU_THREADS_PER_DEVICE = 2, WRITERS = 8 };

typedef struct {
    size_t item;
    unsigned char *data;       /* the file, until it is decoded */
    size_t size;
    gf_image_probe probe;
    int slot;                  /* its decode buffer; -1: decoded on the CPU */
    unsigned char *encoded;    /* a JPEG encoded on the GPU, or */
    size_t encoded_size;
    gf_image *result;          /* the pixels, for the writer to encode (PNG, ...) */
    gf_channel_stats stats[4];
    gf_gpu_item_report report;
} work;

/* A bounded FIFO of work, closed when no more will come. */
typedef struct {
    work **ring;
    size_t capacity, head, count;
    int closed;
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
} work_queue;

static int queue_init(work_queue *q, size_t capacity)
{
    memset(q, 0, sizeof *q);
    q->ring = calloc(capacity, sizeof *q->ring);
    q->capacity = capacity;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    return q->ring ? 0 : -1;
}

static void queue_free(work_queue *q)
{
    free(q->ring);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
}

static void queue_push(work_queue *q, work *w)
{
    pthread_mutex_lock(&q->lock);
    while (q->count == q->capacity)
        pthread_cond_wait(&q->not_full, &q->lock);
    q->ring[(q->head + q->count++) % q->capacity] = w;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}

/* Up to 'most' works, waiting for the first; 0 once closed and empty. */
static size_t queue_pop(work_queue *q, work **out, size_t most)
{
    pthread_mutex_lock(&q->lock);
    while (q->count == 0 && !q->closed)
        pthread_cond_wait(&q->not_empty, &q->lock);
    size_t n = 0;
    while (n < most && q->count > 0) {
        out[n++] = q->ring[q->head];
        q->head = (q->head + 1) % q->capacity;
        q->count--;
    }
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->lock);
    return n;
}

static void queue_close(work_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}

typedef struct {
    struct gf_gpu_stage *stage;
    int device;
    gf_backend *backend;
    gf_gpu_jpeg *codec;
    unsigned char *slots[DECODE_BATCH];
    size_t slot_bytes[DECODE_BATCH];
    pthread_t thread;
} gpu_thread;

struct gf_gpu_stage {
    const gf_job *job;
    const gf_batch *batch;
    gf_gpu_report_fn report;
    void *user;
    work_queue decode_queue, write_queue;
    gpu_thread *threads;
    int thread_count, started;
    pthread_t writers[WRITERS];
    int writer_count;
    char decoder[32];
};

/* ---- decoding ------------------------------------------------------------- */

static int ensure_slot(gpu_thread *t, int slot, size_t bytes)
{
    if (t->slot_bytes[slot] >= bytes)
        return 0;
    cudaFree(t->slots[slot]);
    t->slots[slot] = NULL;
    t->slot_bytes[slot] = 0;
    if (cudaMalloc((void **)&t->slots[slot], bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        t->slots[slot] = NULL;
        return -1;
    }
    t->slot_bytes[slot] = bytes;
    return 0;
}

/* The files nvJPEG takes, in one call into the decode buffers; the others
 * (and all of a failed batch) keep slot -1 for the CPU. */
static void decode_batch(gpu_thread *t, work **w, size_t n)
{
    const unsigned char *data[DECODE_BATCH];
    size_t sizes[DECODE_BATCH];
    unsigned char *pixels[DECODE_BATCH];
    int widths[DECODE_BATCH], count = 0;
    const double start = gf_now_ms();
    for (size_t i = 0; i < n; i++) {
        const gf_image_probe *p = &w[i]->probe;
        w[i]->slot = -1;
        if (!gf_gpu_jpeg_supported(t->codec, w[i]->data, w[i]->size, p->width, p->height) ||
            ensure_slot(t, count, (size_t)p->width * (size_t)p->height * 3) < 0)
            continue;
        w[i]->slot = count;
        data[count] = w[i]->data;
        sizes[count] = w[i]->size;
        pixels[count] = t->slots[count];
        widths[count] = p->width;
        count++;
    }
    if (count == 0)
        return;
    /* the stream orders the decode before each file's operations */
    const int status = gf_gpu_jpeg_decode(t->codec, count, data, sizes, pixels, widths);
    const double each = (gf_now_ms() - start) / count;
    for (size_t i = 0; i < n; i++) {
        if (w[i]->slot < 0)
            continue;
        if (status < 0) {
            w[i]->slot = -1;
            continue;
        }
        w[i]->report.decoder = t->stage->decoder;
        w[i]->report.decode_ms = each;
    }
}

/* Put the file's pixels in the backend: from its decode buffer, else
 * decoded on the CPU (*host) and uploaded. */
static int load(gpu_thread *t, work *w, const char *name, gf_image **host)
{
    gf_gpu_item_report *r = &w->report;
    if (w->slot >= 0) {
        int status = gf_cuda_upload_device(t->backend, t->slots[w->slot], w->probe.width,
                                           w->probe.height, 3);
        if (status == 0) {
            r->width = w->probe.width;
            r->height = w->probe.height;
            r->channels = 3;
            return 0;
        }
        if (status == -1) {
            gf_error_name_file(name);
            return -1;
        }
    }
    /* the CPU path's decode: its budget, time limit and messages */
    const double start = gf_now_ms();
    *host = gf_image_decode_limited(w->data, w->size, name, &w->probe);
    w->data = NULL;
    if (!*host)
        return -1;
    r->decoder = "CPU";
    r->decode_ms = gf_now_ms() - start;
    r->width = (*host)->width;
    r->height = (*host)->height;
    r->channels = (*host)->channels;
    r->depth = (*host)->depth;
    if (t->backend->upload(t->backend, *host) < 0) {
        gf_error_name_file(name);
        return -1;
    }
    return 0;
}

/* ---- encoding and writing ---------------------------------------------------- */

static gf_format output_format(const gf_job *job, const char *output)
{
    return job->format != GF_FORMAT_NONE ? job->format : gf_format_from_path(output);
}

/* A JPEG of three channels is encoded on the GPU from the device buffer;
 * anything else comes back to the host, for the writer to encode. */
static int encode(gpu_thread *t, work *w, gf_image **host, const char *output)
{
    gf_gpu_item_report *r = &w->report;
    const double start = gf_now_ms();
    const unsigned char *device = gf_cuda_device_image(t->backend);
    if (!device || r->channels != 3 || output_format(t->stage->job, output) != GF_FORMAT_JPEG) {
        r->encoder = "CPU";
        w->result = *host ? *host : gf_image_new(r->width, r->height, r->channels);
        *host = NULL;
        if (!w->result || t->backend->download(t->backend, w->result) < 0) {
            gf_error_name_file(output);
            return -1;
        }
        r->encode_ms = gf_now_ms() - start;  /* the download; the writer adds the encode */
        return 0;
    }
    r->encoder = "GPU";
    int status = gf_gpu_jpeg_encode(t->codec, device, r->width, r->height, t->stage->job->quality,
                                    &w->encoded, &w->encoded_size);
    if (status < 0)
        gf_error_name_file(strcmp(output, "-") == 0 ? "standard output" : output);
    r->encode_ms = gf_now_ms() - start;
    return status;
}

static void finish_work(gf_gpu_stage *s, work *w)
{
    s->report(s->user, &w->report);
    free(w->data);
    free(w->encoded);
    gf_image_free(w->result);
    free(w);
}

/* Decode (done), filter, encode one file; then to the writers. */
static void process(gpu_thread *t, work *w)
{
    gf_gpu_stage *s = t->stage;
    const gf_job *job = s->job;
    const gf_batch_item *item = &s->batch->items[w->item];
    gf_gpu_item_report *r = &w->report;
    gf_image *host = NULL;
    int status = load(t, w, item->input, &host);
    free(w->data);
    w->data = NULL;
    if (status == 0) {
        const double start = gf_now_ms();
        status = gf_pipeline_apply(&job->pipeline, t->backend, r->channels,
                                   job->stats ? w->stats : NULL);
        r->filter_ms = gf_now_ms() - start;
        if (status == -1)
            gf_error_name_file(item->input);
        r->stats = job->stats ? w->stats : NULL;
    }
    if (status == 0 && item->output)
        status = encode(t, w, &host, item->output);
    gf_image_free(host);
    r->status = status < 0 ? -1 : 0;
    if (status < 0 || !item->output)
        finish_work(s, w);
    else
        queue_push(&s->write_queue, w);
}

static int open_gpu_thread(gf_gpu_stage *s, gpu_thread *t, int device, int warm);

static void *gpu_thread_main(void *arg)
{
    gpu_thread *t = arg;
    if (!t->codec && open_gpu_thread(t->stage, t, t->device, 0) < 0)
        return NULL;  /* the other threads take the work */
    cudaSetDevice(t->device);
    work *batch[DECODE_BATCH];
    size_t n;
    while ((n = queue_pop(&t->stage->decode_queue, batch, DECODE_BATCH)) > 0) {
        decode_batch(t, batch, n);
        for (size_t i = 0; i < n; i++)
            process(t, batch[i]);
    }
    return NULL;
}

static void *writer_main(void *arg)
{
    gf_gpu_stage *s = arg;
    work *w;
    while (queue_pop(&s->write_queue, &w, 1) == 1) {
        const double start = gf_now_ms();
        const char *output = s->batch->items[w->item].output;
        int status;
        if (w->result) {
            status = gf_image_save(w->result, output, s->job->format, s->job->quality);
            w->report.encode_ms += gf_now_ms() - start;
        } else {
            status = gf_image_mark(GF_FORMAT_JPEG, &w->encoded, &w->encoded_size);
            if (status < 0)
                gf_error_name_file(strcmp(output, "-") == 0 ? "standard output" : output);
            else
                status = gf_image_write_encoded(output, w->encoded, w->encoded_size);
            w->report.write_ms = gf_now_ms() - start;
        }
        w->report.status = status < 0 ? -1 : 0;
        finish_work(s, w);
    }
    return NULL;
}

/* ---- the stage ------------------------------------------------------------------- */

int gf_gpu_stage_wants(const unsigned char *data, size_t size, const gf_image_probe *probe)
{
    return gf_jpeg_starts(data, size) && probe->channels == 3 && !probe->jpeg_undefined_tables &&
           probe->orientation <= GF_ORIENTATION_STORED && gf_jpeg_rows_sound(data, size) != 0;
}

/* The job's operations once on a small image: the kernels' modules load
 * at their first launch (5-20 ms each), here while nvJPEG starts (~0.5 s). */
static void *warm_kernels(void *arg)
{
    gpu_thread *t = arg;
    cudaSetDevice(t->device);
    gf_image *img = gf_image_new(64, 64, 3);
    if (img) {
        memset(img->pixels, 0, gf_image_bytes(img));
        (void)gf_pipeline_run(&t->stage->job->pipeline, t->backend, img, NULL, 0, NULL);
        gf_image_free(img);
    }
    return NULL;
}

/* A GPU thread's backend, then its codec (beside the warm-up if asked). */
static int open_gpu_thread(gf_gpu_stage *s, gpu_thread *t, int device, int warm)
{
    gf_backend_options options = s->job->backend_options;
    options.device = device;
    options.pinned_staging = 1;
    options.log = NULL;
    if (cudaSetDevice(device) != cudaSuccess) {
        gf_set_error("cannot select CUDA device %d", device);
        return -1;
    }
    if (!(t->backend = gf_backend_cuda_new(&options)))
        return -1;
    pthread_t warming;
    warm = warm && pthread_create(&warming, NULL, warm_kernels, t) == 0;
    t->codec = gf_gpu_jpeg_new(gf_cuda_stream(t->backend), DECODE_BATCH);
    if (warm)
        pthread_join(warming, NULL);
    return t->codec ? 0 : -1;
}

/* Only where the stage fails to start: a finished stage leaves its device
 * side (nvJPEG states, decode buffers, backends) to the process's exit,
 * where the driver drops the context whole; released one by one on the
 * stage's thread it took 0.1-0.3 s. */
static void close_gpu_thread(gpu_thread *t)
{
    gf_gpu_jpeg_free(t->codec);
    for (int i = 0; i < DECODE_BATCH; i++)
        cudaFree(t->slots[i]);
    if (t->backend)
        t->backend->destroy(t->backend);
}

static void free_stage(gf_gpu_stage *s, int release_device)
{
    for (int i = 0; release_device && i < s->thread_count; i++)
        close_gpu_thread(&s->threads[i]);
    free(s->threads);
    queue_free(&s->decode_queue);
    queue_free(&s->write_queue);
    free(s);
}

gf_gpu_stage *gf_gpu_stage_start(const gf_job *job, const gf_batch *batch, const int *devices,
                                 int device_count, int need_hardware, gf_gpu_report_fn report,
                                 void *user)
{
    const char *why;
    if (!gf_nvjpeg_available(&why)) {
        gf_set_error("no GPU JPEG codec: %s", why);
        return NULL;
    }
    gf_gpu_stage *s = calloc(1, sizeof *s);
    const int threads = device_count * GPU_THREADS_PER_DEVICE;
    if (!s || !(s->threads = calloc((size_t)threads, sizeof *s->threads)) ||
        queue_init(&s->decode_queue, (size_t)threads * DECODE_BATCH) < 0 ||
        queue_init(&s->write_queue, (size_t)threads * 2 + WRITERS) < 0) {
        if (s)
            free_stage(s, 1);
        gf_set_error("out of memory");
        return NULL;
    }
    s->job = job;
    s->batch = batch;
    s->report = report;
    s->user = user;
    /* the first thread opens here, to fail early; the others open on their
     * own threads, beside the work */
    s->thread_count = threads;
    for (int i = 0; i < threads; i++) {
        s->threads[i].stage = s;
        s->threads[i].device = devices[i % device_count];
    }
    if (open_gpu_thread(s, &s->threads[0], devices[0], 1) < 0) {
        free_stage(s, 1);
        return NULL;
    }
    if (need_hardware && strcmp(gf_gpu_jpeg_backend(s->threads[0].codec), "hardware") != 0) {
        free_stage(s, 1);
        gf_set_error("no hardware JPEG decoder on this GPU (nvJPEG's GPU backend is slower than "
                     "the CPU codecs on all cores)");
        return NULL;
    }
    snprintf(s->decoder, sizeof s->decoder, "GPU (%s)", gf_gpu_jpeg_backend(s->threads[0].codec));
    for (; s->started < threads; s->started++)
        if (pthread_create(&s->threads[s->started].thread, NULL, gpu_thread_main,
                           &s->threads[s->started]) != 0)
            break;
    for (; s->writer_count < WRITERS; s->writer_count++)
        if (pthread_create(&s->writers[s->writer_count], NULL, writer_main, s) != 0)
            break;
    if (s->started == 0 || s->writer_count == 0) {
        gf_gpu_stage_finish(s);
        gf_set_error("cannot start the GPU codec threads");
        return NULL;
    }
    return s;
}

const char *gf_gpu_stage_decoder(const gf_gpu_stage *s)
{
    return s->decoder;
}

void gf_gpu_stage_offer(gf_gpu_stage *s, size_t item, unsigned char *data, size_t size,
                        const gf_image_probe *probe)
{
    work *w = calloc(1, sizeof *w);
    if (!w) {
        free(data);
        gf_set_error("%s: out of memory", s->batch->items[item].input);
        s->report(s->user, &(gf_gpu_item_report){.item = item, .status = -1});
        return;
    }
    *w = (work){.item = item, .data = data, .size = size, .probe = *probe, .slot = -1};
    w->report.item = item;
    queue_push(&s->decode_queue, w);
}

void gf_gpu_stage_finish(gf_gpu_stage *s)
{
    queue_close(&s->decode_queue);
    for (int i = 0; i < s->started; i++)
        pthread_join(s->threads[i].thread, NULL);
    queue_close(&s->write_queue);
    for (int i = 0; i < s->writer_count; i++)
        pthread_join(s->writers[i], NULL);
    free_stage(s, 0);
}
