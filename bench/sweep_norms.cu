// sweep_norms.cu - a prototype for issue 15's norms, not yet in the library: rms_norm forward over
// bfloat16 rows of 4096 (bench_rowwise.py's headline case, 16384 rows) in register-light layouts,
// against which the library's register-held rows (64 registers a lane, half occupancy, issue-bound
// per `make profile-rowwise`) can be judged.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -Xptxas -v bench/sweep_norms.cu -o sweep_norms && ./sweep_norms
//
// Variants, each a block per row (grid = rows):
//   staged<T>:   the row copied to shared memory with cp.async (no registers held while loads are in
//                flight), the sum of squares read from shared memory, then normalized from it;
//   two_pass<T>: the sum of squares from global memory, then the row read again (from L1/L2) to
//                normalize, as torch's kernel does.
// Each is checked against a float64 CPU reference on sampled rows, then timed (median of event-timed
// repeats); TB/s counts the row read once and written once, plus the weight. Then layer_norm forward
// (weight and bias) staged the same way, with an exact two-pass variance from shared memory.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

constexpr int kRows = 16384, kCols = 4096, kVec = 8; // 8 bfloat16 = one 16-byte vector
constexpr float kEps = 1e-6f;

struct alignas(16) Vec8 {
    __nv_bfloat162 h[4];
};

__device__ __forceinline__ float block_sum(float v, float *scratch) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v; // every warp holds the total
}

__device__ __forceinline__ float squares(const Vec8 &v) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(v.h[k]);
        s += f.x * f.x + f.y * f.y;
    }
    return s;
}

__device__ __forceinline__ Vec8 normalized(const Vec8 &v, const Vec8 &w, float rstd) {
    Vec8 out;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(v.h[k]), g = __bfloat1622float2(w.h[k]);
        out.h[k] = __floats2bfloat162_rn(f.x * rstd * g.x, f.y * rstd * g.y);
    }
    return out;
}

__device__ __forceinline__ void copy_async_16(void *shared, const void *global) {
    const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global));
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads) staged(const Vec8 *x, const Vec8 *w, Vec8 *y, int vectors) {
    extern __shared__ Vec8 row[];
    __shared__ float scratch[32];
    const int64_t base = int64_t(blockIdx.x) * vectors;
    for (int v = threadIdx.x; v < vectors; v += kThreads) copy_async_16(&row[v], &x[base + v]);
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::);
    __syncthreads();
    float s = 0.f;
    for (int v = threadIdx.x; v < vectors; v += kThreads) s += squares(row[v]);
    const float rstd = rsqrtf(block_sum(s, scratch) / float(vectors * kVec) + kEps);
    for (int v = threadIdx.x; v < vectors; v += kThreads) y[base + v] = normalized(row[v], w[v], rstd);
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads) two_pass(const Vec8 *x, const Vec8 *w, Vec8 *y, int vectors) {
    __shared__ float scratch[32];
    const int64_t base = int64_t(blockIdx.x) * vectors;
    float s = 0.f;
    for (int v = threadIdx.x; v < vectors; v += kThreads) s += squares(x[base + v]);
    const float rstd = rsqrtf(block_sum(s, scratch) / float(vectors * kVec) + kEps);
    for (int v = threadIdx.x; v < vectors; v += kThreads) y[base + v] = normalized(x[base + v], w[v], rstd);
}

__device__ __forceinline__ float sum_of(const Vec8 &v) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(v.h[k]);
        s += f.x + f.y;
    }
    return s;
}

__device__ __forceinline__ float squares_about(const Vec8 &v, float mean) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(v.h[k]);
        s += (f.x - mean) * (f.x - mean) + (f.y - mean) * (f.y - mean);
    }
    return s;
}

__device__ __forceinline__ Vec8 layer_normalized(const Vec8 &v, const Vec8 &w, const Vec8 &b, float mean,
                                                 float rstd) {
    Vec8 out;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(v.h[k]), g = __bfloat1622float2(w.h[k]), c = __bfloat1622float2(b.h[k]);
        out.h[k] = __floats2bfloat162_rn((f.x - mean) * rstd * g.x + c.x, (f.y - mean) * rstd * g.y + c.y);
    }
    return out;
}

// layer_norm from a row staged in shared memory: the mean, then the variance about it (an exact
// two-pass variance, cheap when both passes read shared memory), then the normalized row.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    staged_layer_norm(const Vec8 *x, const Vec8 *w, const Vec8 *b, Vec8 *y, int vectors) {
    extern __shared__ Vec8 row[];
    __shared__ float scratch[2][32];
    const int64_t base = int64_t(blockIdx.x) * vectors;
    for (int v = threadIdx.x; v < vectors; v += kThreads) copy_async_16(&row[v], &x[base + v]);
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::);
    __syncthreads();
    const float n = float(vectors * kVec);
    float s = 0.f;
    for (int v = threadIdx.x; v < vectors; v += kThreads) s += sum_of(row[v]);
    const float mean = block_sum(s, scratch[0]) / n;
    float q = 0.f;
    for (int v = threadIdx.x; v < vectors; v += kThreads) q += squares_about(row[v], mean);
    const float rstd = rsqrtf(block_sum(q, scratch[1]) / n + kEps);
    for (int v = threadIdx.x; v < vectors; v += kThreads) y[base + v] = layer_normalized(row[v], w[v], b[v], mean, rstd);
}

