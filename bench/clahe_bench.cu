/* clahe_bench.cu - the GPU CLAHE chain (kernels/clahe_gpu.cu) against the
 * device copy of the same image, side by side in one run.
 *
 *   build/clahe-bench [WIDTH HEIGHT]      (default 8192 8192)
 *
 * Cases: gray and RGBA (the luma) at 8 bits, gray at 16 bits (and again
 * with the histograms counted in global memory, gray16-g), OpenCV's
 * defaults (clip 40, 8x8 tiles). Each row: the device-to-device copy of the
 * image, the chain (histograms, tables, interpolation; scratch allocated
 * beforehand), both the median ms of 20 runs, and chain ms / copy ms; then
 * each stage on its own, median ms of 20: hist (with its memset), luts
 * (tables and cells, on fresh histograms), interp (on the image as the
 * previous run left it). Every case's output
 * is compared with src/clahe.c's gf_clahe_image on the host over the whole
 * image: equality expected.
 * OpenCV's CPU CLAHE on the same sizes: bench/clahe_opencv.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "clahe_gpu.h"

extern "C" {
#include "../src/clahe.h"
}

#define BENCH_NAME "clahe-bench"
#include "bench_timing.cuh"

/* A gradient with noise and a darker band: tiles that differ. */
static void make_image(std::vector<unsigned char> &bytes, int W, int H, int C, int depth)
{
    const int max = depth == 16 ? 65535 : 255;
    uint32_t state = 12345;
    for (size_t i = 0, n = (size_t)W * H * C; i < n; i++) {
        const size_t pixel = i / C;
        const int x = (int)(pixel % W), y = (int)(pixel / W);
        state = state * 1664525u + 1013904223u;
        long v = (long)max * (x + y) / (W + H) + (long)(state >> 24) * max / 2048 - max / 16;
        if (y < H / 4)
            v /= 3;
        v = v < 0 ? 0 : v > max ? max : v;
        if (depth == 16)
            ((uint16_t *)bytes.data())[i] = (uint16_t)v;
        else
            bytes[i] = (unsigned char)v;
    }
}

static void run_case(const char *name, int W, int H, int C, int depth, int hist_global)
{
    const gf_clahe how = {40.0, 8, 8, 0};
    const size_t bytes = (size_t)W * H * C * (depth == 16 ? 2 : 1);
    std::vector<unsigned char> host(bytes), got(bytes);
    make_image(host, W, H, C, depth);
    void *src, *work, *copy;
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaMalloc(&work, bytes));
    CHECK(cudaMalloc(&copy, bytes));
    CHECK(cudaMemcpy(src, host.data(), bytes, cudaMemcpyHostToDevice));

    gf_clahe_grid g;
    gf_clahe_grid_of(&how, W, H, depth == 16 ? 65536 : 256, &g);
    clahe_params p = {};
    p.pixels = work;
    p.width = W; p.height = H; p.channels = C; p.depth = depth;
    p.channel = C >= 3 ? -1 : 0;
    p.tiles_x = how.tiles_x; p.tiles_y = how.tiles_y;
    p.tile_w = g.tile_w; p.tile_h = g.tile_h; p.clip_limit = g.clip_limit;
    p.lut_scale = g.lut_scale; p.inv_tw = g.inv_tw; p.inv_th = g.inv_th;
    p.hist_global = hist_global;
    size_t hist_b, cell_b;
    clahe_scratch_bytes(&p, &hist_b, &cell_b);
    CHECK(cudaMalloc((void **)&p.hist, hist_b));
    CHECK(cudaMalloc(&p.cells, cell_b));

    const double copy_ms = median_ms(20, [&] { CHECK(cudaMemcpyAsync(copy, src, bytes, cudaMemcpyDeviceToDevice, 0)); });
    CHECK(cudaMemcpy(work, src, bytes, cudaMemcpyDeviceToDevice));
    const double chain_ms = median_ms(20, [&] { CHECK(clahe_run(&p, 0)); });
    CHECK(cudaMemcpy(work, src, bytes, cudaMemcpyDeviceToDevice));
    const double hist_ms = median_ms(20, [&] { CHECK(clahe_histograms(&p, 0)); });
    /* the tables consume the histograms at 16 bits: fresh ones each time */
    const double lut_ms = median_ms(20, [&] { CHECK(clahe_tile_luts(&p, 0)); }, [&] { CHECK(clahe_histograms(&p, 0)); });
    const double interp_ms = median_ms(20, [&] { CHECK(clahe_interpolate(&p, 0)); });

    /* one run on the original image, against the host's */
    CHECK(cudaMemcpy(work, src, bytes, cudaMemcpyDeviceToDevice));
    CHECK(clahe_run(&p, 0));
    CHECK(cudaMemcpy(got.data(), work, bytes, cudaMemcpyDeviceToHost));
    gf_image img = {};
    img.width = W; img.height = H; img.channels = C; img.depth = depth;
    img.pixels = host.data();
    const char *check = "host error";
    size_t differ = 0;
    if (gf_clahe_image(&img, &how) == 0) {
        for (size_t i = 0; i < bytes; i++)
            differ += got[i] != host[i];
        check = differ == 0 ? "= host" : "DIFFERS";
    }
    printf("%-10s %10.3f %10.3f %7.2fx %8.3f %8.3f %8.3f  %s", name, copy_ms, chain_ms, chain_ms / copy_ms,
           hist_ms, lut_ms, interp_ms, check);
    if (differ)
        printf(" (%zu bytes)", differ);
    printf("\n");
    cudaFree(p.hist);
    cudaFree(p.cells);
    cudaFree(src);
    cudaFree(work);
    cudaFree(copy);
}

int main(int argc, char **argv)
{
    const int W = argc > 2 ? atoi(argv[1]) : 8192, H = argc > 2 ? atoi(argv[2]) : 8192;
    if (W <= 0 || H <= 0) {
        fprintf(stderr, "usage: clahe-bench [WIDTH HEIGHT]\n");
        return 2;
    }
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("# clahe-bench %dx%d on %s; clip 40, 8x8 tiles; ms = median of 20; ratio = CLAHE / copy\n",
           W, H, prop.name);
    printf("%-10s %10s %10s %8s %8s %8s %8s  %s\n", "case", "copy ms", "CLAHE ms", "ratio", "hist", "luts",
           "interp", "check");
    run_case("gray8", W, H, 1, 8, 0);
    run_case("rgba8", W, H, 4, 8, 0);
    run_case("gray16", W, H, 1, 16, 0);
    run_case("gray16-g", W, H, 1, 16, 1);
    return 0;
}
