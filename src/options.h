/* options.h - the command line parsed into a job. */
#ifndef GF_OPTIONS_H
#define GF_OPTIONS_H

#include "backend.h"
#include "image.h"
#include "pipeline.h"
#include "tone_report.h"

enum { GF_EXIT_FILE = 1, GF_EXIT_USAGE = 2 };

#define GF_MAX_DEVICES 64

/* Where JPEGs are decoded and encoded (--codec). */
typedef enum { GF_CODEC_AUTO = 0, GF_CODEC_CPU, GF_CODEC_GPU } gf_codec_choice;

typedef struct {
    gf_pipeline pipeline;
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
} gf_job;

/* Defaults for a job before its options are parsed. */
void gf_job_init(gf_job *job);
void gf_job_free(gf_job *job);

/* Parse argv into job (getopt_long; the masks are loaded here). Returns -1
 * when the job should run, otherwise the exit status to end with: 0 after
 * --help, --version or a listing, 2 after a usage error (already printed). */
int gf_parse_options(int argc, char **argv, gf_job *job);

#endif
