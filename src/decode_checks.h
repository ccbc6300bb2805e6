/* decode_checks.h - checks of an input file's bytes that stb_image does not
 * make: a container cut short, a header that declares far more pixels than
 * the file could hold, data on which stb_image 2.27 misbehaves. Each check
 * returns 0, or -1 with the error set as "NAME: problem". */
#ifndef GF_DECODE_CHECKS_H
#define GF_DECODE_CHECKS_H

#include <stddef.h>

/* What a JPEG's marker walk found about its Huffman tables. */
typedef struct {
    unsigned defined;   /* bit th: DC table th; bit 4 + th: AC table th */
    int progressive;    /* SOF2: a scan uses DC or AC tables, not both */
    int undefined_used; /* a scan needs a table not defined before it */
} gf_jpeg_tables;

/* Before stb_image reads even the header: a JPEG's markers (stb 2.27
 * overflows on some Huffman tables while reading the header) run whole to
 * EOI, and a PNG's chunks run whole to IEND. */
int gf_check_container(const unsigned char *data, size_t size, const char *name,
                       gf_jpeg_tables *tables);

/* Once the declared size is within the pixel limit: the header declares no
 * more pixels than the data could expand to (PNG, GIF, PSD, HDR, RLE TGA,
 * baseline JPEG), and every byte the decoder will read is there (BMP, TGA,
 * GIF's first image, PSD, HDR; an HDR whose RLE would never end is refused). */
int gf_check_image_data(const unsigned char *data, size_t size, const char *name);

#endif
