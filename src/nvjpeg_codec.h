/* nvjpeg_codec.h - JPEG decoded and encoded on the GPU with nvJPEG.
 *
 * libnvjpeg is loaded at run time (dlopen), so a binary built where it is
 * present still runs where it is missing: then every JPEG takes the CPU
 * codecs. The decode uses the hardware JPEG engines (A100, H100, ...) where
 * the device has them, else nvJPEG's GPU-assisted backend; it takes
 * baseline and extended Huffman JPEGs of three components (YCbCr), which
 * is what cameras and the web write; everything else (progressive, gray,
 * CMYK, 12-bit, arithmetic coding, damaged streams) is left to
 * libjpeg-turbo by the caller. Pixels stay in device memory both ways. */
#ifndef GF_NVJPEG_CODEC_H
#define GF_NVJPEG_CODEC_H

#include <stddef.h>

/* 1 when libnvjpeg is loaded (tried once); 0 otherwise, with the reason
 * in *why. GPUFILTER_NVJPEG names the library file to load ("none": never). */
int gf_nvjpeg_available(const char **why);
/* "nvJPEG 13.0.4", or why it is not in use. */
const char *gf_nvjpeg_describe(void);

/* One thread's decoder and encoder, on the current device and a stream. */
typedef struct gf_gpu_jpeg gf_gpu_jpeg;

/* NULL with an error. max_batch: the most images one decode call takes. */
gf_gpu_jpeg *gf_gpu_jpeg_new(void *cuda_stream, int max_batch);
void gf_gpu_jpeg_free(gf_gpu_jpeg *codec);
/* "hardware" or "GPU" (nvJPEG's GPU-assisted Huffman backend). */
const char *gf_gpu_jpeg_backend(const gf_gpu_jpeg *codec);

/* 1 when the decoder takes this stream and its frame is width x height
 * with three components; 0 when it is for the CPU. */
int gf_gpu_jpeg_supported(gf_gpu_jpeg *codec, const unsigned char *data, size_t size, int width,
                          int height);
/* Decode count supported streams into interleaved RGB device buffers
 * (pitch width * 3) on the codec's stream. 0, or -1 when the batch failed
 * (a damaged stream): then decode its files on the CPU. */
int gf_gpu_jpeg_decode(gf_gpu_jpeg *codec, int count, const unsigned char *const *data,
                       const size_t *sizes, unsigned char *const *pixels, const int *widths);
/* Encode interleaved RGB device pixels (pitch width * 3) at quality, with
 * the CPU encoder's chroma rule (4:4:4 above quality 90, else 4:2:0), into
 * a malloc'd JPEG. 0, or -1 with an error. */
int gf_gpu_jpeg_encode(gf_gpu_jpeg *codec, const unsigned char *pixels, int width, int height,
                       int quality, unsigned char **out, size_t *out_size);

#endif