template <typename Fn> float median_ms(Fn &&fn) {
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    for (int i = 0; i < 3; ++i) fn();
    std::vector<float> times;
    for (int i = 0; i < 20; ++i) {
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

static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

int main() {
    const size_t n = size_t(kRows) * kCols;
    std::vector<__nv_bfloat16> hx(n), hw(kCols), hy(n);
    uint32_t state = 12345;
    auto next = [&] { return (state = state * 1664525u + 1013904223u) / 4294967296.0f * 4.f - 2.f; };
    for (auto &v : hx) v = __float2bfloat16(next());
    for (auto &v : hw) v = __float2bfloat16(next());
    Vec8 *x, *w, *y;
    CHECK(cudaMalloc(&x, n * 2));
    CHECK(cudaMalloc(&w, kCols * 2));
    CHECK(cudaMalloc(&y, n * 2));
    CHECK(cudaMemcpy(x, hx.data(), n * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(w, hw.data(), kCols * 2, cudaMemcpyHostToDevice));
    const int vectors = kCols / kVec;
    const double bytes = 2.0 * n * 2 + kCols * 2;

    auto check = [&](const char *name) {
        CHECK(cudaMemcpy(hy.data(), y, n * 2, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (int r = 0; r < kRows; r += 997) {
            double s = 0;
            for (int c = 0; c < kCols; ++c) s += double(to_float(hx[size_t(r) * kCols + c])) * to_float(hx[size_t(r) * kCols + c]);
            const double rstd = 1.0 / std::sqrt(s / kCols + kEps);
            for (int c = 0; c < kCols; ++c) {
                const double want = to_float(hx[size_t(r) * kCols + c]) * rstd * to_float(hw[c]);
                const double got = to_float(hy[size_t(r) * kCols + c]);
                worst = std::max(worst, std::fabs(got - want) / (std::fabs(want) + 1e-2));
            }
        }
        if (worst > 2e-2) {
            std::fprintf(stderr, "%s: wrong result (relative error %.3g)\n", name, worst);
            std::exit(1);
        }
    };
    auto report = [&](const char *name, float ms) {
        check(name);
        std::printf("%-18s %8.4f ms  %5.2f TB/s\n", name, ms, bytes / ms / 1e9);
    };
    std::printf("rms_norm forward, bfloat16 %d x %d\n", kRows, kCols);
    const size_t row_bytes = size_t(vectors) * sizeof(Vec8);
#define STAGED(T)                                                                                           \
    report("staged<" #T ">", median_ms([&] { staged<T><<<kRows, T, row_bytes>>>(x, w, y, vectors); }))
#define TWO_PASS(T)                                                                                         \
    report("two_pass<" #T ">", median_ms([&] { two_pass<T><<<kRows, T>>>(x, w, y, vectors); }))
    STAGED(128);
    STAGED(256);
    STAGED(512);
    TWO_PASS(128);
    TWO_PASS(256);
    TWO_PASS(512);
    CHECK(cudaGetLastError());

    // layer_norm forward with weight and bias: the same rows
    std::vector<__nv_bfloat16> hb(kCols);
    for (auto &v : hb) v = __float2bfloat16(next());
    Vec8 *bias;
    CHECK(cudaMalloc(&bias, kCols * 2));
    CHECK(cudaMemcpy(bias, hb.data(), kCols * 2, cudaMemcpyHostToDevice));
    auto check_layer_norm = [&](const char *name) {
        CHECK(cudaMemcpy(hy.data(), y, n * 2, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (int r = 0; r < kRows; r += 997) {
            double s = 0, q = 0;
            for (int c = 0; c < kCols; ++c) s += to_float(hx[size_t(r) * kCols + c]);
            const double mean = s / kCols;
            for (int c = 0; c < kCols; ++c) {
                const double d = to_float(hx[size_t(r) * kCols + c]) - mean;
                q += d * d;
            }
            const double rstd = 1.0 / std::sqrt(q / kCols + kEps);
            for (int c = 0; c < kCols; ++c) {
                const double want = (to_float(hx[size_t(r) * kCols + c]) - mean) * rstd * to_float(hw[c]) + to_float(hb[c]);
                worst = std::max(worst, std::fabs(to_float(hy[size_t(r) * kCols + c]) - want) / (std::fabs(want) + 1e-2));
            }
        }
        if (worst > 2e-2) {
            std::fprintf(stderr, "%s: wrong result (relative error %.3g)\n", name, worst);
            std::exit(1);
        }
    };
    std::printf("layer_norm forward, bfloat16 %d x %d (weight and bias)\n", kRows, kCols);
#define STAGED_LN(T)                                                                                        \
    do {                                                                                                    \
        const float ms = median_ms([&] { staged_layer_norm<T><<<kRows, T, row_bytes>>>(x, w, bias, y, vectors); }); \
        check_layer_norm("staged_layer_norm<" #T ">");                                                     \
        std::printf("%-22s %8.4f ms  %5.2f TB/s\n", "staged_layer_norm<" #T ">", ms, (bytes + kCols * 2) / ms / 1e9); \
    } while (0)
    STAGED_LN(128);
    STAGED_LN(256);
    STAGED_LN(512);
    CHECK(cudaGetLastError());
    return 0;
}
