/* stb_impl.c - the one translation unit that compiles stb_image and
 * stb_image_write (Debian's libstb-dev headers). Their own warnings are not
 * ours to fix, so they are silenced here and only here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_FAILURE_USERMSG
#include <stb_image.h>

#ifdef GF_HAVE_LIBDEFLATE
/* PNG's deflate stream from libdeflate instead of stb_image_write's own
 * compressor: on 12 Mpx photos level 3 encodes 2 to 2.7 times faster and
 * 30% smaller than stb's default (bench/NOTES-png.md). 'level' is
 * stbi_write_png_compression_level (--png-level). */
#include <libdeflate.h>
#include <stdlib.h>

static unsigned char *gf_png_deflate(unsigned char *data, int size, int *out_size, int level)
{
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    if (!c)
        return NULL;
    size_t bound = libdeflate_zlib_compress_bound(c, (size_t)size);
    unsigned char *out = malloc(bound);
    size_t n = out ? libdeflate_zlib_compress(c, data, (size_t)size, out, bound) : 0;
    libdeflate_free_compressor(c);
    if (n == 0) {
        free(out);
        return NULL;
    }
    *out_size = (int)n;
    return out;
}
#define STBIW_ZLIB_COMPRESS gf_png_deflate
#endif

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#include "image.h"
#include "png_codec.h"

/* PNG's chunk CRC, stb_image_write's own (for the mark of image_mark.c) */
uint32_t gf_png_crc32(const unsigned char *data, size_t size)
{
    return stbiw__crc32((unsigned char *)data, (int)size);
}

unsigned char *gf_png_zlib_compress(unsigned char *data, int size, int *out_size, int level)
{
    return stbi_zlib_compress(data, size, out_size, level);
}

const char *gf_png_deflater(void)
{
#ifdef GF_HAVE_LIBDEFLATE
    return "libdeflate";
#else
    return "stb_image_write";
#endif
}

#pragma GCC diagnostic pop
