/* backend.h - the primitives every backend provides.
 *
 * A job uploads one image, runs its operations on the backend's own buffers
 * (device memory for CUDA) in command-line order, and downloads the result
 * once. The CPU backend is the reference implementation of each primitive. */
#ifndef GF_BACKEND_H
#define GF_BACKEND_H

#include <stdint.h>
#include <stdio.h>

#include "border.h"
#include "clahe.h"
#include "cpu_conv.h"
#include "diffuse.h"
#include "image.h"
#include "mask.h"
#include "tone.h"

typedef enum { GF_BACKEND_AUTO = 0, GF_BACKEND_CPU, GF_BACKEND_CUDA, GF_BACKEND_REFERENCE } gf_backend_kind;

/* Kernel versions on the conv2d ladder (kernels/conv2d.cu: the ladder; conv2d_*.cuh: the families). */
typedef enum {
    GF_CONV_NAIVE = 0,
    GF_CONV_TILED = 1,
    GF_CONV_BLOCKED = 2,
    GF_CONV_SEPARABLE = 3,
    GF_CONV_DIRECT = 4,
    GF_CONV_AUTO = 5,   /* see pick_version() in backend_cuda.c */
} gf_conv_version;

/* Masks past 31x31 by FFT: the estimates' choice, always where a mask is
 * not a box, or never. */
typedef enum { GF_FFT_AUTO = 0, GF_FFT_ALWAYS, GF_FFT_NEVER } gf_fft_mode;

typedef struct {
    int tile_width, tile_height;  /* 0 x 0: choose from the occupancy API */
    gf_conv_version conv_version;
    gf_fft_mode fft;
    int diffuse_version;          /* --kernel global|shared|temporal[:K]|stream[:K]: 1..4; 0: auto */
    int diffuse_steps;            /* temporal:K or stream:K, 1..8; 0: the version's choice */
    int device;                   /* CUDA device ordinal */
    size_t memory_limit;          /* image buffers on the device; 0: what is free */
    int pinned_staging;           /* keep page-locked host buffers between images */
    FILE *log;                    /* verbose report (launch shapes, times); NULL: quiet */
} gf_backend_options;

typedef enum { GF_EQUALIZE_LUMINANCE = 0, GF_EQUALIZE_CHANNELS } gf_equalize_mode;

/* A contrast stretch: normalize (percentiles of luminance) or auto-level
 * (min and max over the colour channels). */
typedef struct {
    enum { GF_STRETCH_NORMALIZE = 0, GF_STRETCH_AUTO_LEVEL } kind;
    double black, white;  /* normalize: percent clipped at each end */
} gf_stretch;

typedef struct gf_backend gf_backend;

/* An operation implemented on the host: filters img (in host memory, at
 * its depth) in place; 0, or -1 with the error set. */
typedef int (*gf_host_op)(gf_image *img, const void *arg);

struct gf_backend {
    const char *name;
    /* Take img's pixels into the backend's buffers: a copy (CUDA), or the
     * buffer itself (CPU), img then holding a buffer of the same size
     * whose contents are undefined until download fills it. */
    int (*upload)(gf_backend *self, gf_image *img);
    /* Filter the current image in place. Channels below 'channels_filtered'
     * are filtered; the rest (alpha) pass through unchanged. Returns -1 when
     * the backend failed, -2 when the options cannot work here (a tile over
     * the device's limits): a usage error. */
    int (*convolve)(gf_backend *self, const gf_mask *mask, gf_border border,
                    int channels_filtered);
    /* Tone operations change the colour channels (0..colour-1) only; alpha,
     * if any, is never changed. colour is 1 (gray) or 3 (RGB). */
    int (*equalize)(gf_backend *self, gf_equalize_mode mode, int colour);
    int (*stretch)(gf_backend *self, const gf_stretch *how, int colour);
    /* Run op on the current image in host memory: the CPU's own buffer;
     * the GPU's image copied to the host and back (in place in strip mode). */
    int (*on_host)(gf_backend *self, gf_host_op op, const void *arg);
    /* CLAHE on the backend's own buffers (gf_clahe_image's bytes); NULL:
     * the pipeline runs gf_clahe_image through on_host. */
    int (*clahe)(gf_backend *self, const gf_clahe *how);
    /* --diffuse on the backend's own device (a gf_diffuse, border and
     * channels set); NULL: the pipeline runs gf_diffuse_image on_host. */
    int (*diffuse)(gf_backend *self, const gf_diffuse *how);
    /* Histogram, min, max, sum and sum of squares of every channel. */
    int (*statistics)(gf_backend *self, gf_channel_stats *per_channel);
    /* Wait until every queued operation has completed. */
    int (*finish)(gf_backend *self);
    /* Copy the current image into img (same size and channels as uploaded). */
    int (*download)(gf_backend *self, gf_image *img);
    void (*destroy)(gf_backend *self);
};

