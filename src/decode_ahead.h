/* decode_ahead.h - a JPEG decoded on a thread, top to bottom, into the
 * whole image, while the call's first convolution runs on every core over
 * the rows already there (cpu_conv.h's gf_conv2d_fast_ahead): on the CPU
 * the one-core decode no longer comes before the threaded filter.
 *
 * The rows are the whole-image decoder's (jpeg_rows.h: the same library
 * and settings). A file the scanline decoder does not take is decoded whole
 * as ever; one that fails part way (damaged data) gives no output from
 * here: the caller decodes it whole and runs the call again, which reports
 * it as it always does. --decode-timeout holds: the thread stops between
 * bands of rows once the limit has passed. */
#ifndef GF_DECODE_AHEAD_H
#define GF_DECODE_AHEAD_H

#include <stddef.h>

#include "backend.h"
#include "cpu_conv.h"
#include "image.h"
#include "options.h"

typedef struct gf_decode_ahead gf_decode_ahead;

/* Whether this call decodes ahead: a JPEG (not turned by its EXIF
 * orientation, 8-bit) filtered on the cpu backend whose first operation is
 * a convolution, written to a file, without --gray, --depth 16 or --verify
 * (they read the whole image first). */
int gf_decode_ahead_wanted(const gf_job *job, gf_backend_kind backend, const gf_image_probe *probe,
                           const unsigned char *data, size_t size);

/* The image (probe's shape, its memory reserved from the budget) and the
 * thread decoding data (kept, not copied, until finish) into it; NULL
 * with no error when the scanline decoder does not take the file or no
 * thread or memory is there: decode it whole then. */
gf_decode_ahead *gf_decode_ahead_start(const unsigned char *data, size_t size,
                                       const gf_image_probe *probe, const char *name);
/* The image being decoded: its rows are there once the waits say so;
 * finish gives every one. The caller frees it, after finish. */
gf_image *gf_decode_ahead_image(gf_decode_ahead *d);
/* The waits for its rows, for gf_conv2d_fast_ahead. */
gf_rows_ready gf_decode_ahead_rows(gf_decode_ahead *d);
/* Waits for the thread's end and frees d: 0 when every row was decoded,
 * -1 when the decode failed (decode the file whole), -2 past
 * --decode-timeout (the error set). *ms (if not NULL): the decode's time. */
int gf_decode_ahead_finish(gf_decode_ahead *d, double *ms);

#endif
