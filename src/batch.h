/* batch.h - many images in one run: output names, sharding, a pool of
 * worker threads that decode, filter and encode, failures skipped. */
#ifndef GF_BATCH_H
#define GF_BATCH_H

#include <stddef.h>

#include "backend.h"
#include "options.h"

typedef struct {
    char *input;
    char *output;  /* NULL: statistics only */
} gf_batch_item;

typedef struct {
    gf_batch_item *items;
    size_t count;
} gf_batch;

/* Gather the inputs (arguments, then --files-from), keep this shard's,
 * name the outputs and refuse collisions, all before any work starts.
 * Returns 0, or the exit status: 2 for a usage error (two inputs with one
 * output name, an output that is an input), 1 when --files-from cannot be
 * read or the output folder cannot be made; the message is in gf_error(). */
int gf_batch_plan(const gf_job *job, char **inputs, int input_count, gf_batch *batch);
void gf_batch_free(gf_batch *batch);

/* The output name for one input: DIR/STEM SUFFIX.EXT, EXT from --format,
 * else the input's own when it is a format we write, else png. */
char *gf_batch_output_name(const char *dir, const char *input, const char *suffix,
                           gf_format format);

/* Which shard (0..count-1) an input path belongs to: a hash of the path as
 * given, so every shard of a job array agrees without a coordinator. */
unsigned gf_batch_shard_of(const char *path, unsigned count);

/* Run the batch on 'workers' threads, each with its own backend of the
 * kind of 'backend' (opened already, which shows that kind works here). A
 * CUDA worker has its own stream, device buffers and page-locked staging,
 * on devices[worker % device_count], so the copies and kernels of one image
 * overlap the decoding and encoding of the others. Each failure is reported
 * on stderr with its file's name and skipped. Returns the number of failed
 * files, or GF_BATCH_USAGE when --summary refused the files (8 and 16 bits
 * a sample mixed: a usage error, reported). */
#define GF_BATCH_USAGE ((size_t)-1)
size_t gf_batch_run(const gf_job *job, const gf_batch *batch, int workers, gf_backend *backend,
                    const int *devices, int device_count);

#endif
