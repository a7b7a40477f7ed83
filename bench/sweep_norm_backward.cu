// sweep_norm_backward.cu - layouts for rms_norm's backward, the limiter of the norms' forward +
// backward goal. The library's layout before this study - one chunk, 512 lanes, 64 registers - ran
// at 214 us on bfloat16 16384 x 4096, 39% of DRAM, two rows an SM in flight. The library now uses
// held<128>'s layout (rowwise_norm_ops.cuh NormBackward: four chunks of 128 lanes, inputs held as packets).
// Standalone kernels, each checked against float64 and timed:
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -Xptxas -v bench/sweep_norm_backward.cu -o sweep_nb && ./sweep_nb
//
// dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w, xhat = x * rstd; dw = sum over rows of
// dy * xhat, deterministic: each block of a resident grid sums its rows' columns in registers (a
// thread owns the same columns on every row), writes one partial row, and column_sums adds the
// partial rows in order. Variants:
//   held<T>:      x and dy loaded into registers (all of a thread's 16-byte loads issued at once), the
//                 weight held in registers for the whole walk;
//   ahead<T>:     as held, with the next row's x and dy loaded into registers before this row's
//                 reduction, so a block's loads stay in flight across its barrier;
//   staged<T,S>:  x and dy copied into shared memory with cp.async, S rows in flight per block (the
//                 next rows' copies issued before this row is computed), the column sums in registers;
// plus the copy bound: a kernel reading two arrays and writing one of the same size.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sweep_rows.cuh"
#include "sweep_timing.cuh"

constexpr int kRows = 16384, kCols = 4096, kVec = 8, kVectors = kCols / kVec; // 8 bfloat16 a vector

__device__ __forceinline__ void unpack(const Vec8 &v, float (&f)[kVec]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float2 p = __bfloat1622float2(v.h[k]);
        f[2 * k] = p.x;
        f[2 * k + 1] = p.y;
    }
}

// One row given this thread's kPer vectors of x and dy (wherever they were loaded from): dx stored,
// the row's dy * xhat added into the thread's column sums.
template <int kPer>
__device__ __forceinline__ void backward_row(const Vec8 (&x)[kPer], const Vec8 (&dy)[kPer], const Vec8 (&w)[kPer],
                                             float rstd, Vec8 *dx_row, float (&dw)[kPer * kVec],
                                             float *scratch) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
        float xf[kVec], df[kVec], wf[kVec];
        unpack(x[k], xf);
        unpack(dy[k], df);
        unpack(w[k], wf);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
            const float xhat = xf[i] * rstd;
            s += df[i] * wf[i] * xhat;
            dw[k * kVec + i] += df[i] * xhat;
        }
    }
    const float mean_gx = block_sum(s, scratch) / float(kCols);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
        float xf[kVec], df[kVec], wf[kVec];
        unpack(x[k], xf);
        unpack(dy[k], df);
        unpack(w[k], wf);
        Vec8 out;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float a = rstd * (df[2 * i] * wf[2 * i] - xf[2 * i] * rstd * mean_gx);
            const float b = rstd * (df[2 * i + 1] * wf[2 * i + 1] - xf[2 * i + 1] * rstd * mean_gx);
            out.h[i] = __floats2bfloat162_rn(a, b);
        }
        dx_row[threadIdx.x + k * blockDim.x] = out;
    }
}

// This thread's kPer vectors of row `row` of x and of dy (kThreads threads a row); nothing past
// the last row.
template <int kPer, int kThreads>
__device__ __forceinline__ void load_row_pair(const Vec8 *x, const Vec8 *dy, int row, Vec8 (&xs)[kPer],
                                              Vec8 (&dys)[kPer]) {
    if (row >= kRows) return;
    const int64_t base = int64_t(row) * kVectors + threadIdx.x;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
        xs[k] = x[base + k * kThreads];
        dys[k] = dy[base + k * kThreads];
    }
}

