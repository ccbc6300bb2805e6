/* main.c - the command line: options -> job, run, exit status.
 * Exit status: 0 success, 1 a file or the device failed, 2 bad usage. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "batch.h"
#include "exit_release.h"
#include "image.h"
#include "options.h"
#include "pipeline.h"
#include "route.h"
#include "stream.h"
#include "tone_report.h"
#include "util.h"

/* --backend auto takes the CPU, without a word, where no GPU is usable
 * (-v says why); --tile then has nothing to shape, and says so. */
static gf_backend *open_cpu_backend(const gf_job *j)
{
    if (j->backend_options.tile_width > 0 && !j->quiet)
        fprintf(stderr, "gpufilter: note: --tile shapes CUDA launches; the CPU backend ignores it\n");
    return j->backend == GF_BACKEND_REFERENCE ? gf_backend_reference_new(&j->backend_options)
                                              : gf_backend_cpu_new(&j->backend_options);
}

/* A batch's backend: a batch amortizes the GPU's start over its files, so
 * --backend auto takes the GPU wherever one is usable. */
static gf_backend *open_backend(const gf_job *j)
{
    if (j->backend == GF_BACKEND_CPU || j->backend == GF_BACKEND_REFERENCE)
        return open_cpu_backend(j);
    gf_backend *backend = gf_backend_cuda_new(&j->backend_options);
    if (backend || j->backend == GF_BACKEND_CUDA)
        return backend;
    if (j->verbose)
        fprintf(stderr, "gpufilter: %s; running on the CPU\n", gf_error() + strlen("gpufilter: "));
    return open_cpu_backend(j);
}

/* A positional OUTPUT that is an existing image gpufilter did not write is
 * most likely an input typed where the output goes (a glob of two files). */
static int output_may_be_an_input(const gf_job *j)
{
    if (!j->output || j->output_named || j->force || strcmp(j->output, "-") == 0 ||
        !gf_image_foreign_output(j->output, j->input))
        return 0;
    fprintf(stderr, "gpufilter: %s exists and is an image gpufilter did not write (a second "
            "input?); to replace it: --force, or --output %s; for several inputs: -o DIR\n",
            j->output, j->output);
    return 1;
}

/* --verify: the same operations on the reference backend, from a copy of
 * the decoded image; prints the largest difference and where, and returns
 * 0 when it is within one level (the GPU's float sums against the
 * reference's doubles), -1 otherwise or when the reference fails. */
#define GF_VERIFY_BOUND 1

static int verify_result(const gf_job *j, gf_image *reference, const gf_image *result,
                         const char *route)
{
    gf_backend *cpu = gf_backend_reference_new(&j->backend_options);
    if (!cpu || gf_pipeline_run(&j->pipeline, cpu, reference, NULL, 1, NULL) != 0) {
        if (cpu)
            cpu->destroy(cpu);
        gf_error_name_file(j->input);
        return -1;
    }
    cpu->destroy(cpu);
    if (reference->depth != result->depth || gf_image_bytes(reference) != gf_image_bytes(result)) {
        gf_set_error("%s: the %s result and the reference differ in shape; nothing written",
                     j->input, route);
        return -1;
    }
    const size_t n = gf_image_bytes(result) / (size_t)gf_image_sample_bytes(result);
    const int wide = result->depth == 16;
    size_t differ = 0, worst_at = 0;
    int worst = 0;
    for (size_t i = 0; i < n; i++) {
        const int d = wide ? abs((int)gf_image_samples16(result)[i] -
                                 (int)gf_image_samples16(reference)[i])
                           : abs((int)result->pixels[i] - (int)reference->pixels[i]);
        differ += d != 0;
        if (d > worst) {
            worst = d;
            worst_at = i;
        }
    }
    const size_t pixel = worst_at / (size_t)result->channels;
    fprintf(stderr, "gpufilter: verify: %s on %s against the reference: largest difference %d "
            "(x %zu, y %zu, channel %zu), %zu of %zu values differ; %s the bound of %d\n",
            j->input, route, worst, pixel % (size_t)result->width, pixel / (size_t)result->width,
            worst_at % (size_t)result->channels, differ, n,
            worst <= GF_VERIFY_BOUND ? "within" : "over", GF_VERIFY_BOUND);
    if (worst <= GF_VERIFY_BOUND)
        return 0;
    gf_set_error("%s: the %s result differs from the reference by %d levels; nothing written",
                 j->input, route, worst);
    return -1;
}

