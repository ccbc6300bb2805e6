/* depth16.h - plain C entry points of depth16.cu: the GPU operations on
 * images of 16 bits a sample (uint16_t, interleaved). Launchers enqueue on
 * 'stream', check the launch and never synchronise. */
#ifndef GF_DEPTH16_H
#define GF_DEPTH16_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const uint16_t *src;       /* device, width * height * channels, interleaved */
    uint16_t *dst;             /* device, same shape; must not alias src */
    int width, height, channels, channels_filtered, border;
    int mask_width, mask_height, mask_count, combine;
    const double *weights;     /* direct: mask_count matrices, row-major */
    const int *int_weights;    /* direct: the same as integers, or NULL (sums in double) */
    const double *row, *column;  /* separable: mask_width and mask_height weights */
    double scale[4], offset[4];
    double amount, threshold;  /* GF_COMBINE_UNSHARP */
    int int_scale, int_offset; /* direct, integer, one matrix, no combine: the scale and
                                * offset as integers (finished in integers), or 0 */
    unsigned long long int_magic;  /* dividing by int_scale: a multiply and int_shift */
    int int_shift;
    int small_sums;            /* 65535 x sum |w| < 2^21: the finish in float (exact) */
    float float_reciprocal;    /* 1 / int_scale */
    int float_finish;          /* small_sums and int_scale odd or a power of two: sums and
                                * finish in float are exact (the streaming 3x3 kernel) */
    double *scratch;           /* separable: depth16_scratch_bytes() */
} depth16_conv;

/* Any mask, every matrix: 3x3 and 5x5 four outputs a thread, other sizes
 * one, the taps read through the cache; sums in 32-bit integers where
 * int_weights is set, else in double. A 3x3 with float_finish set streams
 * down rows in float where rows are whole words (width x channels a
 * multiple of 8; RGB: width a multiple of 4) on aligned buffers. */
cudaError_t depth16_conv_direct(const depth16_conv *p, cudaStream_t stream);
/* One matrix, column x row: a row pass into double scratch, then a column
 * pass. */
cudaError_t depth16_conv_separable(const depth16_conv *p, cudaStream_t stream);
size_t depth16_scratch_bytes(const depth16_conv *p);
/* Set int_scale to scale (1..2^30), with the multiplier and shift that
 * divide dividends under 2^31 by it; bound: 65535 x sum |w|. */
void depth16_set_integer_scale(depth16_conv *p, int scale, int offset, double bound);

/* 65536-bin counts (zeroed first) of the luma of RGB pixels (luma set: one
 * histogram), or of every channel (one histogram a channel). */
cudaError_t depth16_histogram(const uint16_t *px, size_t pixels, int channels, int luma,
                              unsigned int *counts, cudaStream_t stream);

enum { DEPTH16_LUT_PER_CHANNEL = 0, DEPTH16_LUT_SHARED, DEPTH16_LUT_LUMA };
/* Map channels 0..colour-1 through 65536-entry tables: table c for channel
 * c, table 0 for all, or table 0 on the luma of RGB (tone.h). */
cudaError_t depth16_apply_lut(uint16_t *px, size_t pixels, int channels, int colour,
                              const uint16_t *luts, int mode, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
