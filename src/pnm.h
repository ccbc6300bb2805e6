/* pnm.h - binary PGM (P5) and PPM (P6) decoding: the header netpbm
 * defines, samples of 1 or 2 bytes scaled by their maxval to 8 bits
 * (maxval up to 255) or 16 bits (above). */
#ifndef GF_PNM_H
#define GF_PNM_H

#include <stddef.h>

typedef struct {
    int width, height;
    int channels;       /* 1 (P5) or 3 (P6) */
    unsigned maxval;    /* 1 .. 65535; samples take 2 bytes (big-endian) above 255 */
    size_t data_offset; /* where the samples start */
} gf_pnm_header;

/* Does the file start as a binary PNM ("P5" or "P6")? */
int gf_pnm_is_binary(const unsigned char *data, size_t size);

/* The header: "P5" or "P6", then width, height and maxval, each after
 * white space and '#' comments, then exactly one white space byte. 0, or
 * -1 with the error set as "NAME: problem". */
int gf_pnm_read_header(const unsigned char *data, size_t size, const char *name,
                       gf_pnm_header *header);

/* 0 when the file holds every sample the header declares (trailing bytes
 * are allowed); -1 with the error set otherwise. */
int gf_pnm_check_data(size_t size, const gf_pnm_header *header, const char *name);

/* The samples, each scaled to round(v * 255 / maxval) for a maxval up to
 * 255, else to round(v * 65535 / maxval) as uint16_t in the host's order: a
 * malloc'd buffer of width * height * channels samples, or NULL with the
 * error set (a sample over maxval, a file cut short, no memory). Check the
 * size against the pixel limit before calling it. */
unsigned char *gf_pnm_decode(const unsigned char *data, size_t size, const gf_pnm_header *header,
                             const char *name);

#endif