template <int kPer>
__device__ __forceinline__ void write_partial(const float (&dw)[kPer * kVec], float *partials) {
    float *mine = partials + int64_t(blockIdx.x) * kCols;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) mine[(threadIdx.x + k * blockDim.x) * kVec + i] = dw[k * kVec + i];
    }
}

// held<kThreads, false> loads each row when it gets to it; held<kThreads, true> ("ahead") loads the
// next row's x and dy before reducing this one.
template <int kThreads, bool kAhead>
__global__ void __launch_bounds__(kThreads)
    held(const Vec8 *x, const Vec8 *dy, const Vec8 *w, const float *rstd, Vec8 *dx, float *partials) {
    constexpr int kPer = kVectors / kThreads;
    __shared__ float scratch[2][32];
    Vec8 weight[kPer];
    float dw[kPer * kVec] = {};
#pragma unroll
    for (int k = 0; k < kPer; ++k) weight[k] = w[threadIdx.x + k * kThreads];
    Vec8 xs[kPer], dys[kPer];
    if constexpr (kAhead) load_row_pair<kPer, kThreads>(x, dy, blockIdx.x, xs, dys);
    int parity = 0;
    for (int row = blockIdx.x; row < kRows; row += gridDim.x, parity ^= 1) {
        Vec8 next_x[kPer], next_dy[kPer];
        if constexpr (kAhead) {
            load_row_pair<kPer, kThreads>(x, dy, row + gridDim.x, next_x, next_dy);
        } else {
            load_row_pair<kPer, kThreads>(x, dy, row, xs, dys);
        }
        backward_row<kPer>(xs, dys, weight, rstd[row], dx + int64_t(row) * kVectors, dw, scratch[parity]);
        if constexpr (kAhead) {
#pragma unroll
            for (int k = 0; k < kPer; ++k) {
                xs[k] = next_x[k];
                dys[k] = next_dy[k];
            }
        }
    }
    write_partial<kPer>(dw, partials);
}

__device__ __forceinline__ void copy_async_16(void *shared, const void *global) {
    const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global));
}

template <int kThreads, int kStages>
__global__ void __launch_bounds__(kThreads)
    staged(const Vec8 *x, const Vec8 *dy, const Vec8 *w, const float *rstd, Vec8 *dx, float *partials) {
    constexpr int kPer = kVectors / kThreads;
    extern __shared__ Vec8 stages[]; // [kStages][x, dy][kVectors]
    __shared__ float scratch[2][32];
    Vec8 weight[kPer];
    float dw[kPer * kVec] = {};
#pragma unroll
    for (int k = 0; k < kPer; ++k) weight[k] = w[threadIdx.x + k * kThreads];
    // A thread copies and reads back only its own vectors: its wait_group makes them visible to it,
    // and a stage is refilled with no barrier.
    auto issue = [&](int row, int stage) {
        if (row < kRows) {
            const int64_t base = int64_t(row) * kVectors + threadIdx.x;
#pragma unroll
            for (int k = 0; k < kPer; ++k) {
                copy_async_16(&stages[(2 * stage) * kVectors + threadIdx.x + k * kThreads], &x[base + k * kThreads]);
                copy_async_16(&stages[(2 * stage + 1) * kVectors + threadIdx.x + k * kThreads],
                              &dy[base + k * kThreads]);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::); // an empty group keeps the count uniform
    };
    for (int s = 0; s < kStages - 1; ++s) issue(blockIdx.x + s * gridDim.x, s);
    int it = 0;
    for (int row = blockIdx.x; row < kRows; row += gridDim.x, ++it) {
        issue(row + (kStages - 1) * gridDim.x, (it + kStages - 1) % kStages);
        asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1));
        const int stage = it % kStages;
        Vec8 xs[kPer], dys[kPer];
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
            xs[k] = stages[(2 * stage) * kVectors + threadIdx.x + k * kThreads];
            dys[k] = stages[(2 * stage + 1) * kVectors + threadIdx.x + k * kThreads];
        }
        backward_row<kPer>(xs, dys, weight, rstd[row], dx + int64_t(row) * kVectors, dw, scratch[it & 1]);
    }
    write_partial<kPer>(dw, partials);
}

