/* cpu_conv_plan.c - which path the fast CPU convolution takes for a mask
 * (cpu_conv_plan.h): integer weights whose sums stay in 32 bits, integer
 * factors of a separable mask (constant ones as running sums), float or
 * double 1-D passes for large masks that factor, else double. */
#include "cpu_conv_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Integer sums stay under this, so that a running sum's step (one row or
 * column in before the old one is out) cannot pass INT32_MAX either. */
#define SUM_LIMIT (INT32_MAX / 2)

/* The largest sample value: integer sums are bounded with it. */
static double max_sample(int depth)
{
    return depth == 16 ? 65535.0 : 255.0;
}

static int is_small_integer(double w)
{
    return fabs(w) <= (double)(1 << 24) && w == (double)(int32_t)w;
}

/* Whether every weight is a small integer and each matrix's sums stay
 * under SUM_LIMIT (checked before any memory is taken: a large gaussian
 * fails at its first weight). */
static int integer_weights(const gf_mask *mask, int depth)
{
    const int taps = mask->width * mask->height;
    for (int k = 0; k < mask->count; k++) {
        double total = 0.0;
        for (int i = 0; i < taps; i++) {
            const double w = mask->weights[k][i];
            if (!is_small_integer(w))
                return 0;
            total += fabs(w);
        }
        if (total * max_sample(depth) > SUM_LIMIT)
            return 0;
    }
    return 1;
}

static int integer_taps(const gf_mask *mask, int depth, gf_cpu_plan *plan)
{
    if (!integer_weights(mask, depth))
        return 0;
    const int taps = mask->width * mask->height;
    for (int k = 0; k < mask->count; k++) {
        if (!(plan->taps[k] = malloc((size_t)taps * sizeof(int32_t))))
            return 0;
        for (int i = 0; i < taps; i++)
            plan->taps[k][i] = (int32_t)mask->weights[k][i];
    }
    return 1;
}

