/* jpeg_strips.c - see jpeg_strips.h. The output: strip 0's headers with
 * the frame's height patched, a DRI segment, strip 0's SOS and entropy
 * data, then RSTn and each next strip's entropy data, and EOI. */
#include "jpeg_strips.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"

typedef struct {
    size_t sof;          /* offset of the SOF marker */
    size_t sos, scan;    /* offsets of the SOS marker and of its entropy data */
    size_t end;          /* offset of the EOI marker: the entropy data's end */
} layout;

/* One baseline or extended sequential frame, one scan, EOI last. */
static int read_layout(const unsigned char *p, size_t n, layout *l)
{
    if (n < 4 || p[0] != 0xFF || p[1] != 0xD8 || p[n - 2] != 0xFF || p[n - 1] != 0xD9)
        return -1;
    l->sof = 0;
    size_t at = 2;
    while (at + 4 <= n && p[at] == 0xFF) {
        const unsigned marker = p[at + 1];
        const size_t length = gf_be16(p + at + 2);
        if (length < 2 || at + 2 + length > n)
            return -1;
        if (marker == 0xC0 || marker == 0xC1) {
            if (length < 8)
                return -1;
            l->sof = at;
        } else if ((marker >= 0xC2 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 &&
                    marker != 0xCC) || marker == 0xDD) {
            return -1;  /* progressive, lossless, arithmetic, or restarts already */
        } else if (marker == 0xDA) {
            l->sos = at;
            l->scan = at + 2 + length;
            l->end = n - 2;
            return l->sof ? 0 : -1;
        }
        at += 2 + length;
    }
    return -1;
}

/* The headers (to the end of SOS) alike, but for the frame's height. */
static int same_headers(const unsigned char *a, const layout *la, const unsigned char *b,
                        const layout *lb)
{
    if (la->scan != lb->scan || la->sof != lb->sof)
        return 0;
    const size_t height = la->sof + 5;  /* FF Cx, length, precision, then the height */
    return memcmp(a, b, height) == 0 && memcmp(a + height + 2, b + height + 2,
                                               la->scan - height - 2) == 0;
}

int gf_jpeg_join_strips(unsigned char *const *strips, const size_t *sizes, int count, int height,
                        int restart_mcus, unsigned char **out, size_t *out_size)
{
    if (count < 1 || height < 1 || height > 65535 || restart_mcus < 1 || restart_mcus > 65535)
        return 1;
    layout *ls = malloc((size_t)count * sizeof *ls);
    if (!ls)
        return -1;
    size_t total = 6 + 2;  /* DRI, EOI */
    for (int i = 0; i < count; i++) {
        if (read_layout(strips[i], sizes[i], &ls[i]) < 0 ||
            !same_headers(strips[0], &ls[0], strips[i], &ls[i])) {
            free(ls);
            return 1;
        }
        total += (i == 0 ? ls[0].scan : 2) + (ls[i].end - ls[i].scan);
    }
    unsigned char *o = malloc(total);
    if (!o) {
        free(ls);
        return -1;
    }
    unsigned char *w = o;
    memcpy(w, strips[0], ls[0].sos);
    w[ls[0].sof + 5] = (unsigned char)(height >> 8);
    w[ls[0].sof + 6] = (unsigned char)height;
    w += ls[0].sos;
    const unsigned char dri[6] = {0xFF, 0xDD, 0x00, 0x04, (unsigned char)(restart_mcus >> 8),
                                  (unsigned char)restart_mcus};
    memcpy(w, dri, sizeof dri);
    w += sizeof dri;
    memcpy(w, strips[0] + ls[0].sos, ls[0].end - ls[0].sos);
    w += ls[0].end - ls[0].sos;
    for (int i = 1; i < count; i++) {
        *w++ = 0xFF;
        *w++ = (unsigned char)(0xD0 + ((i - 1) & 7));
        memcpy(w, strips[i] + ls[i].scan, ls[i].end - ls[i].scan);
        w += ls[i].end - ls[i].scan;
    }
    *w++ = 0xFF;
    *w++ = 0xD9;
    free(ls);
    *out = o;
    *out_size = (size_t)(w - o);
    return 0;
}
