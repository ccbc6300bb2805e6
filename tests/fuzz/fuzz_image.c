/* fuzz_image.c - libFuzzer target: decode arbitrary bytes, then a small
 * filter chain on the CPU backend (conv2d, equalize, normalize, statistics)
 * and a PNG encode of the result, at the image's depth (8 or 16 bits). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "image.h"
#include "mask.h"

static const char sobel_text[] =
    "combine magnitude\n3 3\n-1 0 1\n-2 0 2\n-1 0 1\n3 3\n-1 -2 -1\n0 0 0\n1 2 1\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gf_mask sobel;
    static int ready;
    if (!ready) {
        if (gf_mask_parse(sobel_text, "sobel", &sobel) < 0)
            abort();
        gf_image_set_max_pixels((size_t)1 << 14);  /* keep each run short */
        ready = 1;
    }
    gf_image *img = gf_image_load_memory(data, size, "fuzz");
    if (!img)
        return 0;
    const size_t count = (size_t)img->width * (size_t)img->height;
    const int colour = img->channels >= 3 ? 3 : 1;
    gf_stretch normalize = {.kind = GF_STRETCH_NORMALIZE, .black = 2.0, .white = 1.0};
    static gf_channel_stats stats[4];  /* 65536 bins each: not on the stack */
    unsigned char *out = malloc(gf_image_bytes(img));
    if (out && img->depth == 16) {
        uint16_t *wide = (uint16_t *)(void *)out;
        gf_conv2d_cpu16(gf_image_samples16(img), wide, img->width, img->height, img->channels,
                        colour, &sobel, GF_BORDER_REFLECT);
        if (gf_equalize_cpu16(wide, count, img->channels, GF_EQUALIZE_LUMINANCE, colour) < 0 ||
            gf_stretch_cpu16(wide, count, img->channels, &normalize, colour) < 0) {
            free(out);
            out = NULL;
        } else {
            gf_statistics_cpu16(wide, count, img->channels, stats);
        }
    } else if (out) {
        gf_conv2d_cpu(img->pixels, out, img->width, img->height, img->channels, colour, &sobel,
                      GF_BORDER_REFLECT);
        gf_equalize_cpu(out, count, img->channels, GF_EQUALIZE_LUMINANCE, colour);
        gf_stretch_cpu(out, count, img->channels, &normalize, colour);
        gf_statistics_cpu(out, count, img->channels, stats);
    }
    if (out) {
        memcpy(img->pixels, out, gf_image_bytes(img));
        unsigned char *png;
        size_t png_size;
        if (gf_image_encode(img, GF_FORMAT_PNG, 90, &png, &png_size) == 0)
            free(png);
        free(out);
    }
    gf_image_free(img);
    return 0;
}
