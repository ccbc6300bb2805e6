/* diffuse_bench.cu - the --diffuse ladder (kernels/diffuse_gpu.cu) against
 * a device copy of the float plane, side by side in one run.
 *
 *   build/diffuse-bench [WIDTH HEIGHT ITERATIONS KIND]   (8192 8192 16 heat; KIND 0 heat,
 *                                                         1 pm-exp, 2 pm-rational)
 *
 * One gray float plane, border nearest. Rows: global, shared, temporal at
 * k = 1..8 (tile 64x32), stream at k = 1..8 for strips of 64 and 128
 * columns (chunks of 256 rows), then stream at k = 8 over chunk heights
 * (the last: the chunk that makes the warps one wave on this device):
 * the median ms an iteration of 10 runs, the ratio to global, and the ratio
 * to the memory bound (a device-to-device copy of the plane: one read and
 * one write, timed in the same run). Each output is checked against
 * global's (max |difference|, expected 0: the same float operations) and
 * against a float64 computation on the host at 64 sampled pixels
 * (max |difference|). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "diffuse_gpu.h"

extern "C" {
#include "../src/border.h"
}

#define BENCH_NAME "diffuse-bench"
#include "bench_timing.cuh"

static double flux(int kind, double d, double k)
{
    if (kind == 0)
        return d;
    const double r = d / k;
    return (kind == 1 ? exp(-r * r) : 1.0 / (1.0 + r * r)) * d;
}

/* The float64 value of pixel (x, y) after n iterations from u0: its
 * dependency cone (radius n) only, nearest border. */
static double host_value(const std::vector<float> &u0, int w, int h, int x, int y, int n, int kind,
                         double step, double k)
{
    const int r = n, side = 2 * r + 1;
    std::vector<double> a((size_t)side * side), b(a.size());
    for (int j = 0; j < side; j++)
        for (int i = 0; i < side; i++) {
            const int gx = gf_border_index(x - r + i, w, GF_BORDER_NEAREST);
            const int gy = gf_border_index(y - r + j, h, GF_BORDER_NEAREST);
            a[(size_t)j * side + i] = u0[(size_t)gy * w + gx];
        }
    auto at = [&](const std::vector<double> &t, int i, int j) {
        /* outside the image: the mapped pixel's value, inside the cone */
        const int gx = x - r + i, gy = y - r + j;
        const int mx = gf_border_index(gx, w, GF_BORDER_NEAREST) - (x - r);
        const int my = gf_border_index(gy, h, GF_BORDER_NEAREST) - (y - r);
        return t[(size_t)my * side + mx];
    };
    for (int s = 1; s <= n; s++) {
        for (int j = s; j < side - s; j++)
            for (int i = s; i < side - s; i++) {
                const int gx = x - r + i, gy = y - r + j;
                if (gx < 0 || gx >= w || gy < 0 || gy >= h)
                    continue;
                const double u = a[(size_t)j * side + i];
                const double t = ((flux(kind, at(a, i, j - 1) - u, k) + flux(kind, at(a, i, j + 1) - u, k)) +
                                  flux(kind, at(a, i - 1, j) - u, k)) + flux(kind, at(a, i + 1, j) - u, k);
                b[(size_t)j * side + i] = u + step * t;
            }
        std::swap(a, b);
    }
    return a[(size_t)r * side + r];
}