// dw[column] = the partial rows summed in order: 32 columns a block, 16 slices of rows, then the
// slices in slice order (the library's sum_partial_columns).
__global__ void __launch_bounds__(512) column_sums(const float *partials, int partial_rows, __nv_bfloat16 *dw) {
    const int column = blockIdx.x * 32 + threadIdx.x;
    float total = 0.f;
    for (int p = threadIdx.y; p < partial_rows; p += 16) total += partials[int64_t(p) * kCols + column];
    __shared__ float slices[16][33];
    slices[threadIdx.y][threadIdx.x] = total;
    __syncthreads();
    if (threadIdx.y == 0) {
        float sum = 0.f;
#pragma unroll
        for (int s = 0; s < 16; ++s) sum += slices[s][threadIdx.x];
        dw[column] = __float2bfloat16(sum);
    }
}

// The copy bound for this traffic: read two arrays, write one (a + b, so neither read is dropped).
__global__ void __launch_bounds__(256) add_rows(const Vec8 *__restrict__ a, const Vec8 *__restrict__ b,
                                                Vec8 *__restrict__ out) {
    const int64_t v = int64_t(blockIdx.x) * 512 + threadIdx.x;
    const Vec8 a0 = a[v], a1 = a[v + 256], b0 = b[v], b1 = b[v + 256];
    Vec8 o0, o1;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        o0.h[k] = __hadd2(a0.h[k], b0.h[k]);
        o1.h[k] = __hadd2(a1.h[k], b1.h[k]);
    }
    out[v] = o0;
    out[v + 256] = o1;
}

static double to_double(__nv_bfloat16 v) { return double(__bfloat162float(v)); }

