/* batch_run.c - running a batch (batch.h): worker threads that decode,
 * filter and encode, the GPU codec stage's hand-off (gpu_batch.h),
 * progress, statistics and failures. */
#include "batch.h"

#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exif.h"
#include "gpu_batch.h"
#include "image.h"
#include "nvjpeg_codec.h"
#include "orientation.h"
#include "pipeline.h"
#include "tone_report.h"
#include "util.h"

typedef struct {
    const gf_job *job;
    const gf_batch *batch;
    int cuda;                    /* a CUDA backend per worker, else a CPU one */
    const int *devices;
    int device_count;
    atomic_int next_worker;
    pthread_mutex_t report_lock; /* stderr and stdout lines */
    atomic_size_t next, done, failed;
    int progress;                /* a progress line on stderr (a terminal) */
    gf_stats_summary summary;    /* --summary: every file's statistics, under report_lock */
    double started;              /* gf_now_ms() */
    gf_gpu_stage *gpu;           /* JPEGs on the GPU codecs; NULL: all on the CPU's */
    char gpu_decoder[32];        /* the stage's decoder, for the summary */
    atomic_size_t decoded_on_gpu, encoded_on_gpu, decoded_on_cpu, encoded_on_cpu;
} batch_run;

static void clear_progress(const batch_run *run)
{
    if (run->progress)
        fputs("\r\033[K", stderr);
}

static void show_progress(batch_run *run)
{
    size_t done = atomic_load(&run->done), total = run->batch->count;
    double elapsed = (gf_now_ms() - run->started) / 1e3;
    double rate = elapsed > 0 ? (double)done / elapsed : 0.0;
    double eta = rate > 0 ? (double)(total - done) / rate : 0.0;
    fprintf(stderr, "\r\033[Kgpufilter: %zu/%zu files, %.1f images/s, ETA %d:%02d", done, total,
            rate, (int)eta / 60, (int)eta % 60);
    fflush(stderr);
}

static void report_failure(batch_run *run)
{
    pthread_mutex_lock(&run->report_lock);
    clear_progress(run);
    fprintf(stderr, "%s\n", gf_error());
    pthread_mutex_unlock(&run->report_lock);
    atomic_fetch_add(&run->failed, 1);
}

static void print_stats(batch_run *run, const char *input, int width, int height, int channels,
                        const gf_channel_stats *stats)
{
    const gf_job *job = run->job;
    clear_progress(run);
    gf_stats_print(stdout, job->stats, input, width, height, channels, stats);
    if (job->summary)
        gf_stats_summary_add(&run->summary, width, height, channels, stats);
    fflush(stdout);
}

/* -v: where a file was decoded and encoded, and each stage's time. */
static void print_stages(batch_run *run, const char *input, const gf_gpu_item_report *r,
                         const char *backend)
{
    clear_progress(run);
    fprintf(stderr, "gpufilter: %s %dx%dx%d%s: decode %s %.1f ms", input, r->width, r->height,
            r->channels, r->depth == 16 ? " 16-bit" : "", r->decoder, r->decode_ms);
    if (r->orientation > GF_ORIENTATION_STORED)
        fprintf(stderr, " (EXIF orientation %d: %s, on the host)", r->orientation,
                gf_orientation_describe(r->orientation));
    fprintf(stderr, ", filter %.1f ms on %s", r->filter_ms, backend);
    if (r->encoder)
        fprintf(stderr, ", encode %s %.1f ms, write %.1f ms", r->encoder, r->encode_ms, r->write_ms);
    fputc('\n', stderr);
}

/* A file read and probed already (by the GPU stage's offer), or none. */
typedef struct {
    unsigned char *data;
    size_t size;
    gf_image_probe probe;
} read_file;

/* The probe's EXIF orientation, for -v (a load's hook that decodes on). */
static int note_orientation(const gf_image_probe *probe, unsigned char *data, size_t size,
                            void *user)
{
    (void)data;
    (void)size;
    *(int *)user = probe->orientation;
    return 0;
}

/* Decode, filter on this worker's backend, report statistics, encode and
 * write. */
