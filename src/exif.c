/* exif.c - see exif.h. Each read goes through read16 / read32, which
 * check the offset against the structure's size before touching a byte;
 * the JPEG walk steps over whole segments whose lengths it checks first,
 * so both take at most one step per byte. */
#include "exif.h"

#include <stdint.h>
#include <string.h>

#include "bytes.h"

enum {
    TIFF_MAGIC = 42,
    TAG_ORIENTATION = 0x0112,
    TYPE_SHORT = 3,
    TYPE_LONG = 4,
    IFD_ENTRY_BYTES = 12,  /* tag 2, type 2, count 4, value or offset 4 */
    EXIF_HEADER_BYTES = 6, /* "Exif\0\0" */
};

/* A TIFF structure and its byte order. */
typedef struct {
    const unsigned char *data;
    size_t size;
    int big_endian;
} tiff_reader;

/* Whether 'bytes' bytes at 'at' lie inside the structure. */
static int inside(const tiff_reader *t, size_t at, size_t bytes)
{
    return at <= t->size && bytes <= t->size - at;
}

static int read16(const tiff_reader *t, size_t at, uint32_t *value)
{
    if (!inside(t, at, 2))
        return -1;
    *value = t->big_endian ? gf_be16(t->data + at) : gf_le16(t->data + at);
    return 0;
}

static int read32(const tiff_reader *t, size_t at, uint32_t *value)
{
    if (!inside(t, at, 4))
        return -1;
    *value = t->big_endian ? gf_be32(t->data + at) : gf_le32(t->data + at);
    return 0;
}

/* The value of an Orientation entry at 'entry'; 1 when it is malformed. */
static int orientation_entry(const tiff_reader *t, size_t entry)
{
    uint32_t type, count, value;
    if (read16(t, entry + 2, &type) < 0 || read32(t, entry + 4, &count) < 0 || count != 1)
        return GF_ORIENTATION_STORED;
    if (type == TYPE_SHORT && read16(t, entry + 8, &value) == 0)
        return value >= 1 && value <= 8 ? (int)value : GF_ORIENTATION_STORED;
    if (type == TYPE_LONG && read32(t, entry + 8, &value) == 0)
        return value >= 1 && value <= 8 ? (int)value : GF_ORIENTATION_STORED;
    return GF_ORIENTATION_STORED;
}

int gf_exif_tiff_orientation(const unsigned char *tiff, size_t size)
{
    tiff_reader t = {tiff, size, 0};
    if (size < 8 || (memcmp(tiff, "II", 2) != 0 && memcmp(tiff, "MM", 2) != 0))
        return GF_ORIENTATION_STORED;
    t.big_endian = tiff[0] == 'M';
    uint32_t magic, ifd, entries;
    if (read16(&t, 2, &magic) < 0 || magic != TIFF_MAGIC || read32(&t, 4, &ifd) < 0 ||
        read16(&t, ifd, &entries) < 0)
        return GF_ORIENTATION_STORED;
    /* ifd + 2 <= size now, so no entry's offset overflows */
    for (uint32_t i = 0; i < entries; i++) {
        const size_t entry = (size_t)ifd + 2 + (size_t)i * IFD_ENTRY_BYTES;
        uint32_t tag;
        if (read16(&t, entry, &tag) < 0)
            return GF_ORIENTATION_STORED;  /* the count runs past the segment */
        if (tag == TAG_ORIENTATION)
            return orientation_entry(&t, entry);
    }
    return GF_ORIENTATION_STORED;
}

/* The first Exif segment's bytes after "Exif\0\0", from the markers
 * between SOI and the first scan; NULL when there is none. SOI may follow
 * a run of 0xFF bytes, as the decoders accept. */
static const unsigned char *exif_segment(const unsigned char *d, size_t n, size_t *length)
{
    size_t i = 0;
    while (i < n && d[i] == 0xFF)
        i++;
    if (i == 0 || i >= n || d[i] != 0xD8)
        return NULL;
    i++;
    while (i + 4 <= n && d[i] == 0xFF) {
        const unsigned char marker = d[i + 1];
        if (marker == 0xFF) {  /* fill byte */
            i++;
            continue;
        }
        if (marker == 0xDA || marker == 0xD9)
            return NULL;
        if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
            i += 2;
            continue;
        }
        const size_t segment = gf_be16(d + i + 2);
        if (segment < 2 || segment > n - i - 2)
            return NULL;
        const unsigned char *payload = d + i + 4;
        const size_t bytes = segment - 2;
        if (marker == 0xE1 && bytes >= EXIF_HEADER_BYTES &&
            memcmp(payload, "Exif\0\0", EXIF_HEADER_BYTES) == 0) {
            *length = bytes - EXIF_HEADER_BYTES;
            return payload + EXIF_HEADER_BYTES;
        }
        i += 2 + segment;
    }
    return NULL;
}

int gf_jpeg_exif_orientation(const unsigned char *data, size_t size)
{
    size_t length = 0;
    const unsigned char *tiff = exif_segment(data, size, &length);
    return tiff ? gf_exif_tiff_orientation(tiff, length) : GF_ORIENTATION_STORED;
}
