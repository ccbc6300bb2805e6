/* cpu_conv.h - the fast CPU convolution: the reference's bytes, sooner.
 *
 * The same result as gf_conv2d_cpu (backend.h) on every mask, border and
 * image, byte for byte: integer masks are summed exactly in 32-bit
 * integers (separable ones as a row pass and a column pass, constant rows
 * or columns as running sums), other masks in doubles in the reference's
 * order of additions; every value is then finished with the reference's
 * double arithmetic. One exception: a non-integer mask wider or taller
 * than GF_MASK_SMALL_SIZE that factors (a large gaussian) is summed as two
 * 1-D passes in float, as the GPU sums it, which can differ from the
 * reference by one level where a value lies within the float error of a
 * rounding tie ((width + height) 2^-24 of the sum's size). Bands of rows run on threads; the inner loops are
 * plain C over whole rows, which the compiler vectorizes.
 *
 * 16-bit samples (gf_conv2d_fast16) take the same paths, the integer ones
 * while every sum stays under the same bound with 65535 for 255 (else
 * double), and the same result as gf_conv2d_cpu16; the large non-integer
 * masks that factor sum their 1-D passes in double there, not float (the
 * float error grows with the values: it would reach rounding ties 256
 * times as often), so the exception above is 8-bit only and at 16 bits
 * only the summation order differs (an error near 2^-53 of the sum). */
#ifndef GF_CPU_CONV_H
#define GF_CPU_CONV_H

#include <stdint.h>

#include "border.h"
#include "mask.h"

/* How a mask is summed: the path, and why (for -v). */
typedef enum {
    GF_CPU_DOUBLE = 0,        /* non-integer weights, or sums over 32 bits */
    GF_CPU_INTEGER,           /* every tap of every matrix */
    GF_CPU_SEPARABLE,         /* column x row, 1-D passes (running sums where constant) */
    GF_CPU_SEPARABLE_FLOAT,   /* non-integer column x row past 31 taps: 1-D passes in float */
    GF_CPU_SEPARABLE_DOUBLE,  /* the same at 16 bits a sample, in double */
} gf_cpu_path;

/* The path a mask takes, and the multiply-adds it costs a value: the
 * non-zero taps of every matrix, or a separable mask's row and column
 * taps (2 for a running sum). */
gf_cpu_path gf_cpu_conv_path(const gf_mask *mask, int *taps);
/* The same for samples of 'depth' bits (8 or 16). */
gf_cpu_path gf_cpu_conv_path_depth(const gf_mask *mask, int depth, int *taps);
const char *gf_cpu_path_name(gf_cpu_path path);

/* threads: bands run at once (at most one a row); 0: gf_image_threads(),
 * fewer for small work. Returns the bands it ran, or -1
 * (out of memory). */
int gf_conv2d_fast(const unsigned char *src, unsigned char *dst, int width, int height,
                   int channels, int channels_filtered, const gf_mask *mask, gf_border border,
                   int threads);
/* Source rows that may still be arriving, top to bottom (a decode beside
 * the convolution): wait(ctx, row) returns 0 once image row 'row' and all
 * above it are there, or -1 when they never will be. */
typedef struct {
    int (*wait)(void *ctx, int row);
    void *ctx;
} gf_rows_ready;
/* gf_conv2d_fast on every core, its output rows in units that the threads
 * take in order, each once the source rows it reads are ready; -2 when a
 * wait failed (dst then undefined). */
int gf_conv2d_fast_ahead(const unsigned char *src, unsigned char *dst, int width, int height,
                         int channels, int channels_filtered, const gf_mask *mask,
                         gf_border border, const gf_rows_ready *ready);
/* The same over 16-bit samples, results clamped to 0..65535. */
int gf_conv2d_fast16(const uint16_t *src, uint16_t *dst, int width, int height, int channels,
                     int channels_filtered, const gf_mask *mask, gf_border border, int threads);

#endif
