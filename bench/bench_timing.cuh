/* bench_timing.cuh - what the kernel benches share. Define BENCH_NAME (the
 * program's name for messages) before including it.
 *   CHECK(call)   a failed CUDA call ends the bench with its text
 *   median_ms     the median of 'runs' timed launch() calls (CUDA events on
 *                 the default stream), after one warm-up, each after an
 *                 untimed prep() */
#ifndef GF_BENCH_TIMING_CUH
#define GF_BENCH_TIMING_CUH

#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            fprintf(stderr, "%s: %s: %s\n", BENCH_NAME, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

template <typename F, typename G>
static double median_ms(int runs, F launch, G prep)
{
    static cudaEvent_t start, stop;
    if (!start) {
        CHECK(cudaEventCreate(&start));
        CHECK(cudaEventCreate(&stop));
    }
    std::vector<float> ms;
    prep();
    launch();
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < runs; i++) {
        float t = 0;
        prep();
        CHECK(cudaEventRecord(start));
        launch();
        CHECK(cudaEventRecord(stop));
        CHECK(cudaEventSynchronize(stop));
        CHECK(cudaEventElapsedTime(&t, start, stop));
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return runs % 2 ? ms[runs / 2] : (ms[runs / 2 - 1] + ms[runs / 2]) / 2.0;
}

template <typename F>
static double median_ms(int runs, F launch)
{
    return median_ms(runs, launch, [] {});
}

#endif
