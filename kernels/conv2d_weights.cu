/* conv2d_weights.cu - see conv2d_weights.h. */
#include <math.h>
#include <string.h>

#include "conv2d_lanes4.cuh"
#include "conv2d_plan.cuh"
#include "conv2d_weights.h"

/* CONV2D_GRADIENT_ZEROS when a 3x3 pair has the Sobel/Prewitt/Scharr zero
 * taps (the instantiations that leave them out), else 0. */
unsigned conv2d_gradient_zeros(const conv2d_launch *p, int K, int mw)
{
    if (!p->host_weights || mw != 3 || p->mask_height != 3 || K != 2)
        return 0;
    unsigned zeros = 0;
    for (int i = 0; i < 18; i++)
        zeros |= p->host_weights[i] == 0.0f ? 1u << i : 0u;
    return (zeros & CONV2D_GRADIENT_ZEROS) == CONV2D_GRADIENT_ZEROS ? CONV2D_GRADIENT_ZEROS : 0u;
}

/* The channels a kernel computes: all of them, or RGB of RGBA when alpha is
 * copied; a smaller channels_filtered runs on the full kernel and copies
 * byte by byte (no built-in path asks for one). */
int conv2d_cf_template(int channels, int cf)
{
    return channels == 4 && cf <= 3 ? 3 : channels;
}

bool conv2d_power_of_two(float s)
{
    int e;
    const float m = frexpf(fabsf(s), &e);
    return m == 0.5f && e > -100 && e < 100;
}

/* Whether every matrix's scale is a power of two that can be folded into
 * its weights exactly (no weight leaves 2^-100 .. 2^100). */
bool conv2d_prescalable(const conv2d_launch *p, int K, int taps, const float *inv)
{
    for (int k = 0; k < K; k++) {
        if (!conv2d_power_of_two(p->scale[k]))
            return false;
        for (int i = 0; i < taps; i++) {
            const float w = p->host_weights[k * taps + i] * inv[k];
            if (w != 0.0f && !(fabsf(w) > 0x1p-100f && fabsf(w) < 0x1p100f))
                return false;
        }
    }
    return true;
}

/* Whether every weight is an integer of -128..127: version 4's DP4A path. */
bool conv2d_byte_weights(const float *w, int n)
{
    for (int i = 0; i < n; i++)
        if (!(w[i] >= -128.0f && w[i] <= 127.0f && w[i] == floorf(w[i])))
            return false;
    return true;
}

/* Whether every weight is an integer of 16 bits and every matrix's sum
 * stays below 2^22 in magnitude (255 times the sum of |weights|): version
 * 4's DP2A path, whose accumulators hold the float bias (see conv2d_body4). */
bool conv2d_short_weights(const float *w, int K, int taps)
{
    for (int k = 0; k < K; k++) {
        double total = 0.0;
        for (int i = 0; i < taps; i++) {
            const float v = w[k * taps + i];
            if (!(v >= -32768.0f && v <= 32767.0f && v == floorf(v)))
                return false;
            total += fabs((double)v);
        }
        if (255.0 * total >= 4194304.0)
            return false;
    }
    return true;
}

/* Taps 4j .. 4j + 3 of a row of m integer weights (0 past it) as signed
 * bytes in one word, stored as the bits of a float. */
void conv2d_pack_bytes(const float *row, int m, int j, float *out)
{
    uint32_t word = 0;
    for (int b = 0; b < 4; b++)
        word |= (uint32_t)(uint8_t)(int8_t)(4 * j + b < m ? (int)row[4 * j + b] : 0) << (8 * b);
    memcpy(out, &word, sizeof word);
}

/* The integer paths' weights, stored as the bits of float parameters. DP4A
 * (dp 1): for matrix k, mask row i and window word j, the signed bytes of
 * taps 4j .. 4j + 3 (0 past the row) in one word. DP2A (dp 2): two words
 * per window word, taps 4j, 4j + 1 and 4j + 2, 4j + 3 as signed 16-bit
 * halves. Returns the count. */
