/* cuda_fft.h - the large-mask fft method (cuFFT, loaded by cufft_dl.c):
 * per band, each filtered channel padded through the border, transformed,
 * multiplied by each matrix's conjugate spectrum, transformed back and
 * finished (kernels/conv2d_large.cu's fft kernels); and the estimates that
 * choose it over the direct and separable methods. */
#ifndef GF_CUDA_FFT_H
#define GF_CUDA_FFT_H

#include "../kernels/conv2d_large.h"

typedef struct gf_cuda_fft gf_cuda_fft;

/* Smallest n' >= n of the form 2^a 3^b 5^c (cuFFT's fast sizes). */
int gf_fft_size(int n);
/* Estimated milliseconds of launch p (its width, height and mask) by a
 * method: the direct, separable and fft ones (the rates measured by
 * bench/gpufilter-bench on the H200, bench/RESULTS.md). */
double gf_large_estimate_ms(int method, const conv2d_large_launch *p);
/* State for p's mask (p->weights on the device) over bands of up to
 * p->height rows: plans, buffers, the matrices' spectra. NULL and an error
 * when cuFFT is missing or memory runs out. */
gf_cuda_fft *gf_cuda_fft_prepare(const conv2d_large_launch *p, cudaStream_t stream);
/* One band: p->src, p->dst and p->height (at most the prepared one). */
int gf_cuda_fft_run(gf_cuda_fft *f, const conv2d_large_launch *p, cudaStream_t stream);
void gf_cuda_fft_free(gf_cuda_fft *f);

#endif
