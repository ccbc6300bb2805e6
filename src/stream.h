/* stream.h - a large JPEG filtered into a JPEG a band of rows at a time,
 * on the CPU, in bounded memory (as libvips streams an image).
 *
 * Decode (jpeg_rows.h), filter and encode (jpeg_turbo.h) take a band of
 * rows each, the next band decoded while this one is filtered, and the
 * file is written as it is made (gf_output): memory holds the compressed
 * input and four buffers of a band with the mask chain's halo (two
 * windows, two for the chain), whatever the image's height. The output
 * is the same file, byte for byte, as the whole image's: each band is
 * filtered as a sub-image with the halo above and below it (the rows a
 * border mode reaches at the image's top and bottom are inside it), and
 * the JPEG encoder's strips are the same with or without streaming. */
#ifndef GF_STREAM_H
#define GF_STREAM_H

#include <stddef.h>

#include "backend.h"
#include "image.h"
#include "options.h"

/* Decoded images of at least this many bytes stream, where they can.
 * GPUFILTER_STREAM_BAND_ROWS=N (for the tests) streams every image that
 * can, in bands of N rows rounded up to the encoder's strips. */
#define GF_STREAM_MIN_BYTES ((size_t)256 << 20)

/* Whether this call streams its input (data, size, probed): one JPEG to a
 * JPEG, on the cpu or reference backend, convolutions only (equalize,
 * normalize and --stats need the whole image first, --verify a whole
 * copy), no wrap border (it reaches the far edge), not turned by its EXIF
 * orientation (decoded whole and turned on the host instead), not
 * --depth 16, over the threshold. */
int gf_stream_wanted(const gf_job *job, gf_backend_kind backend, const gf_image_probe *probe,
                     const unsigned char *data, size_t size);

/* The call, streamed: 0, 1 (GF_EXIT_FILE) with the error set, or
 * GF_STREAM_DECLINED when the file turned out not to stream (progressive,
 * damaged data): nothing is written then, and the caller decodes the
 * file whole, which reports it as it always does. */
#define GF_STREAM_DECLINED (-1)
int gf_stream_run(const gf_job *job, const char *backend_name, const unsigned char *data,
                  size_t size);

#endif