int main(int argc, char **argv)
{
    const int w = argc > 2 ? atoi(argv[1]) : 8192, h = argc > 2 ? atoi(argv[2]) : 8192;
    const int iterations = argc > 3 ? atoi(argv[3]) : 16, kind = argc > 4 ? atoi(argv[4]) : 0;
    const double step = 0.2, k = 12.0;
    const size_t n = (size_t)w * h, bytes = n * sizeof(float);
    std::vector<float> u0(n);
    srand(1);
    for (size_t i = 0; i < n; i++) {  /* two flat halves, a ramp and noise, as 8-bit samples */
        const int x = (int)(i % w), y = (int)(i / w);
        const double v = (x < w / 2 ? 64.0 : 192.0) + 32.0 * y / h + (rand() % 21 - 10);
        u0[i] = (float)floor(v);
    }
    float *planes[2], *first, *out;
    CHECK(cudaMalloc(&planes[0], bytes));
    CHECK(cudaMalloc(&planes[1], bytes));
    CHECK(cudaMalloc(&first, bytes));
    CHECK(cudaMemcpy(first, u0.data(), bytes, cudaMemcpyHostToDevice));
    const diffuse_params p = {w, h, 1, GF_BORDER_NEAREST, kind, (float)step, (float)(1.0 / k)};
    const double copy = median_ms(10, [&] { CHECK(cudaMemcpyAsync(planes[1], planes[0], bytes, cudaMemcpyDeviceToDevice)); });
    printf("%dx%d gray float, %d iterations, kind %d, border nearest; copy of the plane %.4f ms "
           "(%.0f GB/s)\n", w, h, iterations, kind, copy, 2.0 * bytes / copy / 1e6);
    printf("%-10s %2s %9s %10s %9s %9s %12s %12s\n", "version", "k", "tile", "ms/iter", "x global",
           "x bound", "max|-global|", "max|-f64|");
    std::vector<float> ref(n), got(n);
    std::vector<int> sx(64), sy(64);
    for (int i = 0; i < 64; i++) {
        sx[i] = i < 8 ? (i % 2 ? w - 1 - i : i) : rand() % w;  /* some at the edges */
        sy[i] = i < 8 ? (i % 4 < 2 ? i : h - 1 - i) : rand() % h;
    }
    std::vector<double> f64(64);
    for (int i = 0; i < 64; i++)
        f64[i] = host_value(u0, w, h, sx[i], sy[i], iterations, kind, step, k);
    struct row {
        int version, k, tile_w, tile_h;
    };
    std::vector<row> rows = {{DIFFUSE_GLOBAL, 1, 32, 8}, {DIFFUSE_SHARED, 1, 64, 32}};
    for (int steps = 1; steps <= DIFFUSE_MAX_STEPS; steps++)
        rows.push_back({DIFFUSE_TEMPORAL, steps, 64, 32});
    for (int strip = 64; strip <= 128; strip *= 2)
        for (int steps = 1; steps <= DIFFUSE_MAX_STEPS; steps++)
            rows.push_back({DIFFUSE_STREAM, steps, strip, 64});
    for (int strip = 64; strip <= 128; strip *= 2)
        for (int chunk : {32, 48, 64, 80, 96, 128, 512, 1024})
            rows.push_back({DIFFUSE_STREAM, DIFFUSE_MAX_STEPS, strip, chunk});
    static const char *const names[] = {"", "global", "shared", "temporal", "stream"};
    double global_ms = 0;
    for (const row &r : rows) {
        int result = 0;
        const double ms = median_ms(10, [&] {
            CHECK(cudaMemcpyAsync(planes[0], first, bytes, cudaMemcpyDeviceToDevice));
            CHECK(diffuse_run(&p, planes, iterations, r.version, r.k, r.tile_w, r.tile_h, &result, 0));
        }) - copy;  /* less the copy that restores the input */
        out = planes[result];
        CHECK(cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost));
        if (r.version == DIFFUSE_GLOBAL) {
            ref = got;
            global_ms = ms;
        }
        double dg = 0, df = 0;
        for (size_t i = 0; i < n; i++)
            dg = fmax(dg, fabs((double)got[i] - ref[i]));
        for (int i = 0; i < 64; i++)
            df = fmax(df, fabs((double)got[(size_t)sy[i] * w + sx[i]] - f64[i]));
        const double per = ms / iterations;
        char tile[32] = "";
        if (r.version != DIFFUSE_GLOBAL)
            snprintf(tile, sizeof tile, "%dx%d", r.tile_w, r.tile_h);
        printf("%-10s %2d %9s %10.4f %9.2f %9.2f %12.3g %12.3g\n", names[r.version], r.k, tile, per,
               global_ms / ms, copy / per, dg, df);
    }
    return 0;
}
