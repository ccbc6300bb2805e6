/* cost_model.c - the estimates behind --backend auto (cost_model.h).
 *
 * Constants: bench/cost_model.sh measures them (one run prints this block);
 * CPU rates are per core, in values x taps per nanosecond. */
#include "cost_model.h"

#include "cpu_conv.h"

/* CPU: cpu_conv.c's paths (a tap of the double path counts double) */
#define CPU_TAPS_PER_NS 1.0        /* integer taps, vectorized */
#define CPU_FINISH_TAPS 4.0        /* the finish of a value (divide, round), in taps */
#define CPU_TONE_NS_PER_VALUE 1.5  /* a tone operation, one thread */
/* GPU */
#define GPU_START_MS 300.0         /* cuInit, the primary context, the module */
#define GPU_COPY_BYTES_PER_NS 5.0  /* pageable host memory, each way */
#define GPU_BYTES_PER_NS 1500.0    /* a kernel pass, read and write */
/* decoding (one core), per value */
#define DECODE_PNG_NS 6.0
#define DECODE_JPEG_NS 3.0
#define DECODE_OTHER_NS 2.0

/* Taps one value of this mask costs on the CPU path it takes. */
static double mask_taps(const gf_mask *mask)
{
    const gf_cpu_path path = gf_cpu_conv_path(mask);
    if (path == GF_CPU_SEPARABLE) {
        /* a constant row or column is a running sum: about 2 taps whatever its length */
        return (mask->width > 3 ? 3.0 : mask->width) + (mask->height > 3 ? 3.0 : mask->height);
    }
    double taps = 0.0;
    for (int k = 0; k < mask->count; k++)
        for (int i = 0; i < mask->width * mask->height; i++)
            taps += mask->weights[k][i] != 0.0;
    return path == GF_CPU_DOUBLE ? 2.0 * taps : taps;
}

void gf_cost_estimate_call(const gf_pipeline *pipeline, int width, int height, int channels,
                           double decode_ms, int cores, gf_cost_estimate *e)
{
    const double values = (double)width * height * channels;
    double cpu_ns = 0.0, gpu_passes = 0.0;
    for (int i = 0; i < pipeline->count; i++) {
        const gf_op *op = &pipeline->ops[i];
        if (op->kind == GF_OP_CONVOLVE) {
            const double taps = mask_taps(op->mask) + CPU_FINISH_TAPS * op->mask->count;
            cpu_ns += values * taps / (CPU_TAPS_PER_NS * cores);
            gpu_passes += 1.0;
        } else {
            cpu_ns += values * CPU_TONE_NS_PER_VALUE;
            gpu_passes += 2.0;  /* a histogram or a reduction, then the table */
        }
    }
    *e = (gf_cost_estimate){0};
    e->cores = cores;
    e->cpu_ms = cpu_ns / 1e6;
    e->start_ms = GPU_START_MS;
    e->hidden_ms = decode_ms < GPU_START_MS ? decode_ms : GPU_START_MS;
    e->copy_ms = 2.0 * values / GPU_COPY_BYTES_PER_NS / 1e6;
    e->kernel_ms = gpu_passes * 2.0 * values / GPU_BYTES_PER_NS / 1e6;
    e->gpu_ms = e->start_ms - e->hidden_ms + e->copy_ms + e->kernel_ms;
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
    fprintf(out, "gpufilter: auto: the %s (estimates: cpu %.1f ms on %d cores; gpu %.1f ms = "
            "start %.0f ms - %.0f ms hidden by the decode + copies %.1f ms + kernels %.1f ms)\n",
            e->use_gpu ? "GPU" : "CPU", e->cpu_ms, e->cores, e->gpu_ms, e->start_ms, e->hidden_ms,
            e->copy_ms, e->kernel_ms);
}