static int process_item(batch_run *run, gf_backend *backend, const gf_batch_item *item,
                        read_file *file)
{
    const gf_job *job = run->job;
    double t0 = gf_now_ms();
    int orientation = file->data ? file->probe.orientation : GF_ORIENTATION_STORED;
    gf_image *img = file->data ? gf_image_decode_limited(file->data, file->size, item->input,
                                                         &file->probe)
                               : gf_image_load_limited_hook(item->input, note_orientation,
                                                            &orientation);
    file->data = NULL;
    if (!img)
        return -1;
    if (gf_image_prepare(img, job->gray, job->depth) < 0) {
        gf_error_name_file(item->input);
        gf_image_free(img);
        return -1;
    }
    double t1 = gf_now_ms();
    /* 65536 bins a channel: on the heap, and only for --stats */
    gf_channel_stats *stats = job->stats ? calloc(4, sizeof *stats) : NULL;
    int status = job->stats && !stats
                     ? -1
                     : gf_pipeline_run(&job->pipeline, backend, img, stats, item->output != NULL,
                                       NULL);
    if (job->stats && !stats)
        gf_set_error("out of memory for the statistics");
    if (status == -1)
        gf_error_name_file(item->input);
    double t2 = gf_now_ms();
    if (status == 0 && job->stats) {
        pthread_mutex_lock(&run->report_lock);
        print_stats(run, item->input, img->width, img->height, img->channels, stats);
        pthread_mutex_unlock(&run->report_lock);
    }
    free(stats);
    if (status == 0 && item->output)
        status = gf_image_save(img, item->output, job->format, job->quality);
    atomic_fetch_add(&run->decoded_on_cpu, 1);
    if (status == 0 && item->output)
        atomic_fetch_add(&run->encoded_on_cpu, 1);
    if (status == 0 && job->verbose) {
        gf_gpu_item_report r = {.width = img->width, .height = img->height,
                                .channels = img->channels, .depth = img->depth, .decoder = "CPU",
                                .orientation = orientation,
                                .encoder = item->output ? "CPU" : NULL, .decode_ms = t1 - t0,
                                .filter_ms = t2 - t1, .encode_ms = gf_now_ms() - t2};
        pthread_mutex_lock(&run->report_lock);
        print_stages(run, item->input, &r, backend->name);
        pthread_mutex_unlock(&run->report_lock);
    }
    gf_image_free(img);
    return status;
}

static void note_done(batch_run *run)
{
    atomic_fetch_add(&run->done, 1);
    if (run->progress) {
        pthread_mutex_lock(&run->report_lock);
        show_progress(run);
        pthread_mutex_unlock(&run->report_lock);
    }
}

/* What the GPU codec stage reports of each file it took (its threads). */
static void gpu_report(void *user, const gf_gpu_item_report *r)
{
    batch_run *run = user;
    if (r->status < 0) {
        report_failure(run);
    } else {
        const char *input = run->batch->items[r->item].input;
        atomic_fetch_add(strcmp(r->decoder, "CPU") == 0 ? &run->decoded_on_cpu : &run->decoded_on_gpu, 1);
        if (r->encoder)
            atomic_fetch_add(strcmp(r->encoder, "CPU") == 0 ? &run->encoded_on_cpu : &run->encoded_on_gpu, 1);
        pthread_mutex_lock(&run->report_lock);
        if (run->job->stats)
            print_stats(run, input, r->width, r->height, r->channels, r->stats);
        if (run->job->verbose)
            print_stages(run, input, r, "cuda");
        pthread_mutex_unlock(&run->report_lock);
    }
    note_done(run);
}

/* Read and probe a file for the GPU stage: 1 when it was handed over (or
 * failed, reported), 0 when it is for this worker's CPU codecs, in *file. */
static int offer_to_gpu(batch_run *run, size_t i, read_file *file)
{
    const gf_batch_item *item = &run->batch->items[i];
    unsigned char *data = gf_read_input(item->input, &file->size);
    if (!data || gf_image_probe_memory(data, file->size, item->input, &file->probe) < 0) {
        free(data);
        report_failure(run);
        note_done(run);
        return 1;
    }
    if (!gf_gpu_stage_wants(data, file->size, &file->probe)) {
        file->data = data;
        return 0;
    }
    gf_gpu_stage_offer(run->gpu, i, data, file->size, &file->probe);
    return 1;
}

