/* png_deflate.c - PNG encode time and size: stb_image_write's own deflate
 * against zlib and libdeflate plugged in through STBIW_ZLIB_COMPRESS.
 * Built twice by `make bench-png` (with and without -DHOOK, since the hook is
 * chosen when stb_image_write is compiled); run: build/bench_png_* IMAGE. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <libdeflate.h>
#include <zlib.h>

static int mode, level; /* 0 stb, 1 zlib, 2 libdeflate */

static unsigned char *hook(unsigned char *data, int size, int *out_size, int quality)
{
    (void)quality;
    if (mode == 1) {
        uLongf n = compressBound((uLong)size);
        unsigned char *out = malloc(n);
        compress2(out, &n, data, (uLong)size, level);
        *out_size = (int)n;
        return out;
    }
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    size_t bound = libdeflate_zlib_compress_bound(c, (size_t)size);
    unsigned char *out = malloc(bound);
    *out_size = (int)libdeflate_zlib_compress(c, data, (size_t)size, out, bound);
    libdeflate_free_compressor(c);
    return out;
}

#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>
#ifdef HOOK
#define STBIW_ZLIB_COMPRESS hook
#endif
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

static void count_bytes(void *context, void *data, int size)
{
    (void)data;
    *(size_t *)context += (size_t)size;
}

int main(int argc, char **argv)
{
    int w, h, c;
    unsigned char *px = argc > 1 ? stbi_load(argv[1], &w, &h, &c, 0) : NULL;
    if (!px) {
        fprintf(stderr, "usage: %s IMAGE\n", argv[0]);
        return 2;
    }
    static const char *const names[] = {"stb", "zlib", "libdeflate"};
    static const int levels[3][4] = {{1, 5, 8, -1}, {1, 3, 6, 9}, {1, 3, 6, 9}};
#ifdef HOOK
    int first = 1, last = 2;
#else
    int first = 0, last = 0;
#endif
    for (mode = first; mode <= last; mode++)
        for (int k = 0; k < 4 && levels[mode][k] >= 0; k++) {
            level = stbi_write_png_compression_level = levels[mode][k];
            size_t bytes = 0;
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            stbi_write_png_to_func(count_bytes, &bytes, w, h, c, px, w * c);
            clock_gettime(CLOCK_MONOTONIC, &b);
            double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
            printf("%-10s level %d: %8.1f ms %10zu bytes %6.1f Mpx/s\n", names[mode], level, ms,
                   bytes, (double)w * h / ms / 1e3);
        }
    stbi_image_free(px);
    return 0;
}
