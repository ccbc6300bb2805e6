/* jpeg_turbo.h - libjpeg-turbo for JPEG when built with it (see jpeg_turbo.c). */
#ifndef GF_JPEG_TURBO_H
#define GF_JPEG_TURBO_H

#include <stddef.h>

#include "jpeg_strips.h"

/* 1 when this build decodes and encodes JPEG with libjpeg-turbo. */
int gf_jpeg_turbo_available(void);
/* Decoded pixels (malloc'd; 1 channel for gray JPEGs, else 3), or NULL when
 * libjpeg-turbo is absent or declines the file: then decode with stb_image. */
unsigned char *gf_jpeg_turbo_decode(const unsigned char *data, size_t size, int *width,
                                    int *height, int *channels);
/* Encode 1-4 channels (alpha dropped) into a malloc'd JPEG; -1 when
 * libjpeg-turbo is absent or failed: then encode with stb_image_write. */
int gf_jpeg_turbo_encode(const unsigned char *pixels, int width, int height, int channels,
                         int quality, unsigned char **out, size_t *out_size);

/* The same file as gf_jpeg_turbo_encode's, encoded a band of rows at a
 * time and written into sink as it goes (a large image streamed): bands
 * of a multiple of gf_jpeg_stream_strip_rows() rows, but the last. new:
 * NULL without libjpeg-turbo, for 2 channels, or for an image of one strip.
 * write and end: 0, or -1 (encoder or sink failed). The file is not
 * marked (the sink's first piece holds SOI and the JFIF segment). */
typedef struct gf_jpeg_stream gf_jpeg_stream;
gf_jpeg_stream *gf_jpeg_stream_new(int width, int height, int channels, int quality,
                                   gf_jpeg_sink sink, void *user);
int gf_jpeg_stream_strip_rows(const gf_jpeg_stream *stream);
int gf_jpeg_stream_write(gf_jpeg_stream *stream, const unsigned char *pixels, int rows);
int gf_jpeg_stream_end(gf_jpeg_stream *stream);
void gf_jpeg_stream_free(gf_jpeg_stream *stream);

#endif
