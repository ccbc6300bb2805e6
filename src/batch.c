/* batch.c - many images in one run. */
#include "batch.h"

#include <errno.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu_batch.h"
#include "image.h"
#include "nvjpeg_codec.h"
#include "pipeline.h"
#include "tone_report.h"
#include "util.h"

/* ---- planning --------------------------------------------------------------- */

unsigned gf_batch_shard_of(const char *path, unsigned count)
{
    uint64_t h = 1469598103934665603ull;  /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return (unsigned)(h % count);
}

static const char *extension_for(gf_format format)
{
    switch (format) {
    case GF_FORMAT_JPEG: return "jpg";
    case GF_FORMAT_BMP: return "bmp";
    case GF_FORMAT_TGA: return "tga";
    default: return "png";
    }
}

char *gf_batch_output_name(const char *dir, const char *input, const char *suffix,
                           gf_format format)
{
    const char *base = strrchr(input, '/');
    base = base ? base + 1 : input;
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    const char *ext = format != GF_FORMAT_NONE ? extension_for(format)
                      : dot && gf_format_from_name(dot + 1) != GF_FORMAT_NONE ? dot + 1
                                                                              : "png";
    size_t size = strlen(dir) + 1 + stem + strlen(suffix) + 1 + strlen(ext) + 1;
    char *name = malloc(size);
    if (name)
        snprintf(name, size, "%s/%.*s%s.%s", dir, (int)stem, base, suffix, ext);
    return name;
}

typedef struct {
    char **paths;
    size_t count, capacity;
} path_list;

static int add_path(path_list *list, const char *path)
{
    if (list->count == list->capacity) {
        size_t capacity = list->capacity * 2 + 64;
        char **paths = realloc(list->paths, capacity * sizeof *paths);
        if (!paths)
            return -1;
        list->paths = paths;
        list->capacity = capacity;
    }
    if (!(list->paths[list->count] = strdup(path)))
        return -1;
    list->count++;
    return 0;
}

static void free_paths(path_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        free(list->paths[i]);
    free(list->paths);
}

/* One path per line; blank lines are skipped, a trailing '\r' dropped. */
static int read_file_list(const char *from, path_list *list)
{
    FILE *f = strcmp(from, "-") == 0 ? stdin : fopen(from, "r");
    if (!f) {
        gf_set_error("%s: %s", from, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t size = 0;
    ssize_t n;
    int status = 0;
    while ((n = getline(&line, &size, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n > 0 && add_path(list, line) < 0) {
            gf_set_error("out of memory reading %s", from);
            status = -1;
            break;
        }
    }
    if (status == 0 && ferror(f)) {
        gf_set_error("%s: cannot read the file list", from);
        status = -1;
    }
    free(line);
    if (f != stdin)
        fclose(f);
    return status;
}

static int make_folder(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        gf_set_error("%s: path too long", dir);
        return -1;
    }
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0777) < 0 && errno != EEXIST) {
            gf_set_error("%s: cannot create the output folder: %s", dir, strerror(errno));
            return -1;
        }
        *p = c;
        if (c == '\0')
            break;
    }
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        gf_set_error("%s: not a folder", dir);
        return -1;
    }
    return 0;
}

typedef struct {
    const char *key;  /* what is compared */
    size_t item;      /* which batch item it belongs to */
} keyed;

static int compare_keyed(const void *a, const void *b)
{
    return strcmp(((const keyed *)a)->key, ((const keyed *)b)->key);
}

