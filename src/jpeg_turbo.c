/* jpeg_turbo.c - JPEG decoding and encoding through libjpeg-turbo's
 * TurboJPEG API (Debian's libturbojpeg0-dev, linked statically) when the
 * build has it: its SIMD codec is about twice as fast as stb_image's, and
 * in a batch the codecs are the bound. Without it, or for a JPEG it will
 * not take (CMYK, a warning about damaged data), the caller uses stb_image,
 * so what is accepted never narrows. Encoding runs in strips on threads,
 * joined with restart markers (jpeg_strips.h). */
#include "jpeg_turbo.h"

#include <stdlib.h>
#include <string.h>

#ifdef GF_HAVE_TURBOJPEG
#include <stdatomic.h>
#include <turbojpeg.h>

#include "jpeg_strips.h"
#include "util.h"

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
        pixels = gf_malloc_large((size_t)w * (size_t)h * (size_t)c);
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

/* One image (or strip) in one piece; 0, or -1. */
static int encode_whole(const unsigned char *src, int width, int pitch, int height, int format,
                        int sampling, int quality, unsigned char **out, size_t *out_size)
{
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
    return status;
}

/* Strips of STRIP_ROWS rows (a whole number of MCU rows for every
 * sampling), a fixed height so that the file does not depend on the
 * threads; their restart markers cost 2 bytes and a partial byte each. */
#define STRIP_ROWS 128

typedef struct {
    const unsigned char *src;
    int width, pitch, format, sampling, quality;
    int strip_rows, height, count;
    unsigned char **strips;
    size_t *sizes;
    atomic_int next, failed;
} strip_work;

static void *encode_strips(void *arg)
{
    strip_work *w = arg;
    for (int i; (i = atomic_fetch_add(&w->next, 1)) < w->count;) {
        const int y0 = i * w->strip_rows;
        const int rows = w->height - y0 < w->strip_rows ? w->height - y0 : w->strip_rows;
        if (encode_whole(w->src + (size_t)y0 * w->pitch, w->width, w->pitch, rows, w->format,
                         w->sampling, w->quality, &w->strips[i], &w->sizes[i]) < 0)
            atomic_store(&w->failed, 1);
    }
    return NULL;
}

/* The strips on gf_image_threads() threads, joined; 1 when the image is
 * one strip or the strips cannot be joined (then it is encoded whole). */
static int encode_in_strips(strip_work *w, unsigned char **out, size_t *out_size)
{
    const int mcu = w->sampling == TJSAMP_420 ? 16 : 8;
    const int mcus_per_row = (w->width + mcu - 1) / mcu;
    w->strip_rows = STRIP_ROWS;
    while (w->strip_rows > mcu && mcus_per_row * (w->strip_rows / mcu) > 65535)
        w->strip_rows /= 2;
    w->count = (w->height + w->strip_rows - 1) / w->strip_rows;
    if (w->count < 2)
        return 1;
    w->strips = calloc((size_t)w->count, sizeof *w->strips);
    w->sizes = calloc((size_t)w->count, sizeof *w->sizes);
    int status = -1;
    if (w->strips && w->sizes) {
        const int threads = gf_image_threads();
        gf_run_shared(encode_strips, w, threads < w->count ? threads : w->count);
        if (!atomic_load(&w->failed))
            status = gf_jpeg_join_strips(w->strips, w->sizes, w->count, w->height,
                                         mcus_per_row * (w->strip_rows / mcu), out, out_size);
    }
    for (int i = 0; w->strips && i < w->count; i++)
        free(w->strips[i]);
    free(w->strips);
    free(w->sizes);
    return status;
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
    strip_work w = {
        .src = src,
        .width = width,
        .pitch = width * (channels == 2 ? 1 : channels),
        .format = channels <= 2 ? TJPF_GRAY : channels == 3 ? TJPF_RGB : TJPF_RGBX,
        .sampling = channels <= 2 ? TJSAMP_GRAY : quality > 90 ? TJSAMP_444 : TJSAMP_420,
        .quality = quality,
        .height = height,
    };
    int status = encode_in_strips(&w, out, out_size);
    if (status == 1)
        status = encode_whole(src, width, w.pitch, height, w.format, w.sampling, quality, out,
                              out_size);
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
