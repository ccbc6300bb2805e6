/* diffuse_params.h - the value of --diffuse: "KIND[:KEY=VALUE,...]" or
 * "KIND:VALUE,..." (values in this order), as masks take their parameters:
 *
 *   heat         iterations step
 *   pm-exp       iterations step k percentile   g = exp(-(|d| / K)^2)
 *   pm-rational  iterations step k percentile   g = 1 / (1 + (|d| / K)^2)
 *
 * Defaults: 16 iterations, step 0.2, K (0 or left out) from the 90th
 * percentile of the gradient magnitudes. */
#ifndef GF_DIFFUSE_PARAMS_H
#define GF_DIFFUSE_PARAMS_H

#include "diffuse.h"

/* 0 and *how set (border and channels left to the pipeline), or -1 and
 * the error. */
int gf_diffuse_parse(const char *spec, gf_diffuse *how);

#endif
