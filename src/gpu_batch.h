/* gpu_batch.h - the GPU codec stage of a batch: JPEGs decoded in batches
 * by nvJPEG straight into device memory, filtered there, encoded by nvJPEG
 * from the device buffer (other output formats: downloaded and encoded by
 * the writers), written by a pool of writer threads.
 *
 *   batch workers --offer(bytes)--> queue --> GPU threads (per device) --> writers
 *   read, probe                      bounded   decode batch, filter, encode   atomic write
 *
 * The queue and the writers' queue are bounded, so the images in flight
 * (and the memory) do not grow with the batch: per GPU thread 16 files
 * queued and 16 in hand, 2 per GPU thread plus 8 queued for the writers
 * and 8 being written (84 files with the two threads of one GPU). A file nvJPEG does not take
 * (see nvjpeg_codec.h), or a batch it fails, is decoded by the CPU codec
 * on the GPU thread, with the CPU path's checks and messages. */
#ifndef GF_GPU_BATCH_H
#define GF_GPU_BATCH_H

#include <stddef.h>

#include "image.h"
#include "batch.h"
#include "tone_report.h"

/* What became of one file, for the batch's report. */
typedef struct {
    size_t item;
    int status;                   /* 0, or -1 with gf_error() set */
    int width, height, channels;
    int depth;                    /* bits a sample (0: 8) */
    const gf_channel_stats *stats;  /* --stats: one per channel; else NULL */
    const char *decoder, *encoder;  /* "GPU (hardware)", "CPU", ... */
    int orientation;              /* the EXIF orientation the CPU decode applied (1: none) */
    double decode_ms, filter_ms, encode_ms, write_ms;
} gf_gpu_item_report;

typedef void (*gf_gpu_report_fn)(void *user, const gf_gpu_item_report *report);

typedef struct gf_gpu_stage gf_gpu_stage;

/* Start the stage on the devices: GPU threads with their own backend,
 * stream and codec, and the writers. report is called once per offered
 * file, from the stage's threads. NULL with an error when no GPU codec
 * can start, or, with need_hardware, when the device has no hardware
 * JPEG decoder. */
gf_gpu_stage *gf_gpu_stage_start(const gf_job *job, const gf_batch *batch, const int *devices,
                                 int device_count, int need_hardware, gf_gpu_report_fn report,
                                 void *user);
/* 1 when a file may take the stage: a JPEG (by its first bytes) of three
 * channels without undefined tables (the stage is not started for --gray
 * or --depth 16),
 * not turned by its EXIF orientation (the CPU path decodes and turns it,
 * then the worker's GPU filters it), whose entropy-coded data
 * libjpeg-turbo decodes without a complaint (gf_jpeg_rows_sound; run on
 * the caller's thread): a damaged one is left to the CPU path, for its
 * message.
 * Its result is encoded on the GPU when written as JPEG, else by a writer. */
int gf_gpu_stage_wants(const unsigned char *data, size_t size, const gf_image_probe *probe);
/* Hand over a file's bytes (the stage frees them); waits while the queue
 * is full. */
void gf_gpu_stage_offer(gf_gpu_stage *stage, size_t item, unsigned char *data, size_t size,
                        const gf_image_probe *probe);
/* Finish every offered file, stop the threads and free the stage's host
 * memory; its device side is left to the process's exit (made once per
 * process, see gpu_batch.c). */
void gf_gpu_stage_finish(gf_gpu_stage *stage);
/* "GPU (hardware)" or "GPU": the decoder the stage's threads use. */
const char *gf_gpu_stage_decoder(const gf_gpu_stage *stage);

#endif
