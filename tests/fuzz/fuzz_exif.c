/* fuzz_exif.c - libFuzzer target for the EXIF Orientation parser: the
 * bytes as a JPEG and as a bare TIFF structure (each result must be
 * 1..8), then the turn of a small image whose size and channels come from
 * the first bytes, by the orientation found (or the one the fourth byte
 * names), so that the turn's bounds are fuzzed too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exif.h"
#include "image.h"
#include "orientation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int from_jpeg = gf_jpeg_exif_orientation(data, size);
    const int from_tiff = gf_exif_tiff_orientation(data, size);
    if (from_jpeg < 1 || from_jpeg > 8 || from_tiff < 1 || from_tiff > 8)
        abort();
    if (size < 4)
        return 0;
    gf_image *img = gf_image_new(1 + data[0] % 70, 1 + data[1] % 70, 1 + data[2] % 4);
    if (!img)
        return 0;
    memset(img->pixels, data[3], gf_image_bytes(img));
    const int width = img->width, height = img->height;
    const int orientation = from_jpeg != 1 ? from_jpeg : from_tiff != 1 ? from_tiff : data[3] % 10;
    if (gf_image_orient(img, orientation) == 0 && gf_orientation_swaps_axes(orientation) &&
        (img->width != height || img->height != width))
        abort();
    gf_image_free(img);
    return 0;
}
