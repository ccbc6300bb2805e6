/* cost_model.c - the estimates behind --backend auto (cost_model.h).
 *
 * Constants: bench/cost_model.sh measures them (it prints the CPU block),
 * here on the H200 host (16 Xeon cores): the machines where the choice
 * matters are those with a GPU. The CPU's are a core's share of a run on
 * all 16 (filter time x cores / values), so they carry how far those cores
 * scale; on a machine with fewer, faster cores (the development machine's)
 * the model overestimates the CPU, and takes the GPU a little sooner.
 */
#include "cost_model.h"

#include "cpu_conv.h"
#include "exit_release.h"

/* CPU, a core's share: a value of a convolution costs VALUE (its first
 * matrix included) + MATRIX per further matrix + TAP per multiply-add of
 * its path (cpu_conv.h), DOUBLE_TAP on the double path, FLOAT_TAP on the
 * float 1-D passes of a large factored mask. A further matrix costs
 * nothing measurable: sobel's pair, finished in floats, costs less a value
 * than gaussian5's one matrix. */
#define CPU_VALUE_NS 6.08
#define CPU_MATRIX_NS 0.0
#define CPU_TAP_NS 0.256
#define CPU_DOUBLE_TAP_NS 0.501
#define CPU_FLOAT_TAP_NS 0.103
#define CPU_TONE_NS 4.7            /* a tone operation, one thread, per value */
#define CPU_CLAHE_NS 9.0           /* --clahe, one thread, per value (6 to 12 measured), host on every backend */
#define HOST_DIFFUSE_NS 15.0       /* a diffusion iteration, one thread, per value (pm-exp) */
/* GPU */
#define GPU_START_MS 236.0         /* cuInit, the primary context, buffers (beside the decode) */
#define GPU_FIRST_LAUNCH_MS 15.0   /* the first launch's set of kernels, loaded then */
#define GPU_EXIT_MS 100.0          /* the driver's teardown of the context at the exit */
#define GPU_UPLOAD_BYTES_PER_NS 7.1   /* pageable host memory */
#define GPU_DOWNLOAD_BYTES_PER_NS 10.0
#define GPU_BYTES_PER_NS 1500.0    /* a kernel pass, read and write */
/* decoding, per value: JPEG on one core, PNG's rows unfiltered on the
 * host's cores (fewer cores: a longer decode, more of the start hidden) */
#define DECODE_PNG_NS 2.3
#define DECODE_JPEG_NS 1.7
#define DECODE_OTHER_NS 2.0

/* Nanoseconds a value of this mask costs, as a core's share. */
static double mask_ns(const gf_mask *mask)
{
    int taps = 0;
    const gf_cpu_path path = gf_cpu_conv_path(mask, &taps);
    const double tap_ns = path == GF_CPU_DOUBLE           ? CPU_DOUBLE_TAP_NS
                          : path == GF_CPU_SEPARABLE_FLOAT ? CPU_FLOAT_TAP_NS
                                                           : CPU_TAP_NS;
    return CPU_VALUE_NS + CPU_MATRIX_NS * (mask->count - 1) + taps * tap_ns;
}

void gf_cost_estimate_call(const gf_pipeline *pipeline, int width, int height, int channels,
                           double decode_ms, int cpu_beside_decode, int cores, gf_cost_estimate *e)
{
    const double values = (double)width * height * channels;
    double cpu_ns = 0.0, gpu_passes = 0.0, host_ns = 0.0, host_trips = 0.0, first_ns = 0.0;
    for (int i = 0; i < pipeline->count; i++) {
        const gf_op *op = &pipeline->ops[i];
        if (op->kind == GF_OP_DIFFUSE) {  /* on the host on either route: the GPU copies too */
            host_ns += values * op->diffuse.iterations * HOST_DIFFUSE_NS / cores;
            host_trips += 1.0;
        } else if (op->kind == GF_OP_CONVOLVE) {
            const double ns = values * mask_ns(op->mask) / cores;
            if (i == 0)
                first_ns = ns;
            cpu_ns += ns;
            gpu_passes += 1.0;
        } else if (op->kind == GF_OP_CLAHE) {
            /* the host's work either way; the GPU adds a copy there and back */
            host_ns += values * CPU_CLAHE_NS;
            host_trips += 1.0;
        } else {
            cpu_ns += values * CPU_TONE_NS;
            gpu_passes += 2.0;  /* a histogram or a reduction, then the table */
        }
    }
    *e = (gf_cost_estimate){0};
    e->cores = cores;
    if (cpu_beside_decode)  /* the first convolution waits at most for the decode's rows */
        e->cpu_hidden_ms = decode_ms < first_ns / 1e6 ? decode_ms : first_ns / 1e6;
    e->cpu_ms = (cpu_ns + host_ns) / 1e6 - e->cpu_hidden_ms;
    e->start_ms = GPU_START_MS;
    e->hidden_ms = decode_ms < GPU_START_MS ? decode_ms : GPU_START_MS;
    e->copy_ms = (1.0 + host_trips) *
                 (values / GPU_UPLOAD_BYTES_PER_NS + values / GPU_DOWNLOAD_BYTES_PER_NS) / 1e6;
    e->kernel_ms = GPU_FIRST_LAUNCH_MS + gpu_passes * 2.0 * values / GPU_BYTES_PER_NS / 1e6;
    e->exit_ms = gf_early_exit_wanted() ? 0.0 : GPU_EXIT_MS;  /* else a child pays it */
    e->gpu_ms = e->start_ms - e->hidden_ms + e->copy_ms + e->kernel_ms + e->exit_ms + host_ns / 1e6;
    e->use_gpu = e->gpu_ms < e->cpu_ms;
}

double gf_cost_decode_ms(const unsigned char *data, size_t size, int width, int height,
                         int channels)
{
    const double values = (double)width * height * channels;
    double ns = DECODE_OTHER_NS;
    if (size >= 8 && data[0] == 0x89 && data[1] == 'P' && data[2] == 'N' && data[3] == 'G')
        ns = DECODE_PNG_NS;
    else if (size >= 2 && data[0] == 0xFF && data[1] == 0xD8)
        ns = DECODE_JPEG_NS;
    return values * ns / 1e6;
}

void gf_cost_explain(FILE *out, const gf_cost_estimate *e)
{
    char beside[64] = "";
    if (e->cpu_hidden_ms > 0.0)
        snprintf(beside, sizeof beside, " (%.0f ms more beside the decode)", e->cpu_hidden_ms);
    fprintf(out, "gpufilter: auto: the %s (estimates: cpu %.1f ms on %d cores%s; gpu %.1f ms = "
            "start %.0f ms - %.0f ms hidden by the decode + copies %.1f ms + kernels %.1f ms, their "
            "load at the first launch included + exit %.0f ms)\n",
            e->use_gpu ? "GPU" : "CPU", e->cpu_ms, e->cores, beside, e->gpu_ms, e->start_ms,
            e->hidden_ms, e->copy_ms, e->kernel_ms, e->exit_ms);
}
