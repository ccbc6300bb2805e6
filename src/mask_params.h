/* mask_params.h - masks built from parameters: "NAME:KEY=VALUE,..." or
 * "NAME:VALUE,..." (values in the listed order), e.g. gaussian:sigma=50,
 * box:15, unsharp:sigma=2,amount=1.5,threshold=4.
 *
 *   gaussian  sigma [radius] [boxes]  exp(-x^2 / 2 sigma^2) sampled on
 *                                  -radius..radius (default ceil(3 sigma)),
 *                                  normalized to sum 1; column x row. boxes
 *                                  = N (1..GF_MASK_MAX_BOXES): instead, N
 *                                  box blurs in turn whose cascade has about
 *                                  sigma^2 as variance, each rounded like a
 *                                  mask of a chain (gf_mask_params_cascade)
 *   box       radius               (2r+1)^2 ones / (2r+1)^2
 *   unsharp   sigma amount threshold   s + amount (s - gaussian(s)) where
 *                                  |s - gaussian(s)| >= threshold (levels)
 *   sharpen   sigma amount         unsharp with threshold 0: the linear mask
 *                                  (1 + amount) identity - amount gaussian
 *   log       sigma offset         -sigma^2 times the Laplacian of the
 *                                  gaussian (positive on a bright blob),
 *                                  its weights shifted to sum 0, + offset
 *   dog       sigma sigma2 offset  gaussian(sigma) - gaussian(sigma2)
 *                                  (sigma2 defaults to 1.6 sigma) + offset
 *
 * A bare name takes the defaults; a mask file or built-in of that name
 * (sharpen) comes first. */
#ifndef GF_MASK_PARAMS_H
#define GF_MASK_PARAMS_H

#include "mask.h"

/* 1 and the mask when spec names a parametric mask, 0 when it does not
 * (nothing set), -1 and an error for a parametric name with bad values. */
int gf_mask_from_params(const char *spec, gf_mask *mask);
#define GF_MASK_MAX_BOXES 6
/* n > 0 and the radii of the n box blurs that "gaussian:...,boxes=n"
 * stands for, in order; 0 when spec is no such cascade, -1 and an error
 * for bad values. */
int gf_mask_params_cascade(const char *spec, int radii[GF_MASK_MAX_BOXES]);
/* The box blur of (2 radius + 1)^2 pixels (a mask of the cascade). */
int gf_mask_box(int radius, gf_mask *mask);
/* The parametric masks for --list-masks, one line each. */
void gf_mask_params_list(void);

#endif
