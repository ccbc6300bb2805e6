/* orientation.c - see orientation.h.
 *
 * Every orientation is one placement: source pixel (x, y) lands at output
 * pixel origin + x * step_x + y * step_y (in pixels of the output). The
 * source is read in square tiles, so that the orientations that turn
 * rows into columns write each output row in runs that stay in cache; the
 * image's threads take its bands of tiles in turn. */
#include "orientation.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Source pixels a tile is wide and tall: at most 16 KiB read and 16 KiB
 * written a tile (4 channels), which stay in L2. */
#define TILE 64

typedef struct {
    ptrdiff_t origin, step_x, step_y;
} placement;

int gf_orientation_swaps_axes(int orientation)
{
    return orientation >= 5 && orientation <= 8;
}

const char *gf_orientation_describe(int orientation)
{
    static const char *const names[] = {
        "as stored", "flip left-right", "rotate 180", "flip top-bottom", "transpose",
        "rotate 90 clockwise", "transverse", "rotate 90 counter-clockwise",
    };
    return orientation >= 1 && orientation <= 8 ? names[orientation - 1] : names[0];
}

/* Where source (x, y) of a w x h image lands; the output is h pixels wide
 * when the orientation swaps the axes, else w. */
static placement placement_of(int orientation, ptrdiff_t w, ptrdiff_t h)
{
    switch (orientation) {
    case 2: return (placement){w - 1, -1, w};
    case 3: return (placement){(h - 1) * w + w - 1, -1, -w};
    case 4: return (placement){(h - 1) * w, 1, -w};
    case 5: return (placement){0, h, 1};
    case 6: return (placement){h - 1, h, -1};
    case 7: return (placement){(w - 1) * h + h - 1, -h, -1};
    case 8: return (placement){(w - 1) * h, -h, 1};
    default: return (placement){0, 1, w};
    }
}

/* Source rows [y0, y1) and columns [x0, x1) into their places, c bytes
 * a pixel (a constant where it is inlined, so each copy is one move). */
static inline void place_tile_of(const gf_image *src, unsigned char *dst, placement p, int x0,
                                 int x1, int y0, int y1, size_t c)
{
    for (int y = y0; y < y1; y++) {
        const unsigned char *from = src->pixels + ((size_t)y * (size_t)src->width + (size_t)x0) * c;
        ptrdiff_t to = p.origin + (ptrdiff_t)x0 * p.step_x + (ptrdiff_t)y * p.step_y;
        for (int x = x0; x < x1; x++, from += c, to += p.step_x)
            memcpy(dst + (size_t)to * c, from, c);
    }
}

static void place_tile(const gf_image *src, unsigned char *dst, placement p, int x0, int x1,
                       int y0, int y1)
{
    switch (src->channels) {
    case 1: place_tile_of(src, dst, p, x0, x1, y0, y1, 1); break;
    case 2: place_tile_of(src, dst, p, x0, x1, y0, y1, 2); break;
    case 3: place_tile_of(src, dst, p, x0, x1, y0, y1, 3); break;
    default: place_tile_of(src, dst, p, x0, x1, y0, y1, 4); break;
    }
}

/* The image's bands of TILE source rows, shared by the image's threads. */
typedef struct {
    const gf_image *src;
    unsigned char *dst;
    placement p;
    int bands;
    atomic_int next_band;
} turn_job;

static void *place_bands(void *arg)
{
    turn_job *job = arg;
    const gf_image *src = job->src;
    for (int band; (band = atomic_fetch_add(&job->next_band, 1)) < job->bands;) {
        const int y0 = band * TILE;
        const int y1 = src->height - y0 > TILE ? y0 + TILE : src->height;
        for (int x0 = 0; x0 < src->width; x0 += TILE) {
            const int x1 = src->width - x0 > TILE ? x0 + TILE : src->width;
            place_tile(src, job->dst, job->p, x0, x1, y0, y1);
        }
    }
    return NULL;
}

static void place_all(const gf_image *src, unsigned char *dst, placement p)
{
    turn_job job = {src, dst, p, (src->height + TILE - 1) / TILE, 0};
    const int threads = gf_image_threads();
    gf_run_shared(place_bands, &job, threads < job.bands ? threads : job.bands);
}

int gf_image_orient(gf_image *img, int orientation)
{
    if (orientation < 2 || orientation > 8)
        return 0;
    unsigned char *turned = gf_malloc_large(gf_image_bytes(img));
    if (!turned) {
        gf_set_error("out of memory turning a %dx%d image by its EXIF orientation", img->width,
                     img->height);
        return -1;
    }
    place_all(img, turned, placement_of(orientation, img->width, img->height));
    free(img->pixels);
    img->pixels = turned;
    if (gf_orientation_swaps_axes(orientation)) {
        const int width = img->width;
        img->width = img->height;
        img->height = width;
    }
    return 0;
}