int conv2d_pack_weights(const float *w, int K, int m, int dp, float *out)
{
    const int ww = (m + 3) / 4, per = dp == 2 ? 2 : 1;
    auto tap = [&](int k, int i, int mx) { return mx < m ? (int)w[(k * m + i) * m + mx] : 0; };
    for (int k = 0; k < K; k++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < ww; j++) {
                float *at = &out[((k * m + i) * ww + j) * per];
                if (dp != 2) {
                    conv2d_pack_bytes(&w[(k * m + i) * m], m, j, at);
                    continue;
                }
                for (int h = 0; h < per; h++) {
                    const uint32_t word = (uint32_t)(uint16_t)(int16_t)tap(k, i, 4 * j + 2 * h) |
                                          (uint32_t)(uint16_t)(int16_t)tap(k, i, 4 * j + 2 * h + 1) << 16;
                    memcpy(&at[h], &word, sizeof word);
                }
            }
    return K * m * ww * per;
}

/* The separable integer path's parameters (see kSeparable4): the row's
 * packed words, then the column weights. Returns the count. */
int conv2d_pack_separable(const float *row, const float *column, int m, float *out)
{
    const int ww = (m + 3) / 4;
    for (int j = 0; j < ww; j++)
        conv2d_pack_bytes(row, m, j, &out[j]);
    for (int i = 0; i < m; i++)
        out[ww + i] = column[i];
    return ww + m;
}

/* Whether a column of the separable path is binomial, C(m - 1, i)
 * (kBinomial4), or all ones (kBox4). */
bool conv2d_binomial_column(const float *column, int m)
{
    long long c = 1;  /* C(m - 1, i): exact, m <= 31 */
    for (int i = 0; i < m; i++) {
        if ((double)column[i] != (double)c)
            return false;
        c = c * (m - 1 - i) / (i + 1);
    }
    return true;
}

bool conv2d_ones(const float *column, int m)
{
    for (int i = 0; i < m; i++)
        if (column[i] != 1.0f)
            return false;
    return true;
}

/* The kind of kGradients4 a 3x3 pair on RGBA is, or -1: matrix 0 is
 * +-(u (-1, 0, 1)), the column u = (p, w, p) times the row, matrix 1 the
 * transpose (the magnitude squares the signs away), both without offsets,
 * of scale 1 for the integer_sqrt kinds, else of scales that are powers
 * of two. */
int conv2d_gradient_index(const conv2d_launch *p, int C, int K, int mw, int mh)
{
    if (C != 4 || K != 2 || mw != 3 || mh != 3 || p->combine != GF_COMBINE_MAGNITUDE ||
        p->offset[0] != 0.0f || p->offset[1] != 0.0f)
        return -1;
    const float *w = p->host_weights;
    for (int g = 0; g < kGradientKinds4; g++) {
        const float u[3] = {(float)kGradients4[g].p, (float)kGradients4[g].w, (float)kGradients4[g].p};
        const float v[3] = {-1.0f, 0.0f, 1.0f};
        const float sx = w[2] / u[0], sy = w[15] / u[0];  /* the signs: weights 2 and 15 */
        bool match = (sx == 1.0f || sx == -1.0f) && (sy == 1.0f || sy == -1.0f);
        for (int i = 0; i < 3 && match; i++)
            for (int j = 0; j < 3 && match; j++)
                match = w[i * 3 + j] == sx * u[i] * v[j] && w[9 + i * 3 + j] == sy * v[i] * u[j];
        if (!match)
            continue;
        const bool scales = kGradients4[g].integer_sqrt
                                ? p->scale[0] == 1.0f && p->scale[1] == 1.0f
                                : conv2d_power_of_two(p->scale[0]) && conv2d_power_of_two(p->scale[1]);
        return scales ? g : -1;
    }
    return -1;
}

/* Whether a matrix's outputs stay in 0..255 before the clamp (kInRange):
 * no negative weight, and their sum at most the scale. */
