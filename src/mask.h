/* mask.h - gf_mask: convolution masks in the libvips matrix text format.
 *
 *     # description line (the first comment is shown by --list-masks)
 *     combine magnitude          <- optional: magnitude | max | min | sum
 *     3 3 1 0                    <- width height [scale [offset]]
 *     -1 0 1
 *     -2 0 2
 *     -1 0 1
 *
 * Each matrix gives v = sum(pixel * weight) / scale + offset; several
 * matrices (all of one size) are combined into one value, which is rounded
 * half to even and clamped to 0..255. Masks are correlated, not flipped,
 * with the anchor at (width / 2, height / 2). */
#ifndef GF_MASK_H
#define GF_MASK_H

#define GF_MASK_MAX_SIZE 4095          /* largest width or height */
#define GF_MASK_MAX_TAPS (GF_MASK_MAX_SIZE * GF_MASK_MAX_SIZE)  /* 128 MiB of doubles a matrix */
#define GF_MASK_MAX_MATRICES 4          /* matrices combined in one mask */
#define GF_MASK_SMALL_SIZE 31           /* masks up to this square have the GPU's fixed-size kernels */

typedef enum {
    GF_COMBINE_NONE = 0,         /* one matrix, no 'combine' line: v itself */
    GF_COMBINE_MAGNITUDE,        /* sqrt(v1^2 + v2^2 + ...); |v| for one matrix */
    GF_COMBINE_MAX,
    GF_COMBINE_MIN,
    GF_COMBINE_SUM,
    GF_COMBINE_UNSHARP,          /* one (blur) matrix b: s + amount (s - b) where |s - b| >= threshold,
                                    s the source value under the anchor; else s */
} gf_combine;

typedef struct {
    char name[64];               /* file name without folder and ".mask" */
    char description[160];       /* first comment line, may be empty */
    int width, height;
    int count;                   /* matrices, 1..GF_MASK_MAX_MATRICES */
    gf_combine combine;
    double scale[GF_MASK_MAX_MATRICES];
    double offset[GF_MASK_MAX_MATRICES];
    double amount, threshold;    /* GF_COMBINE_UNSHARP */
    double *weights[GF_MASK_MAX_MATRICES]; /* count arrays, row-major, width*height */
    /* One matrix that factors as column x row: weights[y][x] == column[y] * row[x]. */
    int separable;
    double *column;              /* height values (allocated for every mask) */
    double *row;                 /* width values */
} gf_mask;

/* A parsed mask owns its weights: gf_mask_release frees them (not the
 * struct) and leaves the mask empty. Parsing and loading overwrite every
 * field (a failure leaves the mask empty), so a mask that holds weights is
 * released before it is reused. */
void gf_mask_release(gf_mask *mask);
/* Storage for count matrices of width x height (1..GF_MASK_MAX_SIZE), zeroed; fields other than the sizes are
 * left as they are. -1 and an error when memory runs out. */
int gf_mask_allocate(gf_mask *mask, int width, int height, int count);
/* A deep copy of src into dst (which holds no weights). */
int gf_mask_copy(gf_mask *dst, const gf_mask *src);
/* Whether the GPU runs the mask with its general kernels (conv2d_large.cu)
 * rather than the fixed-size ones: wider or taller than
 * GF_MASK_SMALL_SIZE, or an unsharp combine. */
int gf_mask_is_large(const gf_mask *mask);
/* Test whether a one-matrix mask is column x row and set separable, row
 * and column (the parser does this; a mask built in code calls it). */
void gf_mask_find_factors(gf_mask *mask);

/* Parse mask text; name labels messages ("NAME:LINE: problem"). */
int gf_mask_parse(const char *text, const char *name, gf_mask *mask);
/* Read and parse a mask file. */
int gf_mask_load_file(const char *path, gf_mask *mask);
/* A name ("sobel") is looked up in the mask folders, then among the
 * built-in and the parametric masks ("gaussian:sigma=2", mask_params.h);
 * anything with a '/' or ending in ".mask" is read as a path. */
int gf_mask_load(const char *name_or_path, gf_mask *mask);

/* The folders searched for named masks, in order: next to the executable
 * (DIR/masks, DIR/../masks, DIR/../share/gpufilter/masks), the install
 * prefix, then each folder of $GPUFILTER_MASKS (':'-separated).
 * Calls visit(folder, user) for each existing one; stops early when visit
 * returns non-zero. */
void gf_mask_folders(int (*visit)(const char *folder, void *user), void *user);

/* Print the named masks found (name, size, description) to stdout, sorted,
 * the first folder's mask winning on a clash. Returns the count, -1 on error. */
int gf_mask_list(void);

const char *gf_combine_name(gf_combine combine);

#endif