static gf_image *copy_of(const gf_image *img)
{
    gf_image *copy = gf_image_new_depth(img->width, img->height, img->channels, img->depth);
    if (copy)
        memcpy(copy->pixels, img->pixels, gf_image_bytes(img));
    return copy;
}

/* --codec gpu on one INPUT: a batch of one file through the GPU codec
 * stage (its statistics, if any, on standard output). */
static int run_on_gpu_codecs(const gf_job *j)
{
    if (j->stats && j->output && strcmp(j->output, "-") == 0) {
        fprintf(stderr, "gpufilter: --codec gpu writes --stats to standard output: give OUTPUT a "
                "file name\n");
        return GF_EXIT_USAGE;
    }
    gf_backend *backend = gf_backend_cuda_new(&j->backend_options);
    if (!backend) {
        fprintf(stderr, "%s\n", gf_error());
        return GF_EXIT_FILE;
    }
    gf_job one = *j;
    one.quiet = 1;  /* no progress line for one file */
    gf_batch_item item = {(char *)j->input, (char *)j->output};
    const gf_batch batch = {&item, 1};
    const int device = j->backend_options.device;
    size_t failed = gf_batch_run(&one, &batch, 1, backend, &device, 1);
    backend->destroy(backend);
    return failed ? GF_EXIT_FILE : EXIT_SUCCESS;
}

/* The pipeline on img; with 'ahead', img still being decoded by it
 * (decode_ahead.h), which this finishes once the pipeline has read every
 * row: -4 when that decode failed. Else gf_pipeline_run's status. */
static int run_pipeline(const gf_job *j, gf_backend *backend, gf_image *img,
                        gf_channel_stats *stats, gf_pipeline_times *times,
                        gf_decode_ahead *ahead, double *decode_ms)
{
    if (ahead) {
        const gf_rows_ready rows = gf_decode_ahead_rows(ahead);
        gf_backend_cpu_rows_ahead(backend, &rows);
    }
    int status = gf_pipeline_run(&j->pipeline, backend, img, stats,
                                 j->output != NULL || j->verify, times);
    if (ahead) {
        gf_backend_cpu_rows_ahead(backend, NULL);
        const int decoded = gf_decode_ahead_finish(ahead, decode_ms);
        if (decoded < 0)  /* -2, past --decode-timeout: its error set */
            status = decoded == -1 ? -4 : -1;
    }
    return status;
}

/* The decoded image through the pipeline on backend, then saved (or its
 * statistics printed); takes img. With 'ahead', img is still being
 * decoded by it (decode_ahead.h): GF_STREAM_DECLINED, nothing written or
 * said, when that decode failed. */
static int filter_and_save(const gf_job *j, gf_image *img, gf_backend *backend, double decode_ms,
                           gf_decode_ahead *ahead)
{
    int status = GF_EXIT_FILE;
    const int decoded_ahead = ahead != NULL;
    /* decode_ahead_wanted() leaves nothing to prepare: no --gray, no --depth 16 */
    if (!ahead && gf_image_prepare(img, j->gray, j->depth) < 0) {
        gf_error_name_file(j->input);
        fprintf(stderr, "%s\n", gf_error());
        gf_image_free(img);
        return GF_EXIT_FILE;
    }
    gf_image *reference = j->verify ? copy_of(img) : NULL;
    double t2 = gf_now_ms();
    gf_pipeline_times times = {0};
    /* 65536 bins a channel: on the heap, and only for --stats */
    gf_channel_stats *stats = j->stats ? calloc(4, sizeof *stats) : NULL;
    if ((j->verify && !reference) || (j->stats && !stats)) {
        gf_set_error("%s: out of memory for %s", j->input,
                     j->stats && !stats ? "the statistics" : "--verify's copy");
        if (ahead)  /* its thread writes into img until it ends */
            gf_decode_ahead_finish(ahead, NULL);
        gf_image_free(img);
        img = NULL;
    }
    if (img) {
        int run_status = run_pipeline(j, backend, img, j->stats ? stats : NULL, &times, ahead,
                                      &decode_ms);
        t2 = gf_now_ms();
        if (run_status == -1)
            gf_error_name_file(j->input);
        if (run_status == 0 && reference && verify_result(j, reference, img, backend->name) < 0)
            run_status = -3;
        if (run_status == 0 && j->stats) {
            FILE *out = j->output && strcmp(j->output, "-") == 0 ? stderr : stdout;
            gf_stats_print(out, j->stats, j->input, img->width, img->height, img->channels, stats);
            fflush(out);
        }
        if (run_status == 0 && (!j->output || gf_image_save(img, j->output, j->format, j->quality) == 0))
            status = EXIT_SUCCESS;
        else if (run_status == -2)
            status = GF_EXIT_USAGE;
        else if (run_status == -4)
            status = GF_STREAM_DECLINED;
    }
    if (status != EXIT_SUCCESS && status != GF_STREAM_DECLINED)
        fprintf(stderr, "%s\n", gf_error());
    else if (status == EXIT_SUCCESS && j->verbose)
        fprintf(stderr, "gpufilter: %s %dx%dx%d%s on %s: decode %.1f ms%s, upload %.1f ms, filter %.1f ms, "
                "download %.1f ms, encode %.1f ms\n", j->input, img->width, img->height,
                img->channels, img->depth == 16 ? " 16-bit" : "", backend->name, decode_ms,
                decoded_ahead ? " (beside the filter)" : "", times.upload_ms, times.filter_ms,
                times.download_ms, gf_now_ms() - t2);
    free(stats);
    gf_image_free(reference);
    gf_image_free(img);
    return status;
}

