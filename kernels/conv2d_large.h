/* conv2d_large.h - plain C entry points of conv2d_large.cu: masks of any
 * size (wider or taller than conv2d.cu's 31), and the unsharp combine, by
 * one of three methods (conv2d_large.cu's opening comment). Launchers
 * enqueue on 'stream', check the launch and never synchronise. */
#ifndef GF_CONV2D_LARGE_H
#define GF_CONV2D_LARGE_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../src/mask.h"

enum {
    CONV2D_LARGE_DIRECT = 0,
    CONV2D_LARGE_SEPARABLE,
    CONV2D_LARGE_BOX,
    CONV2D_LARGE_FFT,  /* cuFFT's transforms, driven by src/cuda_fft.c, with the kernels below */
    CONV2D_LARGE_METHODS
};
typedef struct {
    const unsigned char *src;  /* device, width * height * channels, interleaved */
    unsigned char *dst;        /* device, same shape; must not alias src */
    int width, height, channels, channels_filtered, border;
    int mask_width, mask_height, mask_count, combine;
    const float *weights;      /* direct: device, mask_count matrices, row-major */
    const float *row, *column; /* separable: device, mask_width and mask_height floats */
    float scale[4], offset[4];
    float amount, threshold;   /* GF_COMBINE_UNSHARP */
    double box_weight;         /* box: the one weight */
    double scale_exact, offset_exact;  /* box: matrix 0's, finished in double */
    unsigned box_divisor;      /* box: the whole scale S where the sum finishes in integers
                                  (weight 1, offset 0, no unsharp), else 0 */
    unsigned box_magic, box_shift;  /* (n x box_magic) >> (32 + box_shift) = n / S (box_round) */
    void *scratch;             /* device, conv2d_large_scratch_bytes() */
} conv2d_large_launch;
/* The method for a mask: box for one matrix of equal weights, separable
 * for one that factors, else direct. */
int conv2d_large_method_for(const gf_mask *mask);
const char *conv2d_large_method_name(int method);
/* p for the mask over an image of this shape: everything but src, dst and
 * the device arrays (weights, row, column, scratch). */
void conv2d_large_launch_of(const gf_mask *mask, int width, int height, int channels,
                            int channels_filtered, int border, conv2d_large_launch *p);
size_t conv2d_large_scratch_bytes(int method, const conv2d_large_launch *p);
/* Methods direct, separable and box (fft: src/cuda_fft.c). */
cudaError_t conv2d_large_gpu(int method, const conv2d_large_launch *p, cudaStream_t stream);

/* The fft method's kernels on lw x lh real arrays and their lh x (lw/2 + 1)
 * complex spectra (see conv2d_large.cu). */
typedef struct {
    const float *plane[4];  /* matrix k's correlation, lw floats a row */
} conv2d_fft_results;
cudaError_t conv2d_fft_pad_image(const conv2d_large_launch *p, int channel, float *real, int lw, int lh,
                                 cudaStream_t stream);
cudaError_t conv2d_fft_pad_weights(const conv2d_large_launch *p, int k, float *real, int lw, int lh,
                                   cudaStream_t stream);
cudaError_t conv2d_fft_correlate(const void *image, const void *weights, void *out, size_t n, float scale,
                                 cudaStream_t stream);
cudaError_t conv2d_fft_finish(const conv2d_large_launch *p, int channel, conv2d_fft_results results, int lw,
                              cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
