/* depth16_bench.cu - the 16-bit kernels (kernels/depth16.cu) against the
 * device copy of the same image, side by side in one run.
 *
 *   build/depth16-bench [WIDTH HEIGHT]      (default 8192 8192)
 *
 * For 1..4 channels: a device-to-device copy of the 16-bit image, then 3x3
 * masks (box: integer sums; gaussian 1-2-1/16: integer; sobel pair:
 * integer, magnitude; a 3x3 of real weights: double sums), a separable
 * gaussian of sigma 10 (61 taps, double), the 65536-bin histogram and a
 * table's application. Each row: the median ms of 20 runs and the % of the
 * copy's time (copy ms / ms); every output is checked against a double
 * computation on the host at 4096 random pixels (nearest border). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "depth16.h"

extern "C" {
#include "../src/border.h"
#include "../src/mask.h"
}

#define BENCH_NAME "depth16-bench"
#include "bench_timing.cuh"

struct Mask {
    const char *name;
    int w, h, count, combine;
    std::vector<double> weights;  /* count matrices */
    double scale[2];
};

static unsigned expect(const std::vector<uint16_t> &img, int W, int H, int C, const Mask &m, int x,
                       int y, int c)
{
    double v = 0;
    for (int k = 0; k < m.count; k++) {
        double s = 0;
        for (int j = 0; j < m.h; j++)
            for (int i = 0; i < m.w; i++) {
                int sx = gf_border_index(x + i - m.w / 2, W, GF_BORDER_NEAREST);
                int sy = gf_border_index(y + j - m.h / 2, H, GF_BORDER_NEAREST);
                s += img[((size_t)sy * W + sx) * C + c] * m.weights[k * m.w * m.h + j * m.w + i];
            }
        double r = s / m.scale[k];
        v += m.combine == GF_COMBINE_MAGNITUDE ? r * r : r;
    }
    if (m.combine == GF_COMBINE_MAGNITUDE)
        v = sqrt(v);
    v = nearbyint(v);
    return (unsigned)(v > 0 ? (v < 65535 ? v : 65535) : 0);
}

static int check(const std::vector<uint16_t> &img, const uint16_t *d_out, int W, int H, int C,
                 const Mask &m)
{
    std::vector<uint16_t> out(img.size());
    CHECK(cudaMemcpy(out.data(), d_out, out.size() * 2, cudaMemcpyDeviceToHost));
    int bad = 0;
    srand(7);
    for (int i = 0; i < 4096; i++) {
        int x = i < 4 ? (i & 1) * (W - 1) : rand() % W, y = i < 4 ? (i >> 1) * (H - 1) : rand() % H;
        for (int c = 0; c < C; c++)
            bad += out[((size_t)y * W + x) * C + c] != expect(img, W, H, C, m, x, y, c);
    }
    return bad;
}

