/* orientation.h - an EXIF orientation (TIFF tag 0x0112, 1..8) applied to
 * decoded pixels, so that the image comes out as it is meant to be seen
 * (as vips autorot and ImageMagick -auto-orient turn it):
 *
 *   1 as stored           5 transpose (across the top-left diagonal)
 *   2 flip left-right     6 rotate 90 clockwise
 *   3 rotate 180          7 transverse (across the top-right diagonal)
 *   4 flip top-bottom     8 rotate 90 counter-clockwise (270 clockwise)
 *
 * 5..8 swap width and height. */
#ifndef GF_ORIENTATION_H
#define GF_ORIENTATION_H

#include "image.h"

/* 1 for the orientations that swap width and height (5..8). */
int gf_orientation_swaps_axes(int orientation);

/* What the orientation does, for -v: "rotate 90 clockwise", ... */
const char *gf_orientation_describe(int orientation);

/* Turn img (1-4 channels) by the orientation, into a new pixel buffer
 * that replaces the old one (its memory budget stays with the image);
 * 1 and values outside 1..8 leave it as it is. 0, or -1 with the error
 * set (out of memory: img unchanged). */
int gf_image_orient(gf_image *img, int orientation);

#endif
