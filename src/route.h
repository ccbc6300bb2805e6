/* route.h - the backend of a single call, and the GPU's start beside the
 * decode.
 *
 * --backend cuda starts the GPU (driver, context, buffers) on a thread at
 * once; --backend auto decides from the input's probe (cost_model.h) and
 * starts it then, only when the GPU is chosen: small work never loads the
 * driver. Either way the main thread decodes meanwhile, and the first
 * operation waits only for what is left of the start. */
#ifndef GF_ROUTE_H
#define GF_ROUTE_H

#include "backend.h"
#include "decode_ahead.h"
#include "image.h"
#include "options.h"

typedef struct gf_route gf_route;

/* NULL when out of memory. */
gf_route *gf_route_begin(const gf_job *job);
/* Decode the input (gf_image_load_limited), deciding on the way; NULL
 * with no error when the call streams instead (stream.h), or decodes
 * ahead of its filter (decode_ahead.h): then
 * gf_route_stream_input gives the input's bytes, and gf_route_decode_whole
 * decodes them after all, for a file that turns out not to stream. */
gf_image *gf_route_load(gf_route *route, const gf_job *job, const char *path);
const unsigned char *gf_route_stream_input(const gf_route *route, size_t *size);
gf_image *gf_route_decode_whole(gf_route *route);
/* Whether the input taken is to be decoded ahead of the filter
 * (decode_ahead.h) rather than streamed, and that decode started (NULL:
 * decode it whole); the input stays the route's. */
int gf_route_decodes_ahead(const gf_route *route);
gf_decode_ahead *gf_route_decode_ahead(gf_route *route);
/* The backend the call runs on, once the start (if any) has finished; the
 * caller destroys it. NULL with an error. -v reports the choice and the
 * start's time, hidden and waited for. */
gf_backend *gf_route_backend(gf_route *route, const gf_job *job);
/* Waits for a start still under way, and frees what the caller did not take. */
void gf_route_end(gf_route *route);

#endif
