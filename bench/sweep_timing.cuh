// sweep_timing.cuh - what the standalone CUDA sweeps (sweep_vectorized.cu and the row sweeps) share:
// a CUDA-call check that exits with the call and its error, and the median of event-timed repeats
// after warm-up.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                                         \
    do {                                                                                                    \
        cudaError_t err_ = (call);                                                                          \
        if (err_ != cudaSuccess) {                                                                          \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_));   \
            std::exit(1);                                                                                   \
        }                                                                                                   \
    } while (0)

// fn() launched `warmup` times, then `repeats` times each between two events: the median in ms.
template <typename Fn> float median_ms(Fn &&fn, int warmup, int repeats) {
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    for (int i = 0; i < warmup; ++i) fn();
    std::vector<float> times;
    for (int i = 0; i < repeats; ++i) {
        CHECK(cudaEventRecord(start));
        fn();
        CHECK(cudaEventRecord(stop));
        CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        times.push_back(ms);
    }
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(stop));
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}