static gf_backend *worker_backend(batch_run *run)
{
    gf_backend_options options = run->job->backend_options;
    if (!run->cuda)
        return run->job->backend == GF_BACKEND_REFERENCE ? gf_backend_reference_new(&options)
                                                          : gf_backend_cpu_new(&options);
    int index = atomic_fetch_add(&run->next_worker, 1);
    options.device = run->devices[index % run->device_count];
    options.pinned_staging = 1;
    return gf_backend_cuda_new(&options);
}

/* Each worker opens its backend for the first file it filters itself
 * (with the GPU codec stage, only files the stage does not take). */
static void *worker(void *arg)
{
    batch_run *run = arg;
    gf_backend *backend = NULL;
    int opened = 0;
    char why[512] = "";
    for (;;) {
        size_t i = atomic_fetch_add(&run->next, 1);
        if (i >= run->batch->count)
            break;
        read_file file = {0};
        if (run->gpu && offer_to_gpu(run, i, &file))
            continue;
        if (!opened) {
            opened = 1;
            backend = worker_backend(run);
            if (!backend)  /* every file of this worker fails with the reason */
                snprintf(why, sizeof why, "%s", gf_error() + strlen("gpufilter: "));
        }
        if (!backend)
            gf_set_error("%s: %s", run->batch->items[i].input, why);
        if (!backend || process_item(run, backend, &run->batch->items[i], &file) < 0)
            report_failure(run);
        free(file.data);  /* not taken when there was no backend */
        note_done(run);
    }
    if (backend)
        backend->destroy(backend);
    return NULL;
}

/* Image buffers of a batch come from the allocator's heaps, not from a
 * fresh mmap each: glibc maps every block over its mmap threshold (at most
 * 32 MiB, less than one 12 Mpx RGB image) and unmaps it on free, so each
 * image would fault its buffers in page by page again, and every unmap
 * stops the other workers' cores for a TLB shootdown. Kept in the heaps
 * (and not trimmed), a worker's freed buffers serve its next image: on 16
 * cores, 200 JPEGs of 12 Mpx took 0.41 million page faults instead of 2.0
 * million, and ran 3-11% faster (bench/RESULTS.md). Memory stays bounded by
 * what the workers hold at once; blocks too big for a heap are still
 * mapped. */
static void keep_buffers_in_heaps(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

/* The GPU codec stage, for a batch on the GPU unless --codec cpu: where it
 * cannot start, --codec auto goes on with the CPU codecs (-v says why),
 * --codec gpu fails every file with the reason (-1). */
/* nvJPEG's start (its hardware decoder's handle, the decoder states) costs
 * about 0.9 s of a process on an H100 host; with 16 cores the CPU codecs
 * do about 70 files of 12 Mpx (~256 MiB of JPEG) in that time. */
#define GPU_CODEC_MIN_INPUT_BYTES ((unsigned long long)256 << 20)

/* Whether the file at path starts as a JPEG does (SOI, then a marker). */
static int starts_as_jpeg(const char *path)
{
    unsigned char head[3];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    const size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    return got == sizeof head && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF;
}

/* The JPEG inputs' bytes, counted up to 'enough': the other formats never
 * reach nvJPEG, so they do not repay its start. */
static unsigned long long jpeg_input_bytes(const gf_batch *batch, unsigned long long enough)
{
    unsigned long long total = 0;
    struct stat st;
    for (size_t i = 0; i < batch->count && total < enough; i++) {
        const char *path = batch->items[i].input;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && starts_as_jpeg(path))
            total += (unsigned long long)st.st_size;
    }
    return total;
}