/* Two inputs with one output name. */
static int check_shared_outputs(const gf_batch *batch)
{
    size_t n = batch->count;
    keyed *outputs = calloc(n ? n : 1, sizeof *outputs);
    if (!outputs) {
        gf_set_error("out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        outputs[i] = (keyed){batch->items[i].output, i};
    qsort(outputs, n, sizeof *outputs, compare_keyed);
    int status = 0;
    for (size_t i = 1; i < n && status == 0; i++)
        if (strcmp(outputs[i].key, outputs[i - 1].key) == 0) {
            gf_set_error("%s and %s would both be written to %s; use separate runs or --suffix",
                         batch->items[outputs[i - 1].item].input, batch->items[outputs[i].item].input,
                         outputs[i].key);
            status = -1;
        }
    free(outputs);
    return status;
}

typedef struct {
    dev_t device;
    ino_t inode;
    size_t item;
} file_id;

static int compare_file_id(const void *a, const void *b)
{
    const file_id *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->inode < y->inode ? -1 : x->inode > y->inode;
}

/* An output that is an input: the same file, compared by device and inode,
 * so that a symbolic or hard link to an input counts as the input. An
 * output that does not exist yet cannot be one. */
static int check_outputs_onto_inputs(const gf_batch *batch)
{
    size_t n = batch->count, known = 0;
    file_id *inputs = calloc(n ? n : 1, sizeof *inputs);
    if (!inputs) {
        gf_set_error("out of memory");
        return -1;
    }
    struct stat st;
    for (size_t i = 0; i < n; i++)
        if (stat(batch->items[i].input, &st) == 0)
            inputs[known++] = (file_id){st.st_dev, st.st_ino, i};
    qsort(inputs, known, sizeof *inputs, compare_file_id);
    int status = 0;
    for (size_t i = 0; i < n && status == 0; i++) {
        if (stat(batch->items[i].output, &st) < 0)
            continue;
        file_id probe = {st.st_dev, st.st_ino, 0};
        const file_id *hit = bsearch(&probe, inputs, known, sizeof *inputs, compare_file_id);
        if (hit) {
            gf_set_error("%s: the output of %s would overwrite the input %s",
                         batch->items[i].output, batch->items[i].input,
                         batch->items[hit->item].input);
            status = -1;
        }
    }
    free(inputs);
    return status;
}

static int check_collisions(const gf_batch *batch)
{
    return check_shared_outputs(batch) < 0 || check_outputs_onto_inputs(batch) < 0 ? -1 : 0;
}

int gf_batch_plan(const gf_job *job, char **inputs, int input_count, gf_batch *batch)
{
    memset(batch, 0, sizeof *batch);
    path_list all = {0};
    for (int i = 0; i < input_count; i++)
        if (add_path(&all, inputs[i]) < 0) {
            free_paths(&all);
            gf_set_error("out of memory");
            return GF_EXIT_FILE;
        }
    if (job->files_from && read_file_list(job->files_from, &all) < 0) {
        free_paths(&all);
        return GF_EXIT_FILE;
    }
    if (job->output_dir && make_folder(job->output_dir) < 0) {
        free_paths(&all);
        return GF_EXIT_FILE;
    }
    batch->items = calloc(all.count ? all.count : 1, sizeof *batch->items);
    if (!batch->items) {
        free_paths(&all);
        gf_set_error("out of memory");
        return GF_EXIT_FILE;
    }
    for (size_t i = 0; i < all.count; i++) {
        if (job->shard_count > 1 &&
            gf_batch_shard_of(all.paths[i], (unsigned)job->shard_count) != (unsigned)job->shard_index) {
            free(all.paths[i]);
            continue;
        }
        gf_batch_item *item = &batch->items[batch->count++];
        item->input = all.paths[i];
        if (job->output_dir &&
            !(item->output = gf_batch_output_name(job->output_dir, item->input,
                                                  job->suffix ? job->suffix : "", job->format))) {
            free(all.paths);
            gf_batch_free(batch);
            gf_set_error("out of memory");
            return GF_EXIT_FILE;
        }
    }
    free(all.paths);
    if (job->output_dir && check_collisions(batch) < 0) {
        gf_batch_free(batch);
        return GF_EXIT_USAGE;
    }
    return 0;
}

void gf_batch_free(gf_batch *batch)
{
    for (size_t i = 0; i < batch->count; i++) {
        free(batch->items[i].input);
        free(batch->items[i].output);
    }
    free(batch->items);
    memset(batch, 0, sizeof *batch);
}

/* ---- running ------------------------------------------------------------------- */

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
    fprintf(stderr, "gpufilter: %s %dx%dx%d: decode %s %.1f ms, filter %.1f ms on %s", input,
            r->width, r->height, r->channels, r->decoder, r->decode_ms, r->filter_ms, backend);
    if (r->encoder)
        fprintf(stderr, ", encode %s %.1f ms, write %.1f ms", r->encoder, r->encode_ms, r->write_ms);
    fputc('\n', stderr);
}

/* Decode, filter on this worker's backend, report statistics, encode and
 * write. */
static int process_item(batch_run *run, gf_backend *backend, const gf_batch_item *item)
{
    const gf_job *job = run->job;
    double t0 = gf_now_ms();
    gf_image *img = gf_image_load_limited(item->input);
    if (!img)
        return -1;
    if (job->gray)
        gf_image_to_gray(img);
    double t1 = gf_now_ms();
    gf_channel_stats stats[4];
    int status = gf_pipeline_run(&job->pipeline, backend, img, job->stats ? stats : NULL,
                                 item->output != NULL, NULL);
    if (status == -1)
        gf_error_name_file(item->input);
    double t2 = gf_now_ms();
    if (status == 0 && job->stats) {
        pthread_mutex_lock(&run->report_lock);
        print_stats(run, item->input, img->width, img->height, img->channels, stats);
        pthread_mutex_unlock(&run->report_lock);
    }
    if (status == 0 && item->output)
        status = gf_image_save(img, item->output, job->format, job->quality);
    atomic_fetch_add(&run->decoded_on_cpu, 1);
    if (status == 0 && item->output)
        atomic_fetch_add(&run->encoded_on_cpu, 1);
    if (status == 0 && job->verbose) {
        gf_gpu_item_report r = {.width = img->width, .height = img->height,
                                .channels = img->channels, .decoder = "CPU",
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
 * failed, reported), 0 when it is for this worker's CPU codecs. */
static int offer_to_gpu(batch_run *run, size_t i)
{
    const gf_batch_item *item = &run->batch->items[i];
    size_t size = 0;
    unsigned char *data = gf_read_input(item->input, &size);
    gf_image_probe probe;
    if (!data || gf_image_probe_memory(data, size, item->input, &probe) < 0) {
        free(data);
        report_failure(run);
        note_done(run);
        return 1;
    }
    if (!gf_gpu_stage_wants(run->job, data, size, &probe)) {
        free(data);
        return 0;
    }
    gf_gpu_stage_offer(run->gpu, i, data, size, &probe);
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
        if (run->gpu && offer_to_gpu(run, i))
            continue;
        if (!opened) {
            opened = 1;
            backend = worker_backend(run);
            if (!backend)  /* every file of this worker fails with the reason */
                snprintf(why, sizeof why, "%s", gf_error() + strlen("gpufilter: "));
        }
        if (!backend)
            gf_set_error("%s: %s", run->batch->items[i].input, why);
        if (!backend || process_item(run, backend, &run->batch->items[i]) < 0)
            report_failure(run);
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

/* The inputs' bytes, counted up to 'enough'. */
static unsigned long long input_bytes(const gf_batch *batch, unsigned long long enough)
{
    unsigned long long total = 0;
    struct stat st;
    for (size_t i = 0; i < batch->count && total < enough; i++)
        if (stat(batch->items[i].input, &st) == 0 && S_ISREG(st.st_mode))
            total += (unsigned long long)st.st_size;
    return total;
}

static int start_gpu_codecs(batch_run *run)
{
    const gf_job *job = run->job;
    if (!run->cuda || job->codec == GF_CODEC_CPU)
        return 0;
    if (job->codec == GF_CODEC_AUTO) {
        unsigned long long bytes = input_bytes(run->batch, GPU_CODEC_MIN_INPUT_BYTES);
        if (bytes < GPU_CODEC_MIN_INPUT_BYTES) {
            if (job->verbose)
                fprintf(stderr, "gpufilter: JPEG on the CPU codecs: %.1f MiB of input, under the "
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
    if (job->summary && run.summary.files > 0) {
        gf_stats_summary_print(stdout, job->stats, &run.summary);
        fflush(stdout);
    }
    pthread_mutex_destroy(&run.report_lock);
    return atomic_load(&run.failed);
}
