/* cuda_hold.c - keeps one CUDA context open until its standard input closes.
 *
 * The CUDA CLI suite starts gpufilter thousands of times. Where the driver
 * is not kept loaded between processes (no persistence daemon), every start
 * pays the GPU's initialisation again; one process holding a context for the
 * length of the run keeps the driver warm. The suite's conftest starts this
 * helper when it exists next to the binary under test. Prints "ready" once
 * the context exists; exits 1 if no device can be initialised. */
#include <stdio.h>
#include <cuda_runtime_api.h>

int main(void)
{
    if (cudaFree(0) != cudaSuccess) {
        fprintf(stderr, "cuda-hold: no usable CUDA device\n");
        return 1;
    }
    puts("ready");
    fflush(stdout);
    while (getchar() != EOF)
        ;
    return 0;
}
