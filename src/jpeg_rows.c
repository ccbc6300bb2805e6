/* jpeg_rows.c - see jpeg_rows.h. libjpeg reports errors through
 * error_exit, which must not return: it jumps back to the call that was
 * running, as libjpeg's example does. Warnings (corrupt data the library
 * would pad over) fail the decode too, as they fail tjDecompress2. */
#include "jpeg_rows.h"

#include <stdlib.h>

int gf_jpeg_starts(const unsigned char *data, size_t size)
{
    return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

#ifdef GF_HAVE_JPEGLIB
#include <setjmp.h>
#include <stdio.h>  /* jpeglib.h uses FILE */
#include <jpeglib.h>

struct gf_jpeg_rows {
    struct jpeg_decompress_struct info;
    struct jpeg_error_mgr error;
    jmp_buf failed;
    int created;  /* jpeg_create_decompress called */
    int started;  /* jpeg_finish_decompress not called yet */
};

int gf_jpeg_rows_available(void)
{
    return 1;
}

static void on_error(j_common_ptr info)
{
    gf_jpeg_rows *r = (gf_jpeg_rows *)((char *)info - offsetof(gf_jpeg_rows, info));
    longjmp(r->failed, 1);
}

static void on_message(j_common_ptr info, int level)
{
    if (level < 0)  /* a warning: damaged data */
        on_error(info);
}

static void close_rows(gf_jpeg_rows *r)
{
    if (r->created)
        jpeg_destroy_decompress(&r->info);
    free(r);
}

/* Read the header and start the decompressor; 0, -1 for an error (or a
 * warning), or -2 for a file this decoder does not take. */
static int start(gf_jpeg_rows *r, const unsigned char *data, size_t size)
{
    if (setjmp(r->failed))
        return -1;
    jpeg_create_decompress(&r->info);
    r->created = 1;
    jpeg_mem_src(&r->info, data, (unsigned long)size);
    jpeg_read_header(&r->info, TRUE);
    const J_COLOR_SPACE space = r->info.jpeg_color_space;
    const int components = r->info.num_components;
    if (jpeg_has_multiple_scans(&r->info) || r->info.data_precision != 8 ||
        !((space == JCS_GRAYSCALE && components == 1) ||
          ((space == JCS_YCbCr || space == JCS_RGB) && components == 3)))
        return -2;
    /* tjDecompress2's settings with flags 0: the library's defaults (the
     * accurate integer IDCT, smooth chroma upsampling), RGB or gray out */
    r->info.out_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&r->info);
    r->started = 1;
    return 0;
}

/* A decoder started on data, or NULL with *why: -1 an error, -2 a file
 * this decoder does not take or no memory. */
static gf_jpeg_rows *open_rows(const unsigned char *data, size_t size, int *why)
{
    gf_jpeg_rows *r = calloc(1, sizeof *r);
    *why = -2;
    if (!r)
        return NULL;
    r->info.err = jpeg_std_error(&r->error);
    r->error.error_exit = on_error;
    r->error.emit_message = on_message;
    if ((*why = start(r, data, size)) < 0) {
        close_rows(r);
        return NULL;
    }
    return r;
}

gf_jpeg_rows *gf_jpeg_rows_open(const unsigned char *data, size_t size, int *width, int *height,
                                int *channels)
{
    int why;
    gf_jpeg_rows *r = open_rows(data, size, &why);
    if (!r)
        return NULL;
    *width = (int)r->info.output_width;
    *height = (int)r->info.output_height;
    *channels = r->info.output_components;
    return r;
}

int gf_jpeg_rows_read(gf_jpeg_rows *r, unsigned char *dst, int rows)
{
    if (setjmp(r->failed))
        return -1;
    const size_t pitch = (size_t)r->info.output_width * (size_t)r->info.output_components;
    JSAMPROW row[16];  /* a call takes as many rows as the library gives at once */
    for (int y = 0; y < rows;) {
        const int ask = rows - y < 16 ? rows - y : 16;
        for (int k = 0; k < ask; k++)
            row[k] = dst + (size_t)(y + k) * pitch;
        if (r->info.output_scanline >= r->info.output_height)
            return -1;
        y += (int)jpeg_read_scanlines(&r->info, row, (JDIMENSION)ask);
    }
    if (r->info.output_scanline == r->info.output_height && r->started) {
        r->started = 0;  /* to EOI: what is left may warn, as in tjDecompress2 */
        jpeg_finish_decompress(&r->info);
    }
    return 0;
}

void gf_jpeg_rows_close(gf_jpeg_rows *r)
{
    if (!r)
        return;
    close_rows(r);
}

/* All but the last row skipped (libjpeg-turbo decodes the skipped rows'
 * entropy-coded data without the rest of the decode), the last one read,
 * then the rest of the file to EOI; 0, or -1 on an error or a warning. */
static int read_through(gf_jpeg_rows *r, JSAMPROW last)
{
    if (setjmp(r->failed))
        return -1;
    const JDIMENSION left = r->info.output_height - r->info.output_scanline;
    if (left > 1 && jpeg_skip_scanlines(&r->info, left - 1) != left - 1)
        return -1;
    if (jpeg_read_scanlines(&r->info, &last, 1) != 1)
        return -1;
    r->started = 0;
    jpeg_finish_decompress(&r->info);
    return 0;
}

int gf_jpeg_rows_sound(const unsigned char *data, size_t size)
{
    int why;
    gf_jpeg_rows *r = open_rows(data, size, &why);
    if (!r)
        return why == -1 ? 0 : -1;
    JSAMPROW last = malloc((size_t)r->info.output_width * (size_t)r->info.output_components);
    const int sound = last ? read_through(r, last) == 0 : -1;
    free(last);
    close_rows(r);
    return sound;
}

#else

int gf_jpeg_rows_available(void)
{
    return 0;
}

gf_jpeg_rows *gf_jpeg_rows_open(const unsigned char *data, size_t size, int *width, int *height,
                                int *channels)
{
    (void)data;
    (void)size;
    (void)width;
    (void)height;
    (void)channels;
    return NULL;
}

int gf_jpeg_rows_read(gf_jpeg_rows *decoder, unsigned char *dst, int rows)
{
    (void)decoder;
    (void)dst;
    (void)rows;
    return -1;
}

void gf_jpeg_rows_close(gf_jpeg_rows *decoder)
{
    (void)decoder;
}

int gf_jpeg_rows_sound(const unsigned char *data, size_t size)
{
    (void)data;
    (void)size;
    return -1;
}

#endif
