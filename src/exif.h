/* exif.h - the EXIF Orientation tag of a JPEG: the first APP1 segment
 * that starts "Exif\0\0" before the first scan, its TIFF header (II or
 * MM byte order), IFD0's tag 0x0112, a SHORT (or LONG) of count 1.
 *
 * Built for hostile input: every read is checked against the segment's
 * bounds, nothing outside the segment is read, and a tag that is absent,
 * malformed or outside 1..8 reads as 1 (stored order); none is an error. */
#ifndef GF_EXIF_H
#define GF_EXIF_H

#include <stddef.h>

/* The pixels as stored: no turn. */
#define GF_ORIENTATION_STORED 1

/* The orientation (1..8) of a JPEG file's bytes; 1 for anything else. */
int gf_jpeg_exif_orientation(const unsigned char *data, size_t size);

/* The orientation (1..8) in a TIFF structure: an Exif segment's bytes
 * after "Exif\0\0", offsets counted from its first byte; 1 when none. */
int gf_exif_tiff_orientation(const unsigned char *tiff, size_t size);

#endif