int main() {
    const size_t n = size_t(kRows) * kCols;
    std::vector<__nv_bfloat16> hx(n), hdy(n), hw(kCols), hdx(n), hdw(kCols);
    std::vector<float> hrstd(kRows);
    uint32_t state = 12345;
    auto next = [&] { return (state = state * 1664525u + 1013904223u) / 4294967296.0f * 4.f - 2.f; };
    for (auto &v : hx) v = __float2bfloat16(next());
    for (auto &v : hdy) v = __float2bfloat16(next());
    for (auto &v : hw) v = __float2bfloat16(next());
    for (int r = 0; r < kRows; ++r) { // the forward's statistic, as the library saves it (float32)
        double s = 0;
        for (int c = 0; c < kCols; ++c) s += to_double(hx[size_t(r) * kCols + c]) * to_double(hx[size_t(r) * kCols + c]);
        hrstd[r] = float(1.0 / std::sqrt(s / kCols + 1e-6));
    }
    // float64 references: dx on every 997th row, dw over all rows
    std::vector<double> want_dw(kCols, 0.0);
    for (int r = 0; r < kRows; ++r) {
        for (int c = 0; c < kCols; ++c) {
            want_dw[c] += to_double(hdy[size_t(r) * kCols + c]) * to_double(hx[size_t(r) * kCols + c]) * hrstd[r];
        }
    }
    Vec8 *x, *dy, *w, *dx;
    float *rstd, *partials;
    __nv_bfloat16 *dw;
    CHECK(cudaMalloc(&x, n * 2));
    CHECK(cudaMalloc(&dy, n * 2));
    CHECK(cudaMalloc(&dx, n * 2));
    CHECK(cudaMalloc(&w, kCols * 2));
    CHECK(cudaMalloc(&dw, kCols * 2));
    CHECK(cudaMalloc(&rstd, kRows * 4));
    CHECK(cudaMalloc(&partials, size_t(132) * 64 * kCols * 4)); // up to 64 blocks an SM
    CHECK(cudaMemcpy(x, hx.data(), n * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, hdy.data(), n * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(w, hw.data(), kCols * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(rstd, hrstd.data(), kRows * 4, cudaMemcpyHostToDevice));
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const double bytes = 3.0 * n * 2 + kCols * 2 * 2; // x and dy read, dx written; w read, dw written

    auto check = [&](const char *name) {
        CHECK(cudaMemcpy(hdx.data(), dx, n * 2, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hdw.data(), dw, kCols * 2, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (int r = 0; r < kRows; r += 997) {
            double s = 0;
            for (int c = 0; c < kCols; ++c) {
                s += to_double(hdy[size_t(r) * kCols + c]) * to_double(hw[c]) * to_double(hx[size_t(r) * kCols + c]) * hrstd[r];
            }
            const double mean_gx = s / kCols;
            for (int c = 0; c < kCols; ++c) {
                const double xhat = to_double(hx[size_t(r) * kCols + c]) * hrstd[r];
                const double want = hrstd[r] * (to_double(hdy[size_t(r) * kCols + c]) * to_double(hw[c]) - xhat * mean_gx);
                worst = std::max(worst, std::fabs(to_double(hdx[size_t(r) * kCols + c]) - want) / (std::fabs(want) + 1e-1));
            }
        }
        for (int c = 0; c < kCols; ++c) {
            worst = std::max(worst, std::fabs(to_double(hdw[c]) - want_dw[c]) / (std::fabs(want_dw[c]) + 10.0));
        }
        if (worst > 2e-2) {
            std::fprintf(stderr, "%s: wrong result (relative error %.3g)\n", name, worst);
            std::exit(1);
        }
    };
    auto report = [&](const char *name, auto kernel, int threads, size_t smem) {
        if (smem > 0) { // opt in past the default 48 KB: dynamic plus static shared memory counts
            CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        }
        int per_sm = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
        const int grid = sms * per_sm;
        CHECK(cudaMemset(dx, 0x7f, n * 2)); // poison: an unwritten element reads 3.4e38 and fails the check
        CHECK(cudaMemset(dw, 0x7f, kCols * 2));
        const float ms = median_ms(
            [&] {
                kernel<<<grid, threads, smem>>>(x, dy, w, rstd, dx, partials);
                column_sums<<<kCols / 32, dim3(32, 16)>>>(partials, grid, dw);
            },
            3, 20);
        CHECK(cudaGetLastError());
        check(name);
        std::printf("%-20s %8.4f ms  %5.2f TB/s  (%d blocks/SM, grid %d)\n", name, ms, bytes / ms / 1e9, per_sm, grid);
    };
    std::printf("rms_norm backward, bfloat16 %d x %d (dx and dw)\n", kRows, kCols);
    report("held<128>", held<128, false>, 128, 0);
    report("held<256>", held<256, false>, 256, 0);
    report("held<512>", held<512, false>, 512, 0);
    report("ahead<128>", held<128, true>, 128, 0);
    report("ahead<256>", held<256, true>, 256, 0);
    report("ahead<512>", held<512, true>, 512, 0);
    const size_t row_pair = 2 * size_t(kVectors) * sizeof(Vec8);
    report("staged<128,2>", staged<128, 2>, 128, 2 * row_pair);
    report("staged<128,3>", staged<128, 3>, 128, 3 * row_pair);
    report("staged<256,2>", staged<256, 2>, 256, 2 * row_pair);
    report("staged<256,3>", staged<256, 3>, 256, 3 * row_pair);
    report("staged<512,2>", staged<512, 2>, 512, 2 * row_pair);
    report("staged<512,3>", staged<512, 3>, 512, 3 * row_pair);
    const float add_ms = median_ms([&] { add_rows<<<unsigned(n / kVec / 512), 256>>>(x, dy, dx); }, 3, 20);
    CHECK(cudaGetLastError());
    std::printf("%-20s %8.4f ms  %5.2f TB/s  (the copy bound: two arrays read, one written)\n", "add", add_ms,
                3.0 * n * 2 / add_ms / 1e9);
    return 0;
}
