/* conv2d_weights.h - what the planner reads from a mask's weights and
 * how it packs them for the kernels (conv2d_weights.cu): pure functions,
 * host only. */
#ifndef GF_KERNELS_CONV2D_WEIGHTS_H
#define GF_KERNELS_CONV2D_WEIGHTS_H

#include "kernels.h"

/* CONV2D_GRADIENT_ZEROS when a 3x3 pair has the Sobel/Prewitt/Scharr zero
 * taps (the instantiations that leave them out), else 0. */
unsigned conv2d_gradient_zeros(const conv2d_launch *p, int K, int mw);

/* The channels a kernel computes: all of them, or RGB of RGBA when alpha is
 * copied; a smaller channels_filtered runs on the full kernel and copies
 * byte by byte (no built-in path asks for one). */
int conv2d_cf_template(int channels, int cf);

bool conv2d_power_of_two(float s);

/* Whether every matrix's scale is a power of two that can be folded into
 * its weights exactly (no weight leaves 2^-100 .. 2^100). */
bool conv2d_prescalable(const conv2d_launch *p, int K, int taps, const float *inv);

/* Whether every weight is an integer of -128..127: version 4's DP4A path. */
bool conv2d_byte_weights(const float *w, int n);

/* Whether every weight is an integer of 16 bits and every matrix's sum
 * stays below 2^22 in magnitude (255 times the sum of |weights|): version
 * 4's DP2A path, whose accumulators hold the float bias (see conv2d_body4). */
bool conv2d_short_weights(const float *w, int K, int taps);

/* Taps 4j .. 4j + 3 of a row of m integer weights (0 past it) as signed
 * bytes in one word, stored as the bits of a float. */
void conv2d_pack_bytes(const float *row, int m, int j, float *out);

/* The integer paths' weights, stored as the bits of float parameters. DP4A
 * (dp 1): for matrix k, mask row i and window word j, the signed bytes of
 * taps 4j .. 4j + 3 (0 past the row) in one word. DP2A (dp 2): two words
 * per window word, taps 4j, 4j + 1 and 4j + 2, 4j + 3 as signed 16-bit
 * halves. Returns the count. */
int conv2d_pack_weights(const float *w, int K, int m, int dp, float *out);

/* The separable integer path's parameters (see kSeparable4): the row's
 * packed words, then the column weights. Returns the count. */
int conv2d_pack_separable(const float *row, const float *column, int m, float *out);

/* Whether a column of the separable path is binomial, C(m - 1, i)
 * (kBinomial4), or all ones (kBox4). */
bool conv2d_binomial_column(const float *column, int m);

bool conv2d_ones(const float *column, int m);

/* The kind of kGradients4 a 3x3 pair on RGBA is, or -1: matrix 0 is
 * +-(u (-1, 0, 1)), the column u = (p, w, p) times the row, matrix 1 the
 * transpose (the magnitude squares the signs away), both without offsets,
 * of scale 1 for the integer_sqrt kinds, else of scales that are powers
 * of two. */
int conv2d_gradient_index(const conv2d_launch *p, int C, int K, int mw, int mh);

/* Whether a matrix's outputs stay in 0..255 before the clamp (kInRange):
 * no negative weight, and their sum at most the scale. */
bool conv2d_in_range(const float *w, int taps, float scale);

int conv2d_gcd(int a, int b);

/* Integer factors of integer 2-D weights: the row of the largest weight
 * divided by the gcd of its entries (then every column factor is an integer
 * too), checked exactly. With them version 3's sums are exact. */
bool conv2d_integer_factors(const float *w, int mw, int mh, float *row, float *column);

/* Whether a factored mask's row and column of m weights are both in
 * 0..255 (the factors are integers already), with their sums. */
bool conv2d_byte_factors(const float *row, const float *column, int m, double *row_sum, double *column_sum);

/* Whether a factored mask suits the tensor cores (kMma4): the row and the
 * column of integers 0..255, the row's sums (255 times the row's weights)
 * in 16 bits. */
bool conv2d_mma_weights(const float *row, const float *column, int m);

/* kMma4's weights: the row's bytes, then from byte 32 the column's, in
 * 16 words; returns 16. */
int conv2d_pack_mma(const float *row, const float *column, int m, float *out);

/* kStream4's parameters: the column's weights, the row's (words 0..5),
 * then the rounding's: a scale 2^k its shift k, the bias 2^(k-1) - 1 and
 * bit k of each lane (none for k = 0); an odd scale d the multiplier
 * ceil(2^32 / d) and (d - 1) / 2 (conv2d_stream_round4); returns 16. */
int conv2d_pack_stream(const float *row, const float *column, float scale, float *out);

#endif /* GF_KERNELS_CONV2D_WEIGHTS_H */