int main(int argc, char **argv)
{
    const int W = argc > 2 ? atoi(argv[1]) : 8192, H = argc > 2 ? atoi(argv[2]) : 8192;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("# depth16-bench %dx%d on %s; ms = median of 20; %% = copy ms / ms\n", W, H, prop.name);
    printf("%-3s %-28s %9s %8s %s\n", "C", "operation", "ms", "% copy", "check");

    std::vector<double> g(61), gauss;
    double gs = 0;
    for (int i = 0; i < 61; i++)
        gs += g[i] = exp(-0.5 * (i - 30) * (i - 30) / 100.0);
    for (double &v : g)
        v /= gs;
    const Mask masks[] = {
        {"box3 (int)", 3, 3, 1, GF_COMBINE_NONE, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {9, 1}},
        {"gaussian3 (int)", 3, 3, 1, GF_COMBINE_NONE, {1, 2, 1, 2, 4, 2, 1, 2, 1}, {16, 1}},
        {"3x3 int, sum |w| 129", 3, 3, 1, GF_COMBINE_NONE, {1, 2, 1, 2, 117, 2, 1, 2, 1}, {129, 1}},
        {"sobel (int, magnitude)", 3, 3, 2, GF_COMBINE_MAGNITUDE,
         {-1, 0, 1, -2, 0, 2, -1, 0, 1, -1, -2, -1, 0, 0, 0, 1, 2, 1}, {1, 1}},
        {"3x3 real weights (double)", 3, 3, 1, GF_COMBINE_NONE,
         {0.05, 0.1, 0.05, 0.1, 0.4, 0.1, 0.05, 0.1, 0.05}, {1, 1}},
    };
    for (int C = 1; C <= 4; C++) {
        const size_t n = (size_t)W * H * C;
        std::vector<uint16_t> img(n);
        uint64_t r = 0x9E3779B97F4A7C15ull;
        for (size_t i = 0; i < n; i++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            img[i] = (uint16_t)(r >> 40);
        }
        uint16_t *d_src, *d_dst;
        CHECK(cudaMalloc(&d_src, n * 2));
        CHECK(cudaMalloc(&d_dst, n * 2));
        CHECK(cudaMemcpy(d_src, img.data(), n * 2, cudaMemcpyHostToDevice));
        const double copy = median_ms(20, [&] { CHECK(cudaMemcpyAsync(d_dst, d_src, n * 2, cudaMemcpyDeviceToDevice)); });
        printf("%-3d %-28s %9.3f %7.1f%% (%.0f GB/s)\n", C, "device copy", copy, 100.0,
               2.0 * n * 2 / (copy * 1e6));
        for (const Mask &m : masks) {
            depth16_conv p = {};
            p.src = d_src; p.dst = d_dst; p.width = W; p.height = H; p.channels = C;
            p.channels_filtered = C; p.border = GF_BORDER_NEAREST; p.mask_width = m.w;
            p.mask_height = m.h; p.mask_count = m.count; p.combine = m.combine;
            for (int k = 0; k < m.count; k++) { p.scale[k] = m.scale[k]; p.offset[k] = 0; }
            bool integer = true;
            for (double w : m.weights)
                integer = integer && w == floor(w);
            void *d_w;
            std::vector<int> iw(m.weights.begin(), m.weights.end());
            CHECK(cudaMalloc(&d_w, m.weights.size() * 8));
            if (integer) {
                CHECK(cudaMemcpy(d_w, iw.data(), iw.size() * 4, cudaMemcpyHostToDevice));
                p.int_weights = (const int *)d_w;
                if (m.count == 1)
                {
                    double total = 0;
                    for (double w : m.weights)
                        total += fabs(w);
                    depth16_set_integer_scale(&p, (int)m.scale[0], 0, 65535.0 * total);
                }
            } else {
                CHECK(cudaMemcpy(d_w, m.weights.data(), m.weights.size() * 8, cudaMemcpyHostToDevice));
                p.weights = (const double *)d_w;
            }
            const double ms = median_ms(20, [&] { CHECK(depth16_conv_direct(&p, 0)); });
            const int bad = check(img, d_dst, W, H, C, m);
            printf("%-3d %-28s %9.3f %7.1f%% %s\n", C, m.name, ms, 100.0 * copy / ms,
                   bad ? "MISMATCH" : "ok");
            CHECK(cudaFree(d_w));
        }
        {   /* separable gaussian sigma 10 */
            Mask m = {"gaussian sigma 10 (61x61)", 61, 61, 1, GF_COMBINE_NONE, {}, {1, 1}};
            for (int j = 0; j < 61; j++)
                for (int i = 0; i < 61; i++)
                    m.weights.push_back(g[j] * g[i]);
            depth16_conv p = {};
            p.src = d_src; p.dst = d_dst; p.width = W; p.height = H; p.channels = C;
            p.channels_filtered = C; p.border = GF_BORDER_NEAREST; p.mask_width = 61;
            p.mask_height = 61; p.mask_count = 1; p.combine = GF_COMBINE_NONE;
            p.scale[0] = 1;
            double *d_f;
            std::vector<double> both(g);
            both.insert(both.end(), g.begin(), g.end());
            CHECK(cudaMalloc(&d_f, both.size() * 8));
            CHECK(cudaMemcpy(d_f, both.data(), both.size() * 8, cudaMemcpyHostToDevice));
            p.row = d_f; p.column = d_f + 61;
            CHECK(cudaMalloc(&p.scratch, depth16_scratch_bytes(&p)));
            const double ms = median_ms(20, [&] { CHECK(depth16_conv_separable(&p, 0)); });
            const int bad = check(img, d_dst, W, H, C, m);
            printf("%-3d %-28s %9.3f %7.1f%% %s\n", C, m.name, ms, 100.0 * copy / ms,
                   bad ? "MISMATCH" : "ok");
            CHECK(cudaFree(p.scratch));
            CHECK(cudaFree(d_f));
        }
        unsigned *d_counts;
        uint16_t *d_lut;
        CHECK(cudaMalloc(&d_counts, 4 * 65536 * 4));
        CHECK(cudaMalloc(&d_lut, 4 * 65536 * 2));
        CHECK(cudaMemset(d_lut, 0, 4 * 65536 * 2));
        const double hist = median_ms(20, [&] { CHECK(depth16_histogram(d_src, (size_t)W * H, C, 0, d_counts, 0)); });
        std::vector<unsigned> counts((size_t)C * 65536);
        CHECK(cudaMemcpy(counts.data(), d_counts, counts.size() * 4, cudaMemcpyDeviceToHost));
        std::vector<unsigned> want(counts.size());
        for (size_t i = 0; i < n; i++)
            want[(i % C) * 65536 + img[i]]++;
        printf("%-3d %-28s %9.3f %7.1f%% %s\n", C, "histogram (65536 bins)", hist,
               100.0 * copy / 2 / hist, counts == want ? "ok" : "MISMATCH");
        CHECK(cudaMemcpy(d_dst, d_src, n * 2, cudaMemcpyDeviceToDevice));
        const double lut = median_ms(20, [&] { CHECK(depth16_apply_lut(d_dst, (size_t)W * H, C, C, d_lut, DEPTH16_LUT_PER_CHANNEL, 0)); });
        printf("%-3d %-28s %9.3f %7.1f%%\n", C, "table per channel", lut, 100.0 * copy / lut);
        CHECK(cudaFree(d_counts));
        CHECK(cudaFree(d_lut));
        CHECK(cudaFree(d_src));
        CHECK(cudaFree(d_dst));
    }
    return 0;
}
