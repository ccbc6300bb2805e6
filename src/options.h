/* options.h - the command line parsed into a job. */
#ifndef GF_OPTIONS_H
#define GF_OPTIONS_H

#include "backend.h"
#include "image.h"
#include "pipeline.h"
#include "tone_report.h"

enum { GF_EXIT_FILE = 1, GF_EXIT_USAGE = 2 };

#define GF_MAX_DEVICES 64

/* What the command line asks for: a run, or a text printed instead. */
typedef enum {
    GF_ACTION_RUN = 0, GF_ACTION_HELP, GF_ACTION_VERSION, GF_ACTION_LIST_MASKS, GF_ACTION_LIST_DEVICES,
    GF_ACTION_LIST_PATHS
} gf_action;

/* Where JPEGs are decoded and encoded (--codec). */
typedef enum { GF_CODEC_AUTO = 0, GF_CODEC_CPU, GF_CODEC_GPU } gf_codec_choice;

typedef struct {
    gf_action action;
    gf_pipeline pipeline;        /* its masks named, loaded by gf_job_prepare */
    gf_backend_kind backend;
    gf_backend_options backend_options;
    gf_format format;
    gf_codec_choice codec;
    int quality;
    int verbose;
    gf_stats_format stats;
    const char *input, *output;  /* output NULL: statistics only */
    int output_named;            /* output given with --output */
    int force;                   /* a positional OUTPUT may replace any image */
    int gray;                    /* --gray: colour to luminance after decoding */
    int depth;                   /* --depth: 8 or 16 after decoding; 0 keeps the input's */
    int autorotate;              /* JPEGs turned by their EXIF orientation (--no-autorotate: 0) */
    int verify;                  /* --verify: compare with the reference backend */
    int summary;                 /* --summary: a batch's statistics over all files */
    /* batch mode: -o DIR and/or --files-from, inputs from the arguments */
    int batch;
    const char *output_dir, *files_from, *suffix;
    char **inputs;
    int input_count;
    int jobs;                    /* worker threads (-j) */
    int shard_index, shard_count;
    /* --devices: the CUDA devices a batch spreads over; all_devices: every one */
    int devices[GF_MAX_DEVICES];
    int device_count, all_devices;
    int quiet;
    int tile_sweep, csv;         /* --tile sweep [--csv]: the occupancy experiment */
    /* the image module's limits and PNG level; 0 (timeout: -1) when not given */
    size_t max_memory, max_pixels;
    double decode_timeout;
    int png_level;
} gf_job;

/* Defaults for a job before its options are parsed. */
void gf_job_init(gf_job *job);
void gf_job_free(gf_job *job);

/* Parse argv into job (getopt_long), with no other effect than a usage
 * error's message: no file is read, no setting made, nothing listed.
 * Returns -1 when the job should go on (job->action says to what), or the
 * exit status to end with: 2 after a usage error (already printed). */
int gf_parse_options(int argc, char **argv, gf_job *job);

/* What a parsed job needs before it runs: the image module's limits and
 * PNG level set, the masks loaded. Returns -1 to go on, or the exit status
 * after an error (printed). */
int gf_job_prepare(gf_job *job);

/* Print what job->action asks for (not GF_ACTION_RUN); the exit status. */
int gf_job_print(const gf_job *job);

#endif
