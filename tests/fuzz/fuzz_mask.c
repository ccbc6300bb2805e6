/* fuzz_mask.c - libFuzzer target: the mask parser on arbitrary text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mask.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    static gf_mask mask;
    if (gf_mask_parse(text, "fuzz", &mask) == 0) {
        /* a parsed mask must satisfy the limits the kernels rely on */
        if (mask.width < 1 || mask.width > GF_MASK_MAX_SIZE || mask.height < 1 ||
            mask.height > GF_MASK_MAX_SIZE || mask.count < 1 || mask.count > GF_MASK_MAX_MATRICES)
            abort();
        for (int k = 0; k < mask.count; k++)
            if (mask.scale[k] == 0.0)
                abort();
        gf_mask_release(&mask);
    }
    free(text);
    return 0;
}
