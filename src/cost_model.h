/* cost_model.h - --backend auto: the CPU or the GPU for one call.
 *
 * Each route's time is estimated from the work (values x taps of each
 * operation, by the CPU path cpu_conv.c takes), the cores, and the GPU's
 * fixed costs: starting the driver (hidden behind the decode, which runs
 * beside it), loading the kernels at the first launch, copying the image
 * there and back, and the driver's teardown of the context at the exit
 * (left to a child with GPUFILTER_EARLY_EXIT=1, exit_release.h). The CPU
 * route hides the decode behind its first convolution where it decodes
 * ahead or streams. The constants are measured by bench/cost_model.sh;
 * the machine they come from is named in cost_model.c. */
#ifndef GF_COST_MODEL_H
#define GF_COST_MODEL_H

#include <stdio.h>

#include "pipeline.h"

typedef struct {
    double cpu_ms;         /* the operations on the CPU's cores, after the decode */
    double cpu_hidden_ms;  /* the part of them that runs beside the decode */
    double gpu_ms;         /* what is left of the start, copies, kernels */
    double start_ms;       /* the driver's start ... */
    double hidden_ms;      /* ... the part of it the decode hides */
    double copy_ms, kernel_ms;
    double exit_ms;        /* the context's teardown (0 with GPUFILTER_EARLY_EXIT=1) */
    int cores;
    int use_gpu;
} gf_cost_estimate;

/* decode_ms: the estimated decode of the input (gf_cost_decode_ms);
 * cpu_beside_decode: the CPU route filters while it decodes (decode_ahead.h,
 * stream.h), so its first convolution hides up to the decode. */
void gf_cost_estimate_call(const gf_pipeline *pipeline, int width, int height, int channels,
                           double decode_ms, int cpu_beside_decode, int cores,
                           gf_cost_estimate *estimate);
/* The decode's estimate from the file's first bytes and the image's size. */
double gf_cost_decode_ms(const unsigned char *data, size_t size, int width, int height,
                         int channels);
/* One line for -v: both estimates and the choice. */
void gf_cost_explain(FILE *out, const gf_cost_estimate *estimate);

#endif
