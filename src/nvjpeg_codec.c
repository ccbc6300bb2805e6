/* nvjpeg_codec.c - nvJPEG through dlopen (see nvjpeg_codec.h). Built
 * without nvjpeg.h, every call reports the GPU codec as absent. */
#include "nvjpeg_codec.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

#ifdef GF_HAVE_NVJPEG
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#define GF_STR_(x) #x
#define GF_STR(x) GF_STR_(x)

#define NVJPEG_FUNCTIONS(X)                                                                  \
    X(nvjpegGetProperty) X(nvjpegCreateEx) X(nvjpegDestroy) X(nvjpegJpegStateCreate)         \
    X(nvjpegJpegStateDestroy) X(nvjpegDecodeBatchedInitialize) X(nvjpegDecodeBatched)        \
    X(nvjpegJpegStreamCreate) X(nvjpegJpegStreamDestroy) X(nvjpegJpegStreamParseHeader)           \
    X(nvjpegJpegStreamGetJpegEncoding) X(nvjpegJpegStreamGetFrameDimensions)                 \
    X(nvjpegJpegStreamGetComponentsNum) X(nvjpegJpegStreamGetSamplePrecision) X(nvjpegDecodeBatchedSupported)                      \
    X(nvjpegEncoderStateCreate) X(nvjpegEncoderStateDestroy) X(nvjpegEncoderParamsCreate)    \
    X(nvjpegEncoderParamsDestroy) X(nvjpegEncoderParamsSetQuality)                           \
    X(nvjpegEncoderParamsSetSamplingFactors) X(nvjpegEncodeImage)                            \
    X(nvjpegEncodeRetrieveBitstream)

#define DECLARE(f) __typeof__(f) *f;
static struct {
    NVJPEG_FUNCTIONS(DECLARE)
} api;
#undef DECLARE

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded;
static char load_note[256] = "not loaded";

static void *open_library(void)
{
    static const char *const names[] = {
        "libnvjpeg.so." GF_STR(NVJPEG_VER_MAJOR),
#ifdef GF_NVJPEG_LIBDIR
        GF_NVJPEG_LIBDIR "/libnvjpeg.so." GF_STR(NVJPEG_VER_MAJOR),
#endif
    };
    return gf_open_library("GPUFILTER_NVJPEG", names, sizeof names / sizeof *names);
}

