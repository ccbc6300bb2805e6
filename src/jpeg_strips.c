/* jpeg_strips.c - see jpeg_strips.h. The output: strip 0's headers with
 * the frame's height patched, a DRI segment, strip 0's SOS and entropy
 * data, then RSTn and each next strip's entropy data, and EOI: written
 * piece by piece into a sink, which is a buffer for a whole image. */
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

struct gf_jpeg_joiner {
    gf_jpeg_sink sink;
    void *user;
    int height, restart_mcus, added;
    unsigned char *first;  /* strip 0's headers, to the end of its SOS segment */
    layout first_layout;
};

gf_jpeg_joiner *gf_jpeg_joiner_new(int height, int restart_mcus, gf_jpeg_sink sink, void *user)
{
    if (height < 1 || height > 65535 || restart_mcus < 1 || restart_mcus > 65535)
        return NULL;
    gf_jpeg_joiner *j = calloc(1, sizeof *j);
    if (j) {
        j->sink = sink;
        j->user = user;
        j->height = height;
        j->restart_mcus = restart_mcus;
    }
    return j;
}

void gf_jpeg_joiner_free(gf_jpeg_joiner *j)
{
    if (j)
        free(j->first);
    free(j);
}

/* Strip 0: its headers with the frame's height patched and a DRI segment
 * before SOS (one piece, so that a mark can go into it), then its scan. */
static int add_first(gf_jpeg_joiner *j, const unsigned char *strip, const layout *l)
{
    const unsigned char dri[6] = {0xFF, 0xDD, 0x00, 0x04, (unsigned char)(j->restart_mcus >> 8),
                                  (unsigned char)j->restart_mcus};
    unsigned char *head = malloc(l->sos + sizeof dri);
    if (!(j->first = malloc(l->scan)) || !head) {
        free(head);
        return -1;
    }
    memcpy(j->first, strip, l->scan);
    j->first_layout = *l;
    memcpy(head, strip, l->sos);
    head[l->sof + 5] = (unsigned char)(j->height >> 8);
    head[l->sof + 6] = (unsigned char)j->height;
    memcpy(head + l->sos, dri, sizeof dri);
    int status = j->sink(j->user, head, l->sos + sizeof dri);
    free(head);
    return status < 0 ? -1 : j->sink(j->user, strip + l->sos, l->end - l->sos);
}

int gf_jpeg_joiner_add(gf_jpeg_joiner *j, const unsigned char *strip, size_t size)
{
    layout l;
    if (read_layout(strip, size, &l) < 0 ||
        (j->added > 0 && !same_headers(j->first, &j->first_layout, strip, &l)))
        return 1;
    int status;
    if (j->added == 0) {
        status = add_first(j, strip, &l);
    } else {
        const unsigned char restart[2] = {0xFF, (unsigned char)(0xD0 + ((j->added - 1) & 7))};
        status = j->sink(j->user, restart, sizeof restart);
        if (status == 0)
            status = j->sink(j->user, strip + l.scan, l.end - l.scan);
    }
    j->added++;
    return status < 0 ? -1 : 0;
}

int gf_jpeg_joiner_end(gf_jpeg_joiner *j)
{
    const unsigned char eoi[2] = {0xFF, 0xD9};
    return j->added > 0 && j->sink(j->user, eoi, sizeof eoi) == 0 ? 0 : -1;
}

/* ---- the whole image in memory ---------------------------------------------- */

typedef struct {
    unsigned char *at, *end;
} memory_sink;

static int write_memory(void *user, const unsigned char *data, size_t size)
{
    memory_sink *m = user;
    if ((size_t)(m->end - m->at) < size)
        return -1;
    memcpy(m->at, data, size);
    m->at += size;
    return 0;
}

int gf_jpeg_join_strips(unsigned char *const *strips, const size_t *sizes, int count, int height,
                        int restart_mcus, unsigned char **out, size_t *out_size)
{
    if (count < 1 || height < 1 || height > 65535 || restart_mcus < 1 || restart_mcus > 65535)
        return 1;
    /* room for every strip whole, DRI and EOI: each strip's part of the
     * file is smaller than the strip (its EOI, or its headers, go) */
    size_t total = 6 + 2;
    for (int i = 0; i < count; i++)
        total += sizes[i];
    memory_sink m = {malloc(total), NULL};
    m.end = m.at ? m.at + total : NULL;
    unsigned char *o = m.at;
    gf_jpeg_joiner *j = o ? gf_jpeg_joiner_new(height, restart_mcus, write_memory, &m) : NULL;
    int status = j ? 0 : -1;
    for (int i = 0; i < count && status == 0; i++)
        status = gf_jpeg_joiner_add(j, strips[i], sizes[i]);
    if (status == 0 && gf_jpeg_joiner_end(j) < 0)
        status = -1;
    gf_jpeg_joiner_free(j);
    if (status != 0) {
        free(o);
        return status;
    }
    *out = o;
    *out_size = (size_t)(m.at - o);
    return 0;
}
