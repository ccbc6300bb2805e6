/* no_cuda.c - the fuzz builds link no CUDA: --list-devices finds no GPU. */
#include <stdio.h>

#include "backend.h"
#include "util.h"

int gf_cuda_list_devices(FILE *out)
{
    (void)out;
    gf_set_error("no usable GPU (a fuzzing build has no CUDA)");
    return -1;
}

int gf_cuda_list_paths(FILE *out)
{
    (void)out;
    gf_set_error("no CUDA kernels (a fuzzing build has none)");
    return -1;
}