/* A large JPEG to JPEG on the CPU streams (stream.h): the call's status,
 * or, for a file that turns out not to stream, its image decoded whole
 * into *img and GF_STREAM_DECLINED. */
static int run_streamed(const gf_job *j, gf_route *route, gf_backend *backend, gf_image **img,
                        double *decode_ms)
{
    size_t size;
    const unsigned char *data = gf_route_stream_input(route, &size);
    int status = gf_stream_run(j, backend->name, data, size);
    if (status == GF_STREAM_DECLINED) {
        const double t0 = gf_now_ms();
        if (!(*img = gf_route_decode_whole(route)))
            status = GF_EXIT_FILE;
        *decode_ms = gf_now_ms() - t0;
    }
    if (status == GF_EXIT_FILE)
        fprintf(stderr, "%s\n", gf_error());
    return status;
}

/* A JPEG decoded ahead of the filter (decode_ahead.h): the call's status,
 * or, where the scanline decoder does not take the file or it fails part
 * way, its image decoded whole into *img and GF_STREAM_DECLINED. */
static int run_ahead(const gf_job *j, gf_route *route, gf_backend *backend, gf_image **img,
                     double *decode_ms)
{
    gf_decode_ahead *ahead = gf_route_decode_ahead(route);
    if (ahead) {
        const int status = filter_and_save(j, gf_decode_ahead_image(ahead), backend, 0.0, ahead);
        if (status != GF_STREAM_DECLINED)
            return status;
    }
    const double t0 = gf_now_ms();
    if (!(*img = gf_route_decode_whole(route))) {
        fprintf(stderr, "%s\n", gf_error());
        return GF_EXIT_FILE;
    }
    *decode_ms = gf_now_ms() - t0;
    return GF_STREAM_DECLINED;
}

static int run(const gf_job *j)
{
    if (output_may_be_an_input(j))
        return GF_EXIT_USAGE;
    if (j->codec == GF_CODEC_GPU)
        return run_on_gpu_codecs(j);
    if (j->jobs)
        gf_set_image_threads(j->jobs);
    gf_route *route = gf_route_begin(j);
    if (!route) {
        fprintf(stderr, "%s\n", gf_error());
        return GF_EXIT_FILE;
    }
    double t0 = gf_now_ms();
    gf_image *img = gf_route_load(route, j, j->input);
    double decode_ms = gf_now_ms() - t0;
    size_t stream_size;
    const int taken = !img && gf_route_stream_input(route, &stream_size);  /* streams or decodes ahead */
    gf_backend *backend = img || taken ? gf_route_backend(route, j) : NULL;
    int status = GF_EXIT_FILE;
    if (!backend)
        fprintf(stderr, "%s\n", gf_error());
    else if (taken && gf_route_decodes_ahead(route))
        status = run_ahead(j, route, backend, &img, &decode_ms);
    else if (taken)
        status = run_streamed(j, route, backend, &img, &decode_ms);
    gf_route_end(route);
    if (backend && img)
        status = filter_and_save(j, img, backend, decode_ms, NULL);
    else
        gf_image_free(img);
    if (backend)
        backend->destroy(backend);
    return status;
}

