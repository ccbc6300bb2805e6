/* cuda_backend.h - the GPU backend's state and what its files share:
 * backend_cuda.c (device, buffers, launches, tone operations) and
 * cuda_sweep.c (--tile sweep). Private to them. */
#ifndef GF_CUDA_BACKEND_H
#define GF_CUDA_BACKEND_H

#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "../kernels/kernels.h"
#include "backend.h"
#include "tile_rule.h"
#include "util.h"

#define CUDA_CHECK(call, what)                                                        \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            gf_set_error("CUDA error while %s: %s", (what), cudaGetErrorString(err_)); \
            return -1;                                                                \
        }                                                                             \
    } while (0)

typedef struct {
    gf_backend base;
    gf_backend_options options;
    struct cudaDeviceProp prop;
    unsigned char *buffer[2];   /* current image in buffer[current] */
    int current;
    size_t buffer_bytes;
    float *weights;             /* GF_MASK_MAX_MATRICES matrices of up to 31x31 */
    float *factors;             /* a separable mask's row, then its column */
    /* host copies of the current mask, passed by value to versions 2 and 3 */
    float host_weights[GF_MASK_MAX_MATRICES * GF_MASK_SMALL_SIZE * GF_MASK_SMALL_SIZE];
    float host_factors[2 * GF_MASK_SMALL_SIZE];
    conv2d_mask_facts mask_facts;  /* what the planner reads of host_weights */
    /* tone scratch: histograms, their CDFs, LUTs and a reduction, all on
     * the device; only statistics are ever copied back */
    unsigned long long *hist, *cdf;   /* 4 * GF_BINS each */
    unsigned char *lut;               /* 4 * GF_BINS */
    reduce_result *range;
    int width, height, channels;
    cudaEvent_t start, stop;
    /* strip mode: the image in host memory, host[host_current] */
    int strips;
    unsigned char *host[2];
    int host_current;
    size_t strip_rows;          /* rows one device buffer holds */
    cudaStream_t stream;        /* every copy and launch of this backend */
    int depth;                  /* the current image's bits a sample: 8 or 16 */
    unsigned int *hist16;       /* 16 bits: 4 x 65536 counts (cuda_depth16.c, at first use) */
    uint16_t *lut16;            /* 16 bits: 4 x 65536-entry tables */
    unsigned char *pinned;      /* page-locked staging for whole-image copies */
    size_t pinned_bytes;
    enum { FAULT_NONE = 0, FAULT_ALLOC, FAULT_LAUNCH } fault;
} cuda_backend;

/* Copies run on the backend's stream, in order with its launches; a copy to
 * the host waits for it. From pageable memory a copy to the device returns
 * once the source has been staged, so the source may be reused at once. */
static inline cudaError_t gf_cuda_to_device(const cuda_backend *b, void *dst, const void *src,
                                            size_t bytes)
{
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, b->stream);
}

static inline cudaError_t gf_cuda_to_host(const cuda_backend *b, void *dst, const void *src,
                                          size_t bytes)
{
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, b->stream);
    return err != cudaSuccess ? err : cudaStreamSynchronize(b->stream);
}

/* Bytes of one image row. */
size_t gf_cuda_row_bytes(const cuda_backend *b);
/* Strip mode: the rows of the band from row y0, and its upload into buffer[0]. */
int gf_cuda_band_rows(const cuda_backend *b, int y0);
int gf_cuda_upload_band(cuda_backend *b, int y0, int rows);

/* The image into the device buffer (in strips where it does not fit). */
int gf_cuda_upload_copy(gf_backend *self, const gf_image *img);

/* A convolution's launch for the current image: weights uploaded, the
 * version picked (--kernel or the fastest for the mask) and the tile
 * (--tile, checked, or the tile rule's); -2 for a usage error. */
int gf_cuda_prepare_convolve(cuda_backend *b, const gf_mask *mask, gf_border border,
                             int channels_filtered, conv2d_launch *p, int *version);

/* Timed work for the sweeps: 'warm' untimed runs of 'what', then 'n'
 * timed ones (events on the backend's stream) into ms[0..n-1]; 0, or -1
 * on a device error. gf_cuda_median sorts ms in place. */
typedef cudaError_t (*gf_cuda_timed_work)(cuda_backend *b, const void *arg);
int gf_cuda_time_runs(cuda_backend *b, gf_cuda_timed_work what, const void *arg, int warm, int n,
                      float *ms);
float gf_cuda_median(float *ms, int n);

/* One band of a filter in strips: src holds 'height' rows (the band's
 * output rows plus the mask's halo), dst receives them. */
typedef int (*gf_cuda_band_filter)(cuda_backend *b, void *job, const unsigned char *src,
                                   unsigned char *dst, int height);
/* Filter the host-resident image (strip mode) band by band. */
int gf_cuda_filter_strips(cuda_backend *b, const gf_mask *mask, gf_border border,
                          gf_cuda_band_filter band, void *job);

/* The operations on a 16-bit image (cuda_depth16.c); free its buffers. */
int gf_cuda_convolve16(cuda_backend *b, const gf_mask *mask, gf_border border,
                       int channels_filtered);
int gf_cuda_equalize16(cuda_backend *b, gf_equalize_mode mode, int colour);
int gf_cuda_stretch16(cuda_backend *b, const gf_stretch *how, int colour);
int gf_cuda_statistics16(cuda_backend *b, gf_channel_stats *per_channel);
void gf_cuda_free16(cuda_backend *b);

/* CLAHE on the device (cuda_clahe.c); in strip mode, or where its tables
 * do not fit, on the host through on_host. */
int gf_cuda_clahe(gf_backend *self, const gf_clahe *how);

/* A convolution with a mask gf_mask_is_large() (cuda_large.c). */
int gf_cuda_convolve_large(cuda_backend *b, const gf_mask *mask, gf_border border,
                           int channels_filtered);

/* --diffuse on the device (cuda_diffuse.c): the backend's diffuse hook. */
int gf_cuda_diffuse(gf_backend *self, const gf_diffuse *how);

#endif /* GF_CUDA_BACKEND_H */