static int start_gpu_codecs(batch_run *run)
{
    const gf_job *job = run->job;
    if (!run->cuda || job->codec == GF_CODEC_CPU || job->gray || job->depth == 16)
        return 0;  /* --gray, --depth 16: the CPU path converts the decoded image */
    if (job->codec == GF_CODEC_AUTO) {
        unsigned long long bytes = jpeg_input_bytes(run->batch, GPU_CODEC_MIN_INPUT_BYTES);
        if (bytes < GPU_CODEC_MIN_INPUT_BYTES) {
            if (job->verbose)
                fprintf(stderr, "gpufilter: JPEG on the CPU codecs: %.1f MiB of JPEG input, under the "
                        "256 MiB that repay nvJPEG's start (--codec gpu to take it)\n",
                        (double)bytes / (1 << 20));
            return 0;
        }
    }
    /* auto: only with the hardware decoder; nvJPEG's GPU backend decodes
     * slower than libjpeg-turbo on the cores (bench/RESULTS.md) */
    run->gpu = gf_gpu_stage_start(job, run->batch, run->devices, run->device_count,
                                  job->codec == GF_CODEC_AUTO, gpu_report, run);
    if (run->gpu) {
        snprintf(run->gpu_decoder, sizeof run->gpu_decoder, "%s", gf_gpu_stage_decoder(run->gpu));
        if (job->verbose)
            fprintf(stderr, "gpufilter: JPEG decoded on the %s, encoded on the GPU (%s)\n",
                    gf_gpu_stage_decoder(run->gpu), gf_nvjpeg_describe());
        return 0;
    }
    if (job->codec == GF_CODEC_AUTO) {
        if (job->verbose)
            fprintf(stderr, "gpufilter: JPEG on the CPU codecs: %s\n", gf_error() + strlen("gpufilter: "));
        return 0;
    }
    char why[512];
    snprintf(why, sizeof why, "%s", gf_error() + strlen("gpufilter: "));
    for (size_t i = 0; i < run->batch->count; i++)
        fprintf(stderr, "gpufilter: %s: --codec gpu: %s\n", run->batch->items[i].input, why);
    return -1;
}

static void print_codec_summary(const batch_run *run)
{
    const double seconds = (gf_now_ms() - run->started) / 1e3;
    const size_t files = run->batch->count;
    fprintf(stderr, "gpufilter: %zu files in %.2f s, %.1f images/s; decoded: %zu on the %s, %zu on "
            "the CPU; encoded: %zu on the GPU, %zu on the CPU\n", files, seconds,
            seconds > 0 ? (double)files / seconds : 0.0, atomic_load(&run->decoded_on_gpu),
            run->gpu_decoder[0] ? run->gpu_decoder : "GPU", atomic_load(&run->decoded_on_cpu),
            atomic_load(&run->encoded_on_gpu), atomic_load(&run->encoded_on_cpu));
}

size_t gf_batch_run(const gf_job *job, const gf_batch *batch, int workers, gf_backend *backend,
                    const int *devices, int device_count)
{
    keep_buffers_in_heaps();
    batch_run run = {
        .job = job,
        .batch = batch,
        .cuda = strcmp(backend->name, "cuda") == 0 && device_count > 0,
        .devices = devices,
        .device_count = device_count,
        .progress = !job->quiet && isatty(STDERR_FILENO),
        .started = gf_now_ms(),
    };
    pthread_mutex_init(&run.report_lock, NULL);
    if (workers < 1)
        workers = 1;
    if ((size_t)workers > batch->count)
        workers = batch->count ? (int)batch->count : 1;
    /* each image's own threads (convolution bands, PNG bands): a share of the cores */
    const int cores = gf_cpu_cores();
    gf_set_image_threads(cores > workers ? cores / workers : 1);
    if (start_gpu_codecs(&run) < 0) {
        pthread_mutex_destroy(&run.report_lock);
        return batch->count;
    }
    pthread_t *threads = calloc((size_t)workers, sizeof *threads);
    int started = 0;
    for (int i = 0; threads && i < workers; i++, started++)
        if (pthread_create(&threads[i], NULL, worker, &run) != 0)
            break;
    if (started == 0)  /* no thread could start: work on this one */
        worker(&run);
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    if (run.gpu)
        gf_gpu_stage_finish(run.gpu);  /* every file offered to it is done */
    if (job->verbose)
        print_codec_summary(&run);
    if (run.progress) {
        show_progress(&run);
        fputc('\n', stderr);
    }
    int refused = 0;
    if (job->summary && run.summary.files > 0) {
        refused = gf_stats_summary_print(stdout, job->stats, &run.summary) < 0;
        if (refused)
            fprintf(stderr, "%s\n", gf_error());
        fflush(stdout);
    }
    pthread_mutex_destroy(&run.report_lock);
    return refused ? GF_BATCH_USAGE : atomic_load(&run.failed);
}