bool conv2d_in_range(const float *w, int taps, float scale)
{
    double total = 0.0;
    for (int i = 0; i < taps; i++) {
        if (!(w[i] >= 0.0f))
            return false;
        total += w[i];
    }
    return total <= (double)scale;
}

int conv2d_gcd(int a, int b)
{
    while (b) {
        const int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Integer factors of integer 2-D weights: the row of the largest weight
 * divided by the gcd of its entries (then every column factor is an integer
 * too), checked exactly. With them version 3's sums are exact. */
bool conv2d_integer_factors(const float *w, int mw, int mh, float *row, float *column)
{
    int pivot = 0;
    for (int i = 0; i < mw * mh; i++) {
        if (w[i] != rintf(w[i]) || fabsf(w[i]) >= 16777216.0f)
            return false;
        if (fabsf(w[i]) > fabsf(w[pivot]))
            pivot = i;
    }
    if (w[pivot] == 0.0f)
        return false;
    const int py = pivot / mw, px = pivot % mw;
    int g = 0;
    for (int x = 0; x < mw; x++)
        g = conv2d_gcd(g, abs((int)w[py * mw + x]));
    for (int x = 0; x < mw; x++)
        row[x] = w[py * mw + x] / (float)g;
    for (int y = 0; y < mh; y++) {
        column[y] = w[y * mw + px] / row[px];
        if (column[y] != rintf(column[y]))
            return false;
        for (int x = 0; x < mw; x++)
            if (column[y] * row[x] != w[y * mw + x])
                return false;
    }
    return true;
}

/* Whether a factored mask's row and column of m weights are both in
 * 0..255 (the factors are integers already), with their sums. */
bool conv2d_byte_factors(const float *row, const float *column, int m, double *row_sum, double *column_sum)
{
    *row_sum = *column_sum = 0.0;
    for (int i = 0; i < m; i++) {
        if (!(row[i] >= 0.0f && row[i] <= 255.0f && column[i] >= 0.0f && column[i] <= 255.0f))
            return false;
        *row_sum += row[i];
        *column_sum += column[i];
    }
    return true;
}

/* Whether a factored mask suits the tensor cores (kMma4): the row and the
 * column of integers 0..255, the row's sums (255 times the row's weights)
 * in 16 bits. */
bool conv2d_mma_weights(const float *row, const float *column, int m)
{
    double rows = 0.0, columns = 0.0;
    return conv2d_byte_factors(row, column, m, &rows, &columns) && 255.0 * rows <= 65535.0;
}

/* kMma4's weights: the row's bytes, then from byte 32 the column's, in
 * 16 words. */
int conv2d_pack_mma(const float *row, const float *column, int m, float *out)
{
    unsigned char bytes[64] = {0};
    for (int i = 0; i < m; i++) {
        bytes[i] = (unsigned char)row[i];
        bytes[32 + i] = (unsigned char)column[i];
    }
    memcpy(out, bytes, sizeof bytes);
    return 16;
}

/* kStream4's parameters: the column's weights, the row's (words 0..5),
 * then the rounding's: a scale 2^k its shift k, the bias 2^(k-1) - 1 and
 * bit k of each lane (none for k = 0); an odd scale d the multiplier
 * ceil(2^32 / d) and (d - 1) / 2 (conv2d_stream_round4). */
int conv2d_pack_stream(const float *row, const float *column, float scale, float *out)
{
    unsigned words[16] = {0};
    for (int i = 0; i < 3; i++) {
        words[i] = (unsigned)column[i];
        words[3 + i] = (unsigned)row[i];
    }
    const unsigned d = (unsigned)scale;
    if (conv2d_power_of_two(scale)) {
        const int k = log2_of((int)d);
        words[6] = (unsigned)k;
        words[7] = k ? ((1u << (k - 1)) - 1u) * 0x10001u : 0u;
        words[8] = k ? 0x10001u : 0u;
    } else {
        words[6] = (unsigned)((0x100000000ULL + d - 1) / d);
        words[7] = (d - 1) / 2;
    }
    memcpy(out, words, sizeof words);
    return 16;
}
