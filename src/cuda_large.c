/* cuda_large.c - the GPU backend's convolution with masks gf_mask_is_large()
 * (wider or taller than 31, or the unsharp combine): the method for the
 * mask (kernels/conv2d_large.cu), its weights and scratch on the device for
 * the call, the image whole or in strips. --kernel and --tile apply to the
 * fixed-size kernels only. */
#include <stdlib.h>

#include "../kernels/conv2d_large.h"
#include "cuda_backend.h"
#include "cuda_fft.h"
#include "cufft_dl.h"

typedef struct {
    int method;
    conv2d_large_launch launch;
    const gf_mask *mask;
    gf_cuda_fft *fft;           /* the fft method's state */
} large_job;

/* The mask's own method (box, separable, direct), or fft where --fft asks
 * for it or (auto) the estimates say it is faster and cuFFT is there. */
static int choose_method(const cuda_backend *b, const gf_mask *mask, const conv2d_large_launch *p)
{
    const int own = conv2d_large_method_for(mask);
    if (own == CONV2D_LARGE_BOX || b->options.fft == GF_FFT_NEVER)
        return own;
    if (b->options.fft == GF_FFT_ALWAYS)
        return CONV2D_LARGE_FFT;
    if (!gf_cufft(NULL))
        return own;
    return gf_large_estimate_ms(CONV2D_LARGE_FFT, p) < gf_large_estimate_ms(own, p) ? CONV2D_LARGE_FFT
                                                                                   : own;
}

/* parts[0..count-1], each 'each' doubles, as floats in one device array. */
static float *upload_floats(const cuda_backend *b, double *const *parts, int count, size_t each)
{
    const size_t bytes = (size_t)count * each * sizeof(float);
    float *host = malloc(bytes), *device = NULL;
    if (!host)
        return NULL;
    for (int k = 0; k < count; k++)
        for (size_t i = 0; i < each; i++)
            host[k * each + i] = (float)parts[k][i];
    if (cudaMalloc((void **)&device, bytes) != cudaSuccess ||
        cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, b->stream) != cudaSuccess ||
        cudaStreamSynchronize(b->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(device);
        device = NULL;
    }
    free(host);
    return device;
}

/* The device copies of what the method reads and are not there yet: every
 * matrix (direct, fft), or the row and the column. */
static int upload_mask(const cuda_backend *b, const gf_mask *mask, large_job *job)
{
    conv2d_large_launch *p = &job->launch;
    if (job->method == CONV2D_LARGE_DIRECT || job->method == CONV2D_LARGE_FFT) {
        if (!p->weights)
            p->weights = upload_floats(b, mask->weights, mask->count,
                                       (size_t)mask->width * mask->height);
        return p->weights ? 0 : -1;
    }
    if (!p->row)
        p->row = upload_floats(b, &mask->row, 1, (size_t)mask->width);
    if (!p->column)
        p->column = upload_floats(b, &mask->column, 1, (size_t)mask->height);
    return p->row && p->column ? 0 : -1;
}

static void free_job(large_job *job)
{
    gf_cuda_fft_free(job->fft);
    cudaFree((void *)job->launch.weights);
    cudaFree((void *)job->launch.row);
    cudaFree((void *)job->launch.column);
    cudaFree(job->launch.scratch);
}

static int run_band(cuda_backend *b, void *arg, const unsigned char *src, unsigned char *dst,
                    int height)
{
    large_job *job = arg;
    job->launch.src = src;
    job->launch.dst = dst;
    job->launch.height = height;
    if (b->options.log)
        CUDA_CHECK(cudaEventRecord(b->start, b->stream), "recording an event");
    if (job->method == CONV2D_LARGE_FFT) {
        if (gf_cuda_fft_run(job->fft, &job->launch, b->stream) < 0)
            return -1;
    } else {
        CUDA_CHECK(conv2d_large_gpu(job->method, &job->launch, b->stream), "launching conv2d");
    }
    if (b->options.log) {
        float ms = 0.0f;
        CUDA_CHECK(cudaEventRecord(b->stop, b->stream), "recording an event");
        CUDA_CHECK(cudaEventSynchronize(b->stop), "running conv2d");
        CUDA_CHECK(cudaEventElapsedTime(&ms, b->start, b->stop), "timing conv2d");
        const double pixels = (double)job->launch.width * height;
        fprintf(b->options.log,
                "gpufilter: conv2d %s %s %dx%d on %dx%dx%d: %.3f ms (%.1f Gpx/s) on %s (device %d)\n",
                conv2d_large_method_name(job->method), job->mask->name, job->mask->width,
                job->mask->height, job->launch.width, height, job->launch.channels, ms,
                ms > 0 ? pixels / (ms * 1e6) : 0.0, b->prop.name, b->options.device);
    }
    return 0;
}

int gf_cuda_convolve_large(cuda_backend *b, const gf_mask *mask, gf_border border,
                           int channels_filtered)
{
    large_job job = {.mask = mask};
    const int rows = b->strips ? (int)b->strip_rows : b->height;
    conv2d_large_launch_of(mask, b->width, rows, b->channels, channels_filtered, border, &job.launch);
    job.method = choose_method(b, mask, &job.launch);
    int status = upload_mask(b, mask, &job);
    if (status == 0 && job.method == CONV2D_LARGE_FFT &&
        !(job.fft = gf_cuda_fft_prepare(&job.launch, b->stream))) {
        if (b->options.fft == GF_FFT_ALWAYS) {  /* gf_cuda_fft_prepare said why */
            free_job(&job);
            return -1;
        }
        /* the transforms' memory is not there: the mask's own method */
        job.method = conv2d_large_method_for(mask);
        status = upload_mask(b, mask, &job);
    }
    const size_t scratch = conv2d_large_scratch_bytes(job.method, &job.launch);
    if (status == 0 && scratch && cudaMalloc(&job.launch.scratch, scratch) != cudaSuccess) {
        (void)cudaGetLastError();
        status = -1;
    }
    if (status < 0) {
        free_job(&job);
        gf_set_error("out of GPU memory for the %dx%d mask %s on a %dx%d image (%zu MB of "
                     "scratch); --backend cpu runs it", mask->width, mask->height, mask->name,
                     b->width, b->height, scratch >> 20);
        return -1;
    }
    if (b->strips)
        status = gf_cuda_filter_strips(b, mask, border, run_band, &job);
    else if ((status = run_band(b, &job, b->buffer[b->current], b->buffer[1 - b->current],
                                b->height)) == 0)
        b->current = 1 - b->current;
    if (cudaStreamSynchronize(b->stream) != cudaSuccess && status == 0) {
        gf_set_error("CUDA error while running conv2d: %s", cudaGetErrorString(cudaGetLastError()));
        status = -1;
    }
    free_job(&job);
    return status;
}
