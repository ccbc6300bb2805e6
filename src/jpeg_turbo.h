/* jpeg_turbo.h - libjpeg-turbo for JPEG when built with it (see jpeg_turbo.c). */
#ifndef GF_JPEG_TURBO_H
#define GF_JPEG_TURBO_H

#include <stddef.h>

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

#endif
