/* cuda_fft.c - the large-mask fft method (see cuda_fft.h). The transforms
 * are 2-D, real to complex, of lw x lh >= (width + mask_width - 1) x
 * (height + mask_height - 1): the correlation of the padded image with the
 * mask then never wraps into an output kept. */
#include "cuda_fft.h"

#include <math.h>
#include <stdlib.h>

#include "cufft_dl.h"
#include "util.h"

struct gf_cuda_fft {
    const gf_cufft_api *api;
    cufftHandle forward, inverse;
    int lw, lh, count;
    size_t spectrum;            /* complex values of one spectrum: lh * (lw / 2 + 1) */
    float *real;                /* lw * lh: the padded channel */
    cufftComplex *image, *product;
    cufftComplex *weights[4];   /* each matrix's spectrum */
    float *results[4];          /* each matrix's correlation */
};

/* Sizes with factors 7 and up measured ~1.5x slower on the H200 (8505 =
 * 3^5 5 7 against 8400), so only 2, 3 and 5. */
static int is_smooth(int n)
{
    static const int primes[] = {2, 3, 5};
    for (int i = 0; i < 3; i++)
        while (n % primes[i] == 0)
            n /= primes[i];
    return n == 1;
}

int gf_fft_size(int n)
{
    while (!is_smooth(n))
        n++;
    return n;
}

/* Rates of the H200 (bench/RESULTS.md, large masks): multiply-adds a
 * second of the direct and separable methods, and the seconds a point of
 * one 2-D real transform and its share of the kernels around it take. */
#define DIRECT_FMA_PER_S 12.0e12
#define SEPARABLE_FMA_PER_S 8.0e12
#define FFT_S_PER_POINT 1.6e-11
#define FFT_PLAN_MS 0.3   /* the plans and the matrices' spectra, per call */

double gf_large_estimate_ms(int method, const conv2d_large_launch *p)
{
    const double values = (double)p->width * p->height * p->channels_filtered;
    switch (method) {
    case CONV2D_LARGE_DIRECT:
        return 1e3 * values * p->mask_count * p->mask_width * p->mask_height / DIRECT_FMA_PER_S;
    case CONV2D_LARGE_SEPARABLE:
        return 1e3 * values * (p->mask_width + p->mask_height) / SEPARABLE_FMA_PER_S;
    case CONV2D_LARGE_FFT: {
        const double points = (double)gf_fft_size(p->width + p->mask_width - 1) *
                              gf_fft_size(p->height + p->mask_height - 1);
        /* a forward transform per matrix, then per channel one forward and an inverse per matrix */
        const int transforms = p->mask_count + p->channels_filtered * (1 + p->mask_count);
        return FFT_PLAN_MS + 1e3 * transforms * points * FFT_S_PER_POINT;
    }
    default:
        return 0.0;
    }
}

void gf_cuda_fft_free(gf_cuda_fft *f)
{
    if (!f)
        return;
    if (f->forward)
        f->api->destroy(f->forward);
    if (f->inverse)
        f->api->destroy(f->inverse);
    cudaFree(f->real);
    cudaFree(f->image);
    cudaFree(f->product);
    for (int k = 0; k < 4; k++) {
        cudaFree(f->weights[k]);
        cudaFree(f->results[k]);
    }
    free(f);
}

static int allocate(gf_cuda_fft *f)
{
    const size_t real_bytes = (size_t)f->lw * f->lh * sizeof(float);
    const size_t complex_bytes = f->spectrum * sizeof(cufftComplex);
    int failed = cudaMalloc((void **)&f->real, real_bytes) != cudaSuccess ||
                 cudaMalloc((void **)&f->image, complex_bytes) != cudaSuccess ||
                 cudaMalloc((void **)&f->product, complex_bytes) != cudaSuccess;
    for (int k = 0; k < f->count && !failed; k++)
        failed = cudaMalloc((void **)&f->weights[k], complex_bytes) != cudaSuccess ||
                 cudaMalloc((void **)&f->results[k], real_bytes) != cudaSuccess;
    if (failed)
        (void)cudaGetLastError();
    return failed ? -1 : 0;
}

static int make_plans(gf_cuda_fft *f, cudaStream_t stream)
{
    /* cufftPlan2d takes (rows, columns) */
    if (f->api->plan2d(&f->forward, f->lh, f->lw, CUFFT_R2C) != CUFFT_SUCCESS ||
        f->api->plan2d(&f->inverse, f->lh, f->lw, CUFFT_C2R) != CUFFT_SUCCESS ||
        f->api->set_stream(f->forward, stream) != CUFFT_SUCCESS ||
        f->api->set_stream(f->inverse, stream) != CUFFT_SUCCESS)
        return -1;
    return 0;
}

static int weight_spectra(gf_cuda_fft *f, const conv2d_large_launch *p, cudaStream_t stream)
{
    for (int k = 0; k < f->count; k++)
        if (conv2d_fft_pad_weights(p, k, f->real, f->lw, f->lh, stream) != cudaSuccess ||
            f->api->exec_r2c(f->forward, f->real, f->weights[k]) != CUFFT_SUCCESS)
            return -1;
    return 0;
}

gf_cuda_fft *gf_cuda_fft_prepare(const conv2d_large_launch *p, cudaStream_t stream)
{
    const char *why = NULL;
    const gf_cufft_api *api = gf_cufft(&why);
    if (!api) {
        gf_set_error("the fft method needs cuFFT: %s", why);
        return NULL;
    }
    gf_cuda_fft *f = calloc(1, sizeof *f);
    if (!f) {
        gf_set_error("out of memory");
        return NULL;
    }
    f->api = api;
    f->count = p->mask_count;
    f->lw = gf_fft_size(p->width + p->mask_width - 1);
    f->lh = gf_fft_size(p->height + p->mask_height - 1);
    f->spectrum = (size_t)f->lh * (f->lw / 2 + 1);
    if (allocate(f) < 0 || make_plans(f, stream) < 0 || weight_spectra(f, p, stream) < 0) {
        gf_set_error("cannot prepare the %dx%d FFT of a %dx%d mask on a %dx%d image (%s)", f->lw, f->lh,
                     p->mask_width, p->mask_height, p->width, p->height, "GPU memory or cuFFT");
        gf_cuda_fft_free(f);
        return NULL;
    }
    return f;
}

int gf_cuda_fft_run(gf_cuda_fft *f, const conv2d_large_launch *p, cudaStream_t stream)
{
    const float scale = 1.0f / ((float)f->lw * (float)f->lh);
    conv2d_fft_results results = {{NULL}};
    for (int k = 0; k < f->count; k++)
        results.plane[k] = f->results[k];
    for (int c = 0; c < p->channels; c++) {
        if (c < p->channels_filtered) {
            if (conv2d_fft_pad_image(p, c, f->real, f->lw, f->lh, stream) != cudaSuccess ||
                f->api->exec_r2c(f->forward, f->real, f->image) != CUFFT_SUCCESS)
                goto failed;
            for (int k = 0; k < f->count; k++)
                if (conv2d_fft_correlate(f->image, f->weights[k], f->product, f->spectrum, scale, stream) !=
                        cudaSuccess ||
                    f->api->exec_c2r(f->inverse, f->product, f->results[k]) != CUFFT_SUCCESS)
                    goto failed;
        }
        if (conv2d_fft_finish(p, c, results, f->lw, stream) != cudaSuccess)
            goto failed;
    }
    return 0;
failed:
    gf_set_error("CUDA error while running the FFT convolution: %s", cudaGetErrorString(cudaGetLastError()));
    return -1;
}
