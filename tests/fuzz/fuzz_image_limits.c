/* fuzz_image_limits.c - libFuzzer target for the size checks: decode
 * arbitrary bytes at the default pixel limit (1 Gpx, not fuzz_image's
 * 16,384 pixels), under a memory budget of 64 MiB. Every header that
 * declares a large image must be refused by the container checks, the
 * header-against-size checks or the budget before its pixels are
 * allocated; run with -malloc_limit_mb=128, so that an allocation past
 * them is a finding. */
#include <stdint.h>
#include <stdlib.h>

#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        gf_image_set_max_pixels(GF_DEFAULT_MAX_PIXELS);
        gf_image_set_memory_budget((size_t)64 << 20);
        ready = 1;
    }
    gf_image *img = gf_image_load_memory(data, size, "fuzz");
    gf_image_free(img);
    return 0;
}
