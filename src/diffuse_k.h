/* diffuse_k.h - Perona-Malik's K from the image: a percentile of its
 * gradient magnitudes. */
#ifndef GF_DIFFUSE_K_H
#define GF_DIFFUSE_K_H

#include "diffuse.h"

/* K = numpy.percentile(m, how->percentile) (linear interpolation) over the
 * magnitudes m = sqrt(dx^2 + dy^2) of every pixel of the filtered channels,
 * dx = u(x+1, y) - u(x, y) and dy = u(x, y+1) - u(x, y) the forward
 * differences of the image as it comes in, neighbours read through the
 * border mode (zero outside for constant). 0, or -1 with the error. */
int gf_diffuse_percentile_k(const gf_image *img, const gf_diffuse *how, double *k);

#endif
