/* fuzz_image.c - libFuzzer target: decode arbitrary bytes, then a small
 * filter chain on the CPU backend (conv2d, equalize, normalize, statistics)
 * and a PNG encode of the result. A 16-bit image is encoded at 16 bits and
 * rounded to 8 first (these CPU calls take 8-bit samples). */
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
    if (img->depth == 16) {
        unsigned char *png16;
        size_t png16_size;
        if (gf_image_encode(img, GF_FORMAT_PNG, 90, &png16, &png16_size) == 0)
            free(png16);
        if (gf_image_convert_depth(img, 8) < 0)
            abort();  /* in place: no allocation to fail */
    }
    const size_t count = (size_t)img->width * (size_t)img->height;
    const int colour = img->channels >= 3 ? 3 : 1;
    unsigned char *out = malloc(gf_image_bytes(img));
    if (out) {
        gf_conv2d_cpu(img->pixels, out, img->width, img->height, img->channels, colour, &sobel,
                      GF_BORDER_REFLECT);
        gf_equalize_cpu(out, count, img->channels, GF_EQUALIZE_LUMINANCE, colour);
        gf_stretch normalize = {.kind = GF_STRETCH_NORMALIZE, .black = 2.0, .white = 1.0};
        gf_stretch_cpu(out, count, img->channels, &normalize, colour);
        gf_channel_stats stats[4];
        gf_statistics_cpu(out, count, img->channels, stats);
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
