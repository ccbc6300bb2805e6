/* cpu_conv_plan.h - how the fast CPU convolution sums a mask (private to
 * cpu_conv.c and cpu_conv_plan.c): the path, the integer weights and
 * factors it sums with, and the passes' shapes. */
#ifndef GF_CPU_CONV_PLAN_H
#define GF_CPU_CONV_PLAN_H

#include <stdint.h>

#include "cpu_conv.h"

typedef struct {
    gf_cpu_path path;
    int32_t *taps[GF_MASK_MAX_MATRICES]; /* integer weights, width * height each */
    int32_t *row, *column;               /* GF_CPU_SEPARABLE: integer factors */
    int row_constant, column_constant;
    int float_magnitude;  /* GF_CPU_INTEGER: finished in floats, exactly (float_magnitude_exact) */
    /* Masks past GF_MASK_SMALL_SIZE that factor: the column pass first,
     * straight from the source rows, then the row pass over that one row,
     * so that a band's memory is a few rows whatever the mask's height. */
    int columns_first;
    /* GF_CPU_SEPARABLE_FLOAT: the column (row) reads the same backwards, so
     * its passes add the two source values of each equal pair of weights
     * before one multiply (a gaussian's: half the multiplies) */
    int column_symmetric, row_symmetric;
} gf_cpu_plan;

/* The plan for a mask at 'depth' bits a sample (its path, also returned);
 * where the integer tables cannot be allocated, a path without them. */
gf_cpu_path gf_cpu_plan_make(const gf_mask *mask, int depth, gf_cpu_plan *plan);
/* Frees plan and what it holds; NULL is fine. */
void gf_cpu_plan_free(gf_cpu_plan *plan);
/* The multiply-adds a value costs on the plan's path (gf_cpu_conv_path). */
int gf_cpu_plan_taps(const gf_mask *mask, const gf_cpu_plan *plan);

#endif
