/* jpeg_turbo.c - JPEG decoding and encoding through libjpeg-turbo's
 * TurboJPEG API (Debian's libturbojpeg0-dev, linked statically) when the
 * build has it: its SIMD codec is about twice as fast as stb_image's, and
 * in a batch the codecs are the bound. Without it, or for a JPEG it will
 * not take (CMYK, a warning about damaged data), the caller uses stb_image,
 * so what is accepted never narrows. */
#include "jpeg_turbo.h"

#include <stdlib.h>
#include <string.h>

#ifdef GF_HAVE_TURBOJPEG
#include <turbojpeg.h>

int gf_jpeg_turbo_available(void)
{
    return 1;
}

unsigned char *gf_jpeg_turbo_decode(const unsigned char *data, size_t size, int *width,
                                    int *height, int *channels)
{
    tjhandle tj = tjInitDecompress();
    if (!tj)
        return NULL;
    unsigned char *pixels = NULL;
    int w, h, subsampling, colourspace;
    if (tjDecompressHeader3(tj, data, (unsigned long)size, &w, &h, &subsampling, &colourspace) == 0 &&
        (colourspace == TJCS_GRAY || colourspace == TJCS_YCbCr || colourspace == TJCS_RGB)) {
        const int c = colourspace == TJCS_GRAY ? 1 : 3;
        pixels = malloc((size_t)w * (size_t)h * (size_t)c);
        /* accurate IDCT and smooth chroma upsampling: the library's defaults */
        if (pixels && tjDecompress2(tj, data, (unsigned long)size, pixels, w, 0, h,
                                    c == 1 ? TJPF_GRAY : TJPF_RGB, 0) != 0) {
            free(pixels);  /* an error, or a warning about damaged data */
            pixels = NULL;
        }
        *width = w;
        *height = h;
        *channels = c;
    }
    tjDestroy(tj);
    return pixels;
}

int gf_jpeg_turbo_encode(const unsigned char *pixels, int width, int height, int channels,
                         int quality, unsigned char **out, size_t *out_size)
{
    /* stb_image_write's choices, kept: alpha dropped, gray stays gray, full
     * chroma resolution above quality 90 */
    const unsigned char *src = pixels;
    unsigned char *gray = NULL;
    if (channels == 2) {
        size_t n = (size_t)width * (size_t)height;
        if (!(gray = malloc(n)))
            return -1;
        for (size_t i = 0; i < n; i++)
            gray[i] = pixels[2 * i];
        src = gray;
    }
    const int format = channels <= 2 ? TJPF_GRAY : channels == 3 ? TJPF_RGB : TJPF_RGBX;
    const int pitch = width * (channels == 2 ? 1 : channels);
    const int sampling = channels <= 2 ? TJSAMP_GRAY : quality > 90 ? TJSAMP_444 : TJSAMP_420;
    unsigned long capacity = tjBufSize(width, height, sampling);
    unsigned char *buffer = capacity != (unsigned long)-1 ? malloc(capacity) : NULL;
    tjhandle tj = tjInitCompress();
    int status = -1;
    if (buffer && tj) {
        unsigned long size = capacity;
        if (tjCompress2(tj, src, width, pitch, height, format, &buffer, &size, sampling, quality,
                        TJFLAG_NOREALLOC) == 0) {
            *out = buffer;
            *out_size = size;
            buffer = NULL;
            status = 0;
        }
    }
    if (tj)
        tjDestroy(tj);
    free(buffer);
    free(gray);
    return status;
}

#else

int gf_jpeg_turbo_available(void)
{
    return 0;
}

unsigned char *gf_jpeg_turbo_decode(const unsigned char *data, size_t size, int *width,
                                    int *height, int *channels)
{
    (void)data;
    (void)size;
    (void)width;
    (void)height;
    (void)channels;
    return NULL;
}

int gf_jpeg_turbo_encode(const unsigned char *pixels, int width, int height, int channels,
                         int quality, unsigned char **out, size_t *out_size)
{
    (void)pixels;
    (void)width;
    (void)height;
    (void)channels;
    (void)quality;
    (void)out;
    (void)out_size;
    return -1;
}

#endif
