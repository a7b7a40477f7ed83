// sweep_random.cu - how the fills' geometry was chosen: lab's own fill kernel (src/kernels/random_fill.cuh)
// instantiated for a grid of FillTunings, timed on 2^28 elements against a device-to-device cudaMemcpy
// measured in the same process, each tuning's output compared byte for byte with the first's (the
// geometry must change the speed, never the numbers).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -Isrc/kernels bench/sweep_random.cu -o sweep_random && ./sweep_random
//
// Prints one row per (tuning, case): the median ms of event-timed repeats after warm-up, and the
// bandwidth (bytes read + written) as a fraction of the copy's. `make sweep-random` builds and runs it.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "random_fill.cuh"
#include "sweep_timing.cuh"

using namespace lab;

constexpr int64_t kElements = int64_t(1) << 28;

struct Case {
    const char *name;
    lab_dtype dtype;
    lab_random_distribution distribution;
    double a, b;
    bool residual;
};

template <typename Tuning, typename T>
cudaError_t launch_case(const Case &c, const lab_random_launch &p, int sms) {
    switch (c.distribution) {
    case LAB_RANDOM_UNIFORM: return launch_distribution<T, LAB_RANDOM_UNIFORM, Tuning>(p, sms, 0);
    case LAB_RANDOM_NORMAL: return launch_distribution<T, LAB_RANDOM_NORMAL, Tuning>(p, sms, 0);
    case LAB_RANDOM_BERNOULLI: return launch_distribution<T, LAB_RANDOM_BERNOULLI, Tuning>(p, sms, 0);
    default: return launch_distribution<T, LAB_RANDOM_DROPOUT, Tuning>(p, sms, 0);
    }
}

template <typename Tuning> cudaError_t launch_any(const Case &c, const lab_random_launch &p, int sms) {
    switch (c.dtype) {
    case LAB_FLOAT32: return launch_case<Tuning, float>(c, p, sms);
    case LAB_BFLOAT16: return launch_case<Tuning, __nv_bfloat16>(c, p, sms);
    default: return launch_case<Tuning, double>(c, p, sms);
    }
}

size_t element_bytes(lab_dtype dtype) { return dtype == LAB_FLOAT32 ? 4 : dtype == LAB_BFLOAT16 ? 2 : 8; }

struct Sweep {
    char *out, *x, *residual;
    std::vector<char> first_output;
    double copy_tbs = 0;
    int sms = 0;

    template <typename Tuning> void time(const char *tuning, const Case &c, bool first) {
        const size_t bytes = kElements * element_bytes(c.dtype);
        lab_random_launch p{};
        p.out = out;
        p.x = c.distribution == LAB_RANDOM_DROPOUT ? x : nullptr;
        p.residual = c.residual ? residual : nullptr;
        p.dtype = c.dtype;
        p.numel = kElements;
        p.distribution = c.distribution;
        p.a = c.a;
        p.b = c.b;
        p.seed = 1234;
        p.offset = 99;
        CHECK(cudaMemset(out, 0xFF, bytes));
        CHECK(launch_any<Tuning>(c, p, sms));
        CHECK(cudaDeviceSynchronize());
        std::vector<char> output(bytes);
        CHECK(cudaMemcpy(output.data(), out, bytes, cudaMemcpyDeviceToHost));
        const char *same = "first";
        if (first) {
            first_output.swap(output);
        } else {
            same = std::memcmp(first_output.data(), output.data(), bytes) == 0 ? "same" : "DIFFERENT";
        }
        const float ms = median_ms([&] { CHECK(launch_any<Tuning>(c, p, sms)); }, 3, 15);
        const int arrays = c.distribution == LAB_RANDOM_DROPOUT ? (c.residual ? 3 : 2) : 1;
        const double tbs = double(bytes) * arrays / (ms * 1e-3) / 1e12;
        std::printf("%-10s %-22s %8.3f ms %6.2f TB/s %5.2f of copy  %s\n", tuning, c.name, ms, tbs,
                    tbs / copy_tbs, same);
    }
};

int main() {
    Sweep sweep;
    int device = 0;
    CHECK(cudaGetDevice(&device));
    CHECK(cudaDeviceGetAttribute(&sweep.sms, cudaDevAttrMultiProcessorCount, device));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, device));
    const size_t most = kElements * 8;
    CHECK(cudaMalloc(&sweep.out, most));
    CHECK(cudaMalloc(&sweep.x, most));
    CHECK(cudaMalloc(&sweep.residual, most));
    CHECK(cudaMemset(sweep.x, 0x3C, most));
    CHECK(cudaMemset(sweep.residual, 0x3C, most));
    const size_t copy_bytes = kElements * 4;
    const float copy_ms = median_ms(
        [&] { CHECK(cudaMemcpyAsync(sweep.out, sweep.x, copy_bytes, cudaMemcpyDeviceToDevice)); }, 3, 15);
    sweep.copy_tbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e12;
    std::printf("%s, %d SMs: copy of 2^28 float32 %.3f ms, %.2f TB/s (read + written)\n", prop.name, sweep.sms,
                copy_ms, sweep.copy_tbs);
    const Case cases[] = {
        {"uniform float32", LAB_FLOAT32, LAB_RANDOM_UNIFORM, 0.0, 1.0, false},
        {"normal float32", LAB_FLOAT32, LAB_RANDOM_NORMAL, 0.0, 1.0, false},
        {"uniform bfloat16", LAB_BFLOAT16, LAB_RANDOM_UNIFORM, 0.0, 1.0, false},
        {"normal bfloat16", LAB_BFLOAT16, LAB_RANDOM_NORMAL, 0.0, 1.0, false},
        {"dropout float32", LAB_FLOAT32, LAB_RANDOM_DROPOUT, 0.1, 1.0 / 0.9, false},
        {"dropout_add bfloat16", LAB_BFLOAT16, LAB_RANDOM_DROPOUT, 0.1, 1.0 / 0.9, true},
        {"uniform float64", LAB_FLOAT64, LAB_RANDOM_UNIFORM, 0.0, 1.0, false},
    };
    for (const Case &c : cases) {
        sweep.time<FillTuning<1, 0>>("1 x all", c, true);
        sweep.time<FillTuning<2, 0>>("2 x all", c, false);
        sweep.time<FillTuning<1, 8>>("1 x 8/SM", c, false);
        sweep.time<FillTuning<2, 8>>("2 x 8/SM", c, false);
        sweep.time<FillTuning<4, 8>>("4 x 8/SM", c, false);
        sweep.time<FillTuning<2, 4>>("2 x 4/SM", c, false);
        sweep.time<FillTuning<4, 4>>("4 x 4/SM", c, false);
    }
    return 0;
}