static void load(void)
{
    void *lib = open_library();
    if (!lib) {
        const char *chosen = getenv("GPUFILTER_NVJPEG");
        snprintf(load_note, sizeof load_note, "%s",
                 chosen && strcmp(chosen, "none") == 0
                     ? "off (GPUFILTER_NVJPEG=none)"
                     : "libnvjpeg.so." GF_STR(NVJPEG_VER_MAJOR) " not found");
        return;
    }
#define RESOLVE(f)                                                                    \
    if (!(api.f = (__typeof__(api.f))dlsym(lib, #f))) {                               \
        snprintf(load_note, sizeof load_note, "libnvjpeg lacks %s", #f);              \
        return;                                                                       \
    }
    NVJPEG_FUNCTIONS(RESOLVE)
#undef RESOLVE
    int major = 0, minor = 0, patch = 0;
    api.nvjpegGetProperty(MAJOR_VERSION, &major);
    api.nvjpegGetProperty(MINOR_VERSION, &minor);
    api.nvjpegGetProperty(PATCH_LEVEL, &patch);
    snprintf(load_note, sizeof load_note, "nvJPEG %d.%d.%d", major, minor, patch);
    loaded = 1;
}

int gf_nvjpeg_available(const char **why)
{
    pthread_once(&load_once, load);
    if (why)
        *why = load_note;
    return loaded;
}

const char *gf_nvjpeg_describe(void)
{
    pthread_once(&load_once, load);
    return load_note;
}

struct gf_gpu_jpeg {
    nvjpegHandle_t handle;
    nvjpegJpegState_t state;
    nvjpegJpegStream_t parsed;
    nvjpegEncoderState_t encoder;
    nvjpegEncoderParams_t params;
    cudaStream_t stream;
    int hardware;
    int max_batch;
    int batch;                 /* the size the decoder is initialized for; 0: none */
    nvjpegImage_t *outputs;    /* max_batch */
    unsigned char *pinned;     /* page-locked landing for encoded streams */
    size_t pinned_bytes;
};

static const char *status_text(nvjpegStatus_t s)
{
    switch (s) {
    case NVJPEG_STATUS_NOT_INITIALIZED: return "not initialized";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "invalid parameter";
    case NVJPEG_STATUS_BAD_JPEG: return "bad JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "JPEG not supported";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "allocation failed";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "execution failed";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "no such backend on this device";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "internal error";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "not offered by this backend";
    default: return "error";
    }
}

#define NVJPEG_CHECK(call, what)                                                       \
    do {                                                                               \
        nvjpegStatus_t s_ = (call);                                                    \
        if (s_ != NVJPEG_STATUS_SUCCESS) {                                             \
            gf_set_error("nvJPEG failed while %s: %s (%d)", (what), status_text(s_), (int)s_); \
            return -1;                                                                 \
        }                                                                              \
    } while (0)

/* The hardware engines where there are some, else the GPU-assisted
 * backend; chroma upsampled by interpolation, as libjpeg-turbo does, where
 * the backend offers it. */
static int create_handle(gf_gpu_jpeg *c)
{
    static const struct { nvjpegBackend_t backend; unsigned flags; int hardware; } tries[] = {
        {NVJPEG_BACKEND_HARDWARE, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, 1},
        {NVJPEG_BACKEND_HARDWARE, NVJPEG_FLAGS_DEFAULT, 1},
        {NVJPEG_BACKEND_GPU_HYBRID, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, 0},
        {NVJPEG_BACKEND_DEFAULT, NVJPEG_FLAGS_DEFAULT, 0},
    };
    /* GPUFILTER_NVJPEG_BACKEND=gpu: the GPU-assisted backend even where the
     * hardware decoder is (what a GPU without one gets), for the bench */
    const char *forced = getenv("GPUFILTER_NVJPEG_BACKEND");
    const size_t first = forced && strcmp(forced, "gpu") == 0 ? 2 : 0;
    nvjpegStatus_t s = NVJPEG_STATUS_NOT_INITIALIZED;
    for (size_t i = first; i < sizeof tries / sizeof *tries; i++) {
        s = api.nvjpegCreateEx(tries[i].backend, NULL, NULL, tries[i].flags, &c->handle);
        if (s == NVJPEG_STATUS_SUCCESS) {
            c->hardware = tries[i].hardware;
            return 0;
        }
        c->handle = NULL;
    }
    gf_set_error("nvJPEG failed while starting: %s (%d)", status_text(s), (int)s);
    return -1;
}

static int open_codec(gf_gpu_jpeg *c)
{
    if (create_handle(c) < 0)
        return -1;
    NVJPEG_CHECK(api.nvjpegJpegStateCreate(c->handle, &c->state), "creating a decoder");
    NVJPEG_CHECK(api.nvjpegJpegStreamCreate(c->handle, &c->parsed), "creating a parser");
    NVJPEG_CHECK(api.nvjpegEncoderStateCreate(c->handle, &c->encoder, c->stream),
                 "creating an encoder");
    NVJPEG_CHECK(api.nvjpegEncoderParamsCreate(c->handle, &c->params, c->stream),
                 "creating encoder parameters");
    return 0;
}

gf_gpu_jpeg *gf_gpu_jpeg_new(void *cuda_stream, int max_batch)
{
    const char *why;
    if (!gf_nvjpeg_available(&why)) {
        gf_set_error("no GPU JPEG codec: %s", why);
        return NULL;
    }
    gf_gpu_jpeg *c = calloc(1, sizeof *c);
    if (c)
        c->outputs = calloc((size_t)(max_batch > 0 ? max_batch : 1), sizeof *c->outputs);
    if (!c || !c->outputs) {
        free(c);
        gf_set_error("out of memory");
        return NULL;
    }
    c->stream = (cudaStream_t)cuda_stream;
    c->max_batch = max_batch > 0 ? max_batch : 1;
    if (open_codec(c) < 0) {
        gf_gpu_jpeg_free(c);
        return NULL;
    }
    return c;
}

void gf_gpu_jpeg_free(gf_gpu_jpeg *c)
{
    if (!c)
        return;
    if (c->params)
        api.nvjpegEncoderParamsDestroy(c->params);
    if (c->encoder)
        api.nvjpegEncoderStateDestroy(c->encoder);
    if (c->parsed)
        api.nvjpegJpegStreamDestroy(c->parsed);
    if (c->state)
        api.nvjpegJpegStateDestroy(c->state);
    if (c->handle)
        api.nvjpegDestroy(c->handle);
    cudaFreeHost(c->pinned);
    free(c->outputs);
    free(c);
}

const char *gf_gpu_jpeg_backend(const gf_gpu_jpeg *c)
{
    return c->hardware ? "hardware" : "GPU";
}

int gf_gpu_jpeg_supported(gf_gpu_jpeg *c, const unsigned char *data, size_t size, int width,
                          int height)
{
    if (api.nvjpegJpegStreamParseHeader(c->handle, data, size, c->parsed) != NVJPEG_STATUS_SUCCESS)
        return 0;
    nvjpegJpegEncoding_t encoding;
    unsigned components = 0, w = 0, h = 0, precision = 0;
    int unsupported = 1;
    if (api.nvjpegJpegStreamGetJpegEncoding(c->parsed, &encoding) != NVJPEG_STATUS_SUCCESS ||
        api.nvjpegJpegStreamGetComponentsNum(c->parsed, &components) != NVJPEG_STATUS_SUCCESS ||
        api.nvjpegJpegStreamGetFrameDimensions(c->parsed, &w, &h) != NVJPEG_STATUS_SUCCESS ||
        api.nvjpegJpegStreamGetSamplePrecision(c->parsed, &precision) != NVJPEG_STATUS_SUCCESS)
        return 0;
    if ((encoding != NVJPEG_ENCODING_BASELINE_DCT &&
         encoding != NVJPEG_ENCODING_EXTENDED_SEQUENTIAL_DCT_HUFFMAN) ||
        components != 3 || precision != 8 || (int)w != width || (int)h != height)
        return 0;
    /* 0 means supported */
    if (api.nvjpegDecodeBatchedSupported(c->handle, c->parsed, &unsupported) != NVJPEG_STATUS_SUCCESS)
        return 0;
    return unsupported == 0;
}

int gf_gpu_jpeg_decode(gf_gpu_jpeg *c, int count, const unsigned char *const *data,
                       const size_t *sizes, unsigned char *const *pixels, const int *widths)
{
    if (count < 1 || count > c->max_batch) {
        gf_set_error("nvJPEG: a batch of %d images (at most %d)", count, c->max_batch);
        return -1;
    }
    if (c->batch != count) {
        NVJPEG_CHECK(api.nvjpegDecodeBatchedInitialize(c->handle, c->state, count, 1,
                                                       NVJPEG_OUTPUT_RGBI),
                     "preparing a batch");
        c->batch = count;
    }
    for (int i = 0; i < count; i++) {
        memset(&c->outputs[i], 0, sizeof c->outputs[i]);
        c->outputs[i].channel[0] = pixels[i];
        c->outputs[i].pitch[0] = (size_t)widths[i] * 3;
    }
    nvjpegStatus_t s = api.nvjpegDecodeBatched(c->handle, c->state, data, sizes, c->outputs,
                                               c->stream);
    if (s != NVJPEG_STATUS_SUCCESS) {
        c->batch = 0;  /* initialized again before the next batch */
        gf_set_error("nvJPEG failed while decoding: %s (%d)", status_text(s), (int)s);
        return -1;
    }
    return 0;
}

/* NULL when no page-locked memory can be had: then the caller's buffer. */
static unsigned char *ensure_pinned(gf_gpu_jpeg *c, size_t bytes)
{
    if (bytes <= c->pinned_bytes)
        return c->pinned;
    cudaFreeHost(c->pinned);
    c->pinned = NULL;
    c->pinned_bytes = 0;
    if (cudaMallocHost((void **)&c->pinned, bytes + bytes / 4) != cudaSuccess) {
        (void)cudaGetLastError();
        c->pinned = NULL;
        return NULL;
    }
    c->pinned_bytes = bytes + bytes / 4;
    return c->pinned;
}

int gf_gpu_jpeg_encode(gf_gpu_jpeg *c, const unsigned char *pixels, int width, int height,
                       int quality, unsigned char **out, size_t *out_size)
{
    const nvjpegChromaSubsampling_t sampling = quality > 90 ? NVJPEG_CSS_444 : NVJPEG_CSS_420;
    NVJPEG_CHECK(api.nvjpegEncoderParamsSetQuality(c->params, quality, c->stream),
                 "setting the quality");
    NVJPEG_CHECK(api.nvjpegEncoderParamsSetSamplingFactors(c->params, sampling, c->stream),
                 "setting the chroma subsampling");
    nvjpegImage_t source = {0};
    source.channel[0] = (unsigned char *)pixels;
    source.pitch[0] = (size_t)width * 3;
    NVJPEG_CHECK(api.nvjpegEncodeImage(c->handle, c->encoder, c->params, &source,
                                       NVJPEG_INPUT_RGBI, width, height, c->stream),
                 "encoding");
    size_t length = 0;
    NVJPEG_CHECK(api.nvjpegEncodeRetrieveBitstream(c->handle, c->encoder, NULL, &length, c->stream),
                 "sizing the encoded stream");
    if (cudaStreamSynchronize(c->stream) != cudaSuccess) {
        gf_set_error("CUDA error while encoding: %s", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    /* the stream lands in page-locked memory (a full-speed copy), then in
     * the caller's own buffer */
    unsigned char *landing = ensure_pinned(c, length);
    unsigned char *bytes = malloc(length ? length : 1);
    if (!bytes) {
        gf_set_error("out of memory (%zu bytes for an encoded JPEG)", length);
        return -1;
    }
    nvjpegStatus_t s = api.nvjpegEncodeRetrieveBitstream(c->handle, c->encoder,
                                                         landing ? landing : bytes, &length,
                                                         c->stream);
    if (s == NVJPEG_STATUS_SUCCESS && cudaStreamSynchronize(c->stream) == cudaSuccess) {
        if (landing)
            memcpy(bytes, landing, length);
        *out = bytes;
        *out_size = length;
        return 0;
    }
    free(bytes);
    gf_set_error("nvJPEG failed while retrieving the encoded stream: %s", status_text(s));
    return -1;
}

#else /* no nvjpeg.h at build time */

int gf_nvjpeg_available(const char **why)
{
    if (why)
        *why = "not built in (no nvjpeg.h at build time)";
    return 0;
}

const char *gf_nvjpeg_describe(void)
{
    return "not built in";
}

gf_gpu_jpeg *gf_gpu_jpeg_new(void *cuda_stream, int max_batch)
{
    (void)cuda_stream;
    (void)max_batch;
    gf_set_error("no GPU JPEG codec: this build has no nvJPEG (no nvjpeg.h at build time)");
    return NULL;
}

void gf_gpu_jpeg_free(gf_gpu_jpeg *codec)
{
    (void)codec;
}

const char *gf_gpu_jpeg_backend(const gf_gpu_jpeg *codec)
{
    (void)codec;
    return "none";
}

int gf_gpu_jpeg_supported(gf_gpu_jpeg *codec, const unsigned char *data, size_t size, int width,
                          int height)
{
    (void)codec, (void)data, (void)size, (void)width, (void)height;
    return 0;
}

int gf_gpu_jpeg_decode(gf_gpu_jpeg *codec, int count, const unsigned char *const *data,
                       const size_t *sizes, unsigned char *const *pixels, const int *widths)
{
    (void)codec, (void)count, (void)data, (void)sizes, (void)pixels, (void)widths;
    gf_set_error("no GPU JPEG codec in this build");
    return -1;
}

int gf_gpu_jpeg_encode(gf_gpu_jpeg *codec, const unsigned char *pixels, int width, int height,
                       int quality, unsigned char **out, size_t *out_size)
{
    (void)codec, (void)pixels, (void)width, (void)height, (void)quality, (void)out, (void)out_size;
    gf_set_error("no GPU JPEG codec in this build");
    return -1;
}

#endif
