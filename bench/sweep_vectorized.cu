// sweep_vectorized.cu - how lab's vectorized kernel's tuning was chosen: the library's own kernel
// (src/kernels/elementwise_vectorized.cuh) instantiated for a grid of tunings, timed on 2^28
// elements against a device-to-device cudaMemcpy measured in the same process.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -Isrc/kernels bench/sweep_vectorized.cu -o sweep && ./sweep
//
// Prints one row per (tuning, op, dtype, size): median ms of event-timed repeats after warm-up (per
// launch, for the small sizes timed as 100 back-to-back launches), TB/s (bytes read + written), and
// the percentage of the 2^28-element copy's TB/s (small sizes run from L2 and can exceed it). `make sweep` builds and runs it;
// `./sweep glu` times only the gated linear units (16384 x 4096 bfloat16, ten launches back to back).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "elementwise_vectorized.cuh"
#include "sweep_timing.cuh"

using namespace lab;

constexpr int64_t kElements = int64_t(1) << 28;
constexpr int kWarmup = 3, kRepeats = 15;

template <typename Fn> float median_ms(Fn &&fn) { return median_ms(fn, kWarmup, kRepeats); }

struct Buffers {
    char *a, *b, *out;
};
double copy_tbs = 0;

template <typename T> const char *dtype_name() {
    if constexpr (std::is_same_v<T, float>) return "float32";
    else if constexpr (std::is_same_v<T, __half>) return "float16";
    else return "bfloat16";
}

// Time per launch of `batch` back-to-back launches on n elements (batch > 1: sizes that sit in L2,
// where one launch is too short to time alone).
template <typename Tuning, typename T, typename Op, int kInputs>
void time_one(const Buffers &buffers, const char *op, int64_t n = kElements, int batch = 1) {
    InputPtrs<T> in{{reinterpret_cast<const T *>(buffers.a), reinterpret_cast<const T *>(buffers.b), nullptr}};
    const OpParams<compute_t<T>> params{compute_t<T>(1), compute_t<T>(0)};
    const float ms = median_ms([&] {
        for (int i = 0; i < batch; ++i)
            CHECK((launch_vectorized<T, Op, kInputs, Tuning>(reinterpret_cast<T *>(buffers.out), in, n, params, 0)));
    }) / batch;
    const double tbs = double(n) * sizeof(T) * (kInputs + 1) / (ms * 1e-3) / 1e12;
    std::printf("%7d %7d %6d %9d  %-8s %-8s %9lld %8.4f %7.2f %6.0f%%\n", Tuning::kThreads, Tuning::kPackets,
                int(Tuning::kPairedConversions), int(Tuning::kStreamingStores), op, dtype_name<T>(), (long long)n, ms,
                tbs, 100 * tbs / copy_tbs);
}

template <typename Tuning> void sweep(const Buffers &buffers) {
    for (int64_t n : {int64_t(1) << 18, int64_t(1) << 20, int64_t(1) << 22}) time_one<Tuning, float, AddOp, 2>(buffers, "add", n, 100);
    time_one<Tuning, float, AddOp, 2>(buffers, "add");
    time_one<Tuning, __half, AddOp, 2>(buffers, "add");
    time_one<Tuning, __nv_bfloat16, AddOp, 2>(buffers, "add");
    time_one<Tuning, float, ReluOp, 1>(buffers, "relu");
    time_one<Tuning, __nv_bfloat16, ReluOp, 1>(buffers, "relu");
    time_one<Tuning, float, GeluOp, 1>(buffers, "gelu");
    time_one<Tuning, __half, GeluOp, 1>(buffers, "gelu");
    time_one<Tuning, __nv_bfloat16, GeluOp, 1>(buffers, "gelu");
    time_one<Tuning, float, SiluOp, 1>(buffers, "silu");
    time_one<Tuning, __nv_bfloat16, SiluOp, 1>(buffers, "silu");
}

// The gated linear units (two inputs, a transcendental activation) on a transformer MLP's 16384 x 4096
// bfloat16, ten launches back to back: `./sweep glu` runs only these rows.
template <typename Tuning> void sweep_glu(const Buffers &buffers) {
    time_one<Tuning, __nv_bfloat16, SwigluOp, 2>(buffers, "swiglu", int64_t(1) << 26, 10);
    time_one<Tuning, __nv_bfloat16, GegluOp, 2>(buffers, "geglu", int64_t(1) << 26, 10);
}

template <int kThreads, int kPackets> void sweep_conversions(const Buffers &buffers) {
    sweep<VectorizedTuning<kThreads, kPackets, false, false>>(buffers);
    sweep<VectorizedTuning<kThreads, kPackets, true, false>>(buffers);
}

int main(int argc, char **argv) {
    const size_t bytes = kElements * sizeof(float);
    Buffers buffers;
    CHECK(cudaMalloc(&buffers.a, bytes));
    CHECK(cudaMalloc(&buffers.b, bytes));
    CHECK(cudaMalloc(&buffers.out, bytes));
    CHECK(cudaMemset(buffers.a, 0x3c, bytes));  // small finite values in every dtype
    CHECK(cudaMemset(buffers.b, 0x3c, bytes));
    const float copy_ms = median_ms([&] { CHECK(cudaMemcpyAsync(buffers.out, buffers.a, bytes, cudaMemcpyDeviceToDevice)); });
    copy_tbs = 2.0 * bytes / (copy_ms * 1e-3) / 1e12;
    std::printf("2^28 elements; cudaMemcpy D2D of float32: %.3f ms, %.2f TB/s\n", copy_ms, copy_tbs);
    std::printf("%7s %7s %6s %9s  %-8s %-8s %9s %8s %7s %7s\n", "threads", "packets", "paired", "streaming", "op",
                "dtype", "elements", "ms", "TB/s", "% copy");
    if (argc > 1 && std::string(argv[1]) == "glu") {
        sweep_glu<VectorizedTuning<128, 2, false, false>>(buffers);
        sweep_glu<VectorizedTuning<128, 4, false, false>>(buffers);
        sweep_glu<VectorizedTuning<128, 8, false, false>>(buffers);
        sweep_glu<VectorizedTuning<256, 2, false, false>>(buffers);
        sweep_glu<VectorizedTuning<256, 4, false, false>>(buffers);
        return 0;
    }
    sweep_conversions<128, 2>(buffers);
    sweep_conversions<128, 4>(buffers);
    sweep_conversions<128, 8>(buffers);
    sweep_conversions<256, 2>(buffers);
    sweep_conversions<256, 4>(buffers);
    sweep<VectorizedTuning<128, 2, false, true>>(buffers);  // streaming stores
    CHECK(cudaDeviceSynchronize());
    return 0;
}
