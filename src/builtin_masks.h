/* builtin_masks.h - the masks of masks/ compiled into the binary (the
 * build generates the table from the files), so that a copied binary still
 * has them. A file of the same name on the search path overrides one. */
#ifndef GF_BUILTIN_MASKS_H
#define GF_BUILTIN_MASKS_H

typedef struct {
    const char *name;  /* "sobel" for masks/sobel.mask */
    const char *text;  /* the file's contents */
} gf_builtin_mask;

extern const gf_builtin_mask gf_builtin_masks[];
extern const int gf_builtin_mask_count;

#endif