/* --tile sweep: the occupancy experiment on one image. */
static int run_sweep(const gf_job *j)
{
    gf_backend_options options = j->backend_options;
    options.log = NULL;
    gf_backend *backend = gf_backend_cuda_new(&options);
    if (!backend) {
        fprintf(stderr, "%s\n", gf_error());
        return GF_EXIT_FILE;
    }
    int status = GF_EXIT_FILE;
    gf_image *img = gf_image_load_limited(j->input);
    if (img) {
        const int filtered = gf_pipeline_channels_filtered(&j->pipeline, img->channels);
        const gf_op *op = &j->pipeline.ops[0];
        gf_diffuse how = op->diffuse;
        how.border = j->pipeline.border;
        how.channels_filtered = filtered;
        how.log = NULL;
        int sweep = op->kind == GF_OP_DIFFUSE
                        ? gf_cuda_diffuse_sweep(backend, img, &how, j->csv, stdout)
                        : gf_cuda_tile_sweep(backend, img, op->mask, j->pipeline.border, filtered,
                                             j->csv, stdout);
        status = sweep == 0 ? EXIT_SUCCESS : sweep == -2 ? GF_EXIT_USAGE : GF_EXIT_FILE;
        if (sweep == -1)
            gf_error_name_file(j->input);
    }
    if (status != EXIT_SUCCESS)
        fprintf(stderr, "%s\n", gf_error());
    gf_image_free(img);
    backend->destroy(backend);
    return status;
}

/* The CUDA devices a batch uses: --devices all or LIST, else --device. */
static int batch_devices(const gf_job *j, int *devices)
{
    int present = gf_cuda_device_count();
    if (present < 0)
        return -1;
    if (j->all_devices) {
        int n = present < GF_MAX_DEVICES ? present : GF_MAX_DEVICES;
        for (int i = 0; i < n; i++)
            devices[i] = i;
        return n;
    }
    if (j->device_count == 0) {
        devices[0] = j->backend_options.device;
        return 1;
    }
    for (int i = 0; i < j->device_count; i++) {
        if (j->devices[i] >= present) {
            gf_set_error("no CUDA device %d (this machine has %d)", j->devices[i], present);
            return -1;
        }
        devices[i] = j->devices[i];
    }
    return j->device_count;
}

static int run_batch(const gf_job *j)
{
    gf_batch batch;
    int status = gf_batch_plan(j, j->inputs, j->input_count, &batch);
    if (status != 0) {
        fprintf(stderr, "%s\n", gf_error());
        return status;
    }
    if (batch.count == 0) {
        gf_batch_free(&batch);
        return EXIT_SUCCESS;
    }
    gf_backend *backend = open_backend(j);
    if (!backend) {
        fprintf(stderr, "%s\n", gf_error());
        gf_batch_free(&batch);
        return GF_EXIT_FILE;
    }
    if (j->codec == GF_CODEC_GPU && strcmp(backend->name, "cuda") != 0) {
        fprintf(stderr, "gpufilter: --codec gpu needs the GPU: %s\n", gf_error() + strlen("gpufilter: "));
        backend->destroy(backend);
        gf_batch_free(&batch);
        return GF_EXIT_FILE;
    }
    int devices[GF_MAX_DEVICES], device_count = 0;
    if (strcmp(backend->name, "cuda") == 0 &&
        (device_count = batch_devices(j, devices)) < 0) {
        fprintf(stderr, "%s\n", gf_error());
        backend->destroy(backend);
        gf_batch_free(&batch);
        return GF_EXIT_FILE;
    }
    int workers = j->jobs ? j->jobs : gf_cpu_cores();
    if (j->verbose && device_count > 0)
        fprintf(stderr, "gpufilter: %zu files on %d worker threads, %d CUDA device%s\n",
                batch.count, workers, device_count, device_count == 1 ? "" : "s");
    size_t failed = gf_batch_run(j, &batch, workers, backend, devices, device_count);
    if (failed && failed != GF_BATCH_USAGE)
        fprintf(stderr, "gpufilter: %zu of %zu files failed\n", failed, batch.count);
    backend->destroy(backend);
    gf_batch_free(&batch);
    return failed == GF_BATCH_USAGE ? GF_EXIT_USAGE : failed ? GF_EXIT_FILE : EXIT_SUCCESS;
}

static void on_signal(int sig)
{
    gf_image_abort_save();
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    gf_job j;
    gf_job_init(&j);
    gf_image_read_umask();
    int status = gf_parse_options(argc, argv, &j);
    if (status < 0 && j.action != GF_ACTION_RUN)
        status = gf_job_print(&j);
    else if (status < 0)
        status = gf_job_prepare(&j);
    if (status < 0) {
        if (j.verbose)
            j.backend_options.log = stderr;
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        signal(SIGHUP, on_signal);
        status = j.tile_sweep ? run_sweep(&j) : j.batch ? run_batch(&j) : run(&j);
    }
    FILE *log = j.verbose ? stderr : NULL;
    gf_job_free(&j);
    return gf_exit_leaving_release(status, log);
}
