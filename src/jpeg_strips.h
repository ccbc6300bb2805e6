/* jpeg_strips.h - one baseline JPEG from JPEGs of its horizontal strips.
 *
 * Strips encoded separately with the same tables, each a whole number of
 * MCU rows high (the last any height), are joined into one image with a
 * restart interval of one strip: each strip's entropy-coded data starts
 * with zero DC predictions and ends byte-aligned, exactly what a restart
 * marker means, so the joined file decodes to the pixels the strips
 * decode to. The strips can then be encoded on threads. */
#ifndef GF_JPEG_STRIPS_H
#define GF_JPEG_STRIPS_H

#include <stddef.h>

/* strips[i] / sizes[i]: count >= 1 baseline JPEGs, one scan each, equal but
 * for their height; height: the whole image's; restart_mcus: the MCUs of
 * one full strip (1..65535). Returns 0 with a malloc'd *out, 1 when the
 * strips cannot be joined (tables or layout differ: encode the image in
 * one piece), -1 when out of memory. */
int gf_jpeg_join_strips(unsigned char *const *strips, const size_t *sizes, int count, int height,
                        int restart_mcus, unsigned char **out, size_t *out_size);

/* The same join as strips arrive, into a sink (a file being written): the
 * pieces are the joined file's bytes, in order. new: NULL when out of
 * memory or height / restart_mcus are out of range. add: 0, 1 when the
 * strip cannot be joined to the first (nothing of it written), -1 when the
 * sink failed or out of memory. end: the EOI marker; 0, or -1. */
typedef int (*gf_jpeg_sink)(void *user, const unsigned char *data, size_t size);
typedef struct gf_jpeg_joiner gf_jpeg_joiner;
gf_jpeg_joiner *gf_jpeg_joiner_new(int height, int restart_mcus, gf_jpeg_sink sink, void *user);
int gf_jpeg_joiner_add(gf_jpeg_joiner *joiner, const unsigned char *strip, size_t size);
int gf_jpeg_joiner_end(gf_jpeg_joiner *joiner);
void gf_jpeg_joiner_free(gf_jpeg_joiner *joiner);

#endif