/* "cpu": the fast convolution (cpu_conv.h) on threads; "reference": the
 * one-thread double-precision oracle. Both give the same bytes. */
gf_backend *gf_backend_cpu_new(const gf_backend_options *options);
gf_backend *gf_backend_reference_new(const gf_backend_options *options);
/* The cpu backend's next convolution reads source rows still arriving
 * (decode_ahead.h) through 'ahead'; NULL: none. */
void gf_backend_cpu_rows_ahead(gf_backend *cpu, const gf_rows_ready *ahead);
/* NULL with an error when no usable GPU is present. */
gf_backend *gf_backend_cuda_new(const gf_backend_options *options);

/* --tile sweep: upload img to a CUDA backend, then time one convolution
 * with mask for every candidate tile and print one row each to out (a table,
 * or CSV): threads, warps, theoretical occupancy, shared bytes, ms, Gpx/s
 * and % of the device copy bandwidth, the automatic choice marked, tiles
 * that cannot launch listed with the reason. 0, or -1 on a device failure. */
int gf_cuda_tile_sweep(gf_backend *cuda, const gf_image *img, const gf_mask *mask,
                       gf_border border, int channels_filtered, int csv, FILE *out);
/* --tile sweep for --diffuse: upload img, then time the diffusion how
 * (border and channels set) with the global and shared versions, the
 * temporal one at every candidate tile and k and the stream one at every
 * strip width, k and several chunk heights: threads, blocks per SM,
 * shared bytes, redundant work, ms an iteration, the ratio to the global
 * version and % of a device copy of the planes (one read and one write),
 * the automatic choice marked. 0, -1 on a failure, -2 for a usage error. */
int gf_cuda_diffuse_sweep(gf_backend *cuda, const gf_image *img, const gf_diffuse *how, int csv,
                          FILE *out);
/* A CUDA backend's device side, for codecs that decode into or encode from
 * device memory (gpu_batch.c). The stream (a cudaStream_t) orders every
 * copy and launch of the backend. upload_device takes an image already in
 * device memory (copied on the device); 0, -1 on a CUDA failure, -2 when it
 * is over the GPU memory budget (upload it from the host: strips). The
 * current image's device pixels: NULL in strip mode. */
void *gf_cuda_stream(gf_backend *cuda);
int gf_cuda_upload_device(gf_backend *cuda, const unsigned char *pixels, int width, int height,
                          int channels);
const unsigned char *gf_cuda_device_image(gf_backend *cuda);
/* The number of CUDA devices, or -1 with an error when none is usable. */
int gf_cuda_device_count(void);
/* Print one line per CUDA device; the count, or -1 with an error when none is usable. */
int gf_cuda_list_devices(FILE *out);
/* The direct kernel's paths, the masks, sizes and layouts of each (--list-paths;
 * no GPU needed); 0. */
int gf_cuda_list_paths(FILE *out);

/* The reference implementations, shared by the CPU backend and the tests. */
/* The exact value of output value (x, y, c) before rounding: each matrix's
 * sum over the taps (borders mapped) / scale + offset, combined. */
double gf_conv2d_cpu_exact(const unsigned char *src, int width, int height, int channels,
                           const gf_mask *mask, gf_border border, int x, int y, int c);
void gf_conv2d_cpu(const unsigned char *src, unsigned char *dst, int width, int height,
                   int channels, int channels_filtered, const gf_mask *mask, gf_border border);
void gf_statistics_cpu(const unsigned char *pixels, size_t count, int channels,
                       gf_channel_stats *per_channel);
void gf_equalize_cpu(unsigned char *pixels, size_t count, int channels, gf_equalize_mode mode,
                     int colour);
void gf_stretch_cpu(unsigned char *pixels, size_t count, int channels, const gf_stretch *how,
                    int colour);
/* The same over 16-bit samples (host byte order): convolution results
 * clamped to 0..65535, tone operations over 65536 bins (tone.h), statistics
 * with depth 16. The tone operations return 0, or -1 with an error when
 * their tables (1.1 MB) cannot be allocated. */
double gf_conv2d_cpu_exact16(const uint16_t *src, int width, int height, int channels,
                             const gf_mask *mask, gf_border border, int x, int y, int c);
void gf_conv2d_cpu16(const uint16_t *src, uint16_t *dst, int width, int height, int channels,
                     int channels_filtered, const gf_mask *mask, gf_border border);
void gf_statistics_cpu16(const uint16_t *pixels, size_t count, int channels,
                         gf_channel_stats *per_channel);
int gf_equalize_cpu16(uint16_t *pixels, size_t count, int channels, gf_equalize_mode mode,
                      int colour);
int gf_stretch_cpu16(uint16_t *pixels, size_t count, int channels, const gf_stretch *how,
                     int colour);

#endif
