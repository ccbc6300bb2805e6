/* cufft_dl.h - cuFFT loaded at run time. libcufft comes with the CUDA
 * toolkit, not the driver: where it is missing the GPU backend runs large
 * masks without FFT. $GPUFILTER_CUFFT names the library file to load, or
 * "none" to go without. */
#ifndef GF_CUFFT_DL_H
#define GF_CUFFT_DL_H

#include <cufft.h>

typedef struct {
    cufftResult (*plan2d)(cufftHandle *plan, int nx, int ny, cufftType type);
    cufftResult (*exec_r2c)(cufftHandle plan, cufftReal *in, cufftComplex *out);
    cufftResult (*exec_c2r)(cufftHandle plan, cufftComplex *in, cufftReal *out);
    cufftResult (*set_stream)(cufftHandle plan, cudaStream_t stream);
    cufftResult (*destroy)(cufftHandle plan);
} gf_cufft_api;

/* The loaded functions, or NULL; *why (when not NULL) says which library
 * was loaded ("cuFFT 12.0.0") or why none was. Loaded once per process. */
const gf_cufft_api *gf_cufft(const char **why);

#endif