static long long gcd(long long a, long long b)
{
    while (b) {
        long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int all_equal(const int32_t *v, int n)
{
    for (int i = 1; i < n; i++)
        if (v[i] != v[0])
            return 0;
    return 1;
}

/* One integer matrix as column x row, with row's entries coprime (then the
 * column is integral too). 0 when it does not factor or could overflow. */
static int integer_factors(const gf_mask *mask, int depth, gf_cpu_plan *plan)
{
    const int mw = mask->width, mh = mask->height;
    const int32_t *w = plan->taps[0];
    int y0 = -1, x0 = -1;
    for (int i = 0; i < mw * mh && y0 < 0; i++)
        if (w[i])
            y0 = i / mw, x0 = i % mw;
    if (y0 < 0 || mask->count != 1 || mw < 2 || mh < 2)
        return 0;
    plan->row = malloc((size_t)mw * sizeof(int32_t));
    plan->column = malloc((size_t)mh * sizeof(int32_t));
    if (!plan->row || !plan->column)
        return 0;
    long long g = 0;
    for (int x = 0; x < mw; x++)
        g = gcd(g, llabs((long long)w[y0 * mw + x]));
    if (w[y0 * mw + x0] < 0)
        g = -g;
    for (int x = 0; x < mw; x++)
        plan->row[x] = (int32_t)(w[y0 * mw + x] / g);
    long long row_total = 0, column_total = 0;
    for (int y = 0; y < mh; y++) {
        if (w[y * mw + x0] % plan->row[x0])
            return 0;
        plan->column[y] = w[y * mw + x0] / plan->row[x0];
        for (int x = 0; x < mw; x++)
            if ((long long)plan->column[y] * plan->row[x] != w[y * mw + x])
                return 0;
        column_total += llabs((long long)plan->column[y]);
    }
    for (int x = 0; x < mw; x++)
        row_total += llabs((long long)plan->row[x]);
    if ((double)row_total * (double)column_total * max_sample(depth) > SUM_LIMIT)
        return 0;
    plan->row_constant = all_equal(plan->row, mw);
    plan->column_constant = all_equal(plan->column, mh);
    if (plan->row_constant) {  /* the row's weight moves into the column: rows are plain sums */
        for (int y = 0; y < mh; y++)
            plan->column[y] *= plan->row[0];
        for (int x = 0; x < mw; x++)
            plan->row[x] = 1;
    }
    return 1;
}

/* Whether a magnitude of integer sums (scale 1, offset 0) is finished
 * exactly in floats: every sum of squares s under 2^24 is a float, sqrtf is
 * correctly rounded, and sqrt(s) for an integer s is never k + 1/2 and
 * stays over 8e-5 from it for s < 2^24 (|s - (k + 1/2)^2| >= 1/4, over
 * 2 sqrt(s) + 1), more than sqrtf's error (half a float ulp, under 2^-13
 * below 4096); so rounding the float gives the reference's byte. */
static int float_magnitude_exact(const gf_mask *mask, int depth)
{
    if (mask->combine != GF_COMBINE_MAGNITUDE)
        return 0;
    double squares = 0.0;
    for (int k = 0; k < mask->count; k++) {
        if (mask->scale[k] != 1.0 || mask->offset[k] != 0.0)
            return 0;
        double total = 0.0;
        for (int i = 0; i < mask->width * mask->height; i++)
            total += fabs(mask->weights[k][i]);
        squares += (max_sample(depth) * total) * (max_sample(depth) * total);
    }
    return squares < (double)(1 << 24);
}

static int past_small_size(const gf_mask *mask)
{
    return mask->width > GF_MASK_SMALL_SIZE || mask->height > GF_MASK_SMALL_SIZE;
}

void gf_cpu_plan_free(gf_cpu_plan *plan)
{
    if (!plan)
        return;
    for (int k = 0; k < GF_MASK_MAX_MATRICES; k++)
        free(plan->taps[k]);
    free(plan->row);
    free(plan->column);
    free(plan);
}

static int reads_the_same_backwards(const double *w, int n)
{
    for (int k = 0; k < n / 2; k++)
        if (w[k] != w[n - 1 - k])
            return 0;
    return 1;
}

/* At depth 16 the 1-D passes of a non-integer mask sum in double: float's
 * error grows with the values, 256 times an 8-bit image's. */
gf_cpu_path gf_cpu_plan_make(const gf_mask *mask, int depth, gf_cpu_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    if (!integer_taps(mask, depth, plan)) {
        const int factors = mask->separable && mask->count == 1 && past_small_size(mask);
        plan->columns_first = factors;
        plan->column_symmetric = factors && reads_the_same_backwards(mask->column, mask->height);
        plan->row_symmetric = factors && reads_the_same_backwards(mask->row, mask->width);
        if (!factors)
            return plan->path = GF_CPU_DOUBLE;
        return plan->path = depth == 16 ? GF_CPU_SEPARABLE_DOUBLE : GF_CPU_SEPARABLE_FLOAT;
    }
    plan->float_magnitude = float_magnitude_exact(mask, depth);
    if (!integer_factors(mask, depth, plan))
        return plan->path = GF_CPU_INTEGER;
    plan->columns_first = past_small_size(mask);
    return plan->path = GF_CPU_SEPARABLE;
}

static int nonzero_taps(const gf_mask *mask)
{
    int taps = 0;
    for (int k = 0; k < mask->count; k++)
        for (int i = 0; i < mask->width * mask->height; i++)
            taps += mask->weights[k][i] != 0.0;
    return taps > 0 ? taps : 1;
}

int gf_cpu_plan_taps(const gf_mask *mask, const gf_cpu_plan *plan)
{
    if (plan->path == GF_CPU_SEPARABLE_FLOAT || plan->path == GF_CPU_SEPARABLE_DOUBLE)
        return mask->width + mask->height;
    if (plan->path != GF_CPU_SEPARABLE)
        return nonzero_taps(mask);
    int taps = plan->row_constant ? 2 : 0;
    for (int x = 0; x < mask->width && !plan->row_constant; x++)
        taps += plan->row[x] != 0;
    if (plan->column_constant)
        return taps + 2;
    for (int y = 0; y < mask->height; y++)
        taps += plan->column[y] != 0;
    return taps;
}

gf_cpu_path gf_cpu_conv_path(const gf_mask *mask, int *taps)
{
    return gf_cpu_conv_path_depth(mask, 8, taps);
}

gf_cpu_path gf_cpu_conv_path_depth(const gf_mask *mask, int depth, int *taps)
{
    gf_cpu_plan *plan = malloc(sizeof *plan);
    gf_cpu_path path = plan ? gf_cpu_plan_make(mask, depth, plan) : GF_CPU_DOUBLE;
    if (taps)
        *taps = plan ? gf_cpu_plan_taps(mask, plan) : nonzero_taps(mask);
    gf_cpu_plan_free(plan);
    return path;
}

const char *gf_cpu_path_name(gf_cpu_path path)
{
    switch (path) {
    case GF_CPU_INTEGER: return "integer";
    case GF_CPU_SEPARABLE: return "separable integer";
    case GF_CPU_SEPARABLE_FLOAT: return "separable float";
    case GF_CPU_SEPARABLE_DOUBLE: return "separable double";
    default: return "double";
    }
}
