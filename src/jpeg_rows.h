/* jpeg_rows.h - a JPEG decoded a band of rows at a time, through
 * libjpeg-turbo's scanline API, so that a large image can stream through
 * a call in bounded memory (stream.h). The rows are those
 * gf_jpeg_turbo_decode gives: the same library and settings. */
#ifndef GF_JPEG_ROWS_H
#define GF_JPEG_ROWS_H

#include <stddef.h>

typedef struct gf_jpeg_rows gf_jpeg_rows;

/* 1 when this build has the scanline decoder. */
int gf_jpeg_rows_available(void);
/* Whether data begins as a JPEG does: SOI, then a marker. */
int gf_jpeg_starts(const unsigned char *data, size_t size);
/* A decoder of data (kept, not copied, until close), or NULL when this
 * build lacks it or the file is not one it streams: a sequential (not
 * progressive), 8-bit, 1- or 3-component JPEG in gray, YCbCr or RGB; the
 * whole-image decoder takes the others. */
gf_jpeg_rows *gf_jpeg_rows_open(const unsigned char *data, size_t size, int *width, int *height,
                                int *channels);
/* The next 'rows' rows into dst (width x channels bytes a row); 0, or -1
 * on an error or a warning (damaged data): decode the file whole then, for
 * its message or stb_image's reading, as ever. */
int gf_jpeg_rows_read(gf_jpeg_rows *decoder, unsigned char *dst, int rows);
void gf_jpeg_rows_close(gf_jpeg_rows *decoder);

/* Whether libjpeg-turbo would decode data without an error or a warning,
 * found by decoding its entropy-coded data only (no IDCT, no colour
 * conversion: about half a decode's time, one row of memory): 1 sound,
 * 0 damaged (its header or data: the whole-image decoder refuses it), -1
 * cannot tell (a file this decoder does not take, or a build without it). nvJPEG's hardware
 * decoder pads over some damaged streams that libjpeg-turbo refuses. */
int gf_jpeg_rows_sound(const unsigned char *data, size_t size);

#endif
