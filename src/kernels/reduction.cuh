// reduction.cuh - how threads share a reduction of any set of dimensions of any layout: the
// kernels of the five strategies (kernels/launch.h's lab_reduce_strategy), run for any reducer of
// reducers.cuh. reduction_launcher.cuh sizes their grids; the reduction_<unit>.cu files instantiate
// the rows of reduce_ops.def in their unit (several files, so nvcc compiles them in parallel);
// reduction_launch.cu holds the extern "C" launcher. Every strategy combines in a fixed order, so a
// result is bitwise the same on every run.
#pragma once

#include <stdint.h>

#include <type_traits>

#include "dispatch.cuh"
#include "reduce.cuh"
#include "reducers.cuh"

namespace lab {

namespace {

constexpr int kReduceThreads = 256;
constexpr int kLanesInFlight = 4; // loads each thread issues before combining them
constexpr int kColumnRows = 8;    // the column strategy's block: 32 outputs x 8 rows of threads
constexpr int kOutputsPerCombineBlock = kReduceThreads / 32;

__host__ __device__ __forceinline__ int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }
__host__ __device__ __forceinline__ int64_t larger(int64_t a, int64_t b) { return a < b ? b : a; }

template <typename R> struct CombineOf {
    template <typename A> __device__ __forceinline__ A operator()(A a, A b) const { return R::combine(a, b); }
};

// The first element of each input for one output.
template <typename R> struct Rows {
    const char *in[2];
};
template <typename R>
__device__ __forceinline__ Rows<R> rows_at(const ReductionArgs &a, const int64_t (&offsets)[3]) {
    Rows<R> rows{{a.in[0] + offsets[0], nullptr}};
    if constexpr (R::kInputs == 2) rows.in[1] = a.in[1] + offsets[2];
    return rows;
}

// The element at p0 (and p1, for two inputs).
template <typename R>
__device__ __forceinline__ typename R::Element element_at(const char *p0, const char *p1) {
    using T = typename R::In;
    if constexpr (R::kInputs == 2) {
        return {*reinterpret_cast<const T *>(p0), *reinterpret_cast<const T *>(p1)};
    } else {
        return *reinterpret_cast<const T *>(p0);
    }
}

template <typename R>
__device__ __forceinline__ typename R::Element load_element(const Rows<R> &rows, const ReducedSpace &space,
                                                            int64_t r) {
    int64_t o[2];
    space.offsets(r, o);
    return element_at<R>(rows.in[0] + o[0], rows.in[1] + o[1]);
}

// 16-byte loads need the reduced dimension contiguous in every input and, for two inputs, both
// rows at the same distance from a 16-byte boundary.
template <typename R>
__device__ __forceinline__ bool loads_vectorize(const Rows<R> &rows, const ReducedSpace &space) {
    if (!space.contiguous) return false;
    const uintptr_t first = reinterpret_cast<uintptr_t>(rows.in[0]);
    if (first % sizeof(typename R::In) != 0) return false;
    if constexpr (R::kInputs == 2) return (first - reinterpret_cast<uintptr_t>(rows.in[1])) % 16 == 0;
    return true;
}

// The 16-byte vector `index` of `base`, read through the non-coherent path without a place in L1:
// nothing writes a reduction's input while the kernel runs, and no element is read twice. (+0.5% on
// the whole-array sums against a plain load, H200, 2026-12-04.)
__device__ __forceinline__ Packet16 load_read_only(const char *base, int64_t index) {
    Packet16 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(v.bits.x), "=r"(v.bits.y), "=r"(v.bits.z), "=r"(v.bits.w)
        : "l"(reinterpret_cast<const uint4 *>(base) + index));
    return v;
}

// Which way of walking the reduced elements a kernel compiles in, chosen on the host: each way costs
// registers in every kernel that carries it (ptxas: argmax's rows 64 -> 94 with three ways in one
// kernel; the float32 sum's slices 60 with the contiguous and the general way, 48 with the first
// alone), so a kernel carries one.
//  - kContiguous: one reduced dimension of unit stride in every input (ReducedSpace::contiguous) -
//    16-byte loads where the inputs' alignment allows, else a pointer walk.
//  - kStrided: any other layout - a pointer walk along one strided dimension, index divisions
//    (indexing.cuh) for several.
enum class Walk { kContiguous, kStrided };

// Elements [begin, end) of one output, shared by `lanes` threads of which this is `lane`: each
// thread issues kInFlight loads before combining them into separate accumulators, joined in a
// fixed order at the end. A contiguous row goes 16 bytes per load: the elements before the first
// 16-byte boundary one by one, then whole vectors, then the tail. kShortRows: rows of a few vectors
// (four lanes a row) test every load against the row's end, as one loop - with the untested rounds
// and their tail ptxas took the float32 sum's rows from 48 registers to 64, and rows of 32 elements
// ran 18% slower.
template <typename R, int kInFlight, Walk kWalk, bool kShortRows = false>
__device__ __forceinline__ typename R::Acc accumulate(const Rows<R> &rows, const ReducedSpace &space,
                                                      int64_t begin, int64_t end, int lane, int lanes) {
    using T = typename R::In;
    typename R::Acc acc[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) acc[u] = R::identity();
    // One element by pointers, for the walks without 16-byte loads.
    auto walk_pointers = [&](int64_t step0, int64_t step1) {
        const int64_t step[2] = {step0 * lanes, step1 * lanes};
        const char *at[2] = {rows.in[0] + (begin + lane) * step0, rows.in[1] + (begin + lane) * step1};
        for (int64_t r = begin + lane; r < end; r += kInFlight * lanes) {
            typename R::Element x[kInFlight];
#pragma unroll
            for (int u = 0; u < kInFlight; ++u) {
                if (r + u * lanes < end) x[u] = element_at<R>(at[0] + u * step[0], at[1] + u * step[1]);
            }
#pragma unroll
            for (int u = 0; u < kInFlight; ++u) {
                if (r + u * lanes < end) acc[u] = R::add(acc[u], x[u], r + u * lanes);
            }
            at[0] += kInFlight * step[0];
            at[1] += kInFlight * step[1];
        }
    };
    if constexpr (kWalk == Walk::kContiguous) {
        constexpr int64_t kUnit = sizeof(T);
        if (loads_vectorize(rows, space)) {
            constexpr int kVec = 16 / kUnit;
            const uintptr_t address = reinterpret_cast<uintptr_t>(rows.in[0]) + begin * kUnit;
            const int64_t head = smaller(((16 - address % 16) % 16) / kUnit, end - begin);
            for (int64_t r = begin + lane; r < begin + head; r += lanes)
                acc[0] = R::add(acc[0], element_at<R>(rows.in[0] + r * kUnit, rows.in[1] + r * kUnit), r);
            const int64_t first_vector = begin + head, n_vectors = (end - first_vector) / kVec;
            const char *vectors[2] = {rows.in[0] + first_vector * kUnit, rows.in[1] + first_vector * kUnit};
            auto add_vector = [&](typename R::Acc &into, const Packet16(&v)[R::kInputs], int64_t i) {
                const int64_t at = first_vector + i * kVec;
                if constexpr (R::kInputs == 1) {
                    into = R::add_vector(into, v[0], at);
                } else {
#pragma unroll
                    for (int e = 0; e < kVec; ++e) {
                        const typename R::Element x{packet_element<T>(v[0], e), packet_element<T>(v[1], e)};
                        into = R::add(into, x, at + e);
                    }
                }
            };
            // A round: kInFlight loads, then their adds; `tested` tests each load against the end.
            auto round = [&](int64_t i, auto tested) {
                constexpr bool kTested = decltype(tested)::value;
                Packet16 v[kInFlight][R::kInputs];
#pragma unroll
                for (int u = 0; u < kInFlight; ++u) {
                    if (!kTested || i + u * lanes < n_vectors) {
#pragma unroll
                        for (int k = 0; k < R::kInputs; ++k)
                            v[u][k] = load_read_only(vectors[k], i + u * lanes);
                    }
                }
#pragma unroll
                for (int u = 0; u < kInFlight; ++u) {
                    if (!kTested || i + u * lanes < n_vectors) add_vector(acc[u], v[u], i + u * lanes);
                }
            };
            int64_t i = lane;
            if constexpr (kShortRows) {
                for (; i < n_vectors; i += kInFlight * lanes) round(i, std::true_type{});
            } else {
                // Whole rounds untested, then the last vectors one at a time: the float32 sum 4.34 ->
                // 4.47 TB/s, the bfloat16 sum 4.22 -> 4.30 (H200, 2026-12-04, bench/sweep_reductions.py).
                for (; i + (kInFlight - 1) * lanes < n_vectors; i += kInFlight * lanes)
                    round(i, std::false_type{});
#pragma unroll 1
                for (; i < n_vectors; i += lanes) {
                    Packet16 v[1][R::kInputs];
#pragma unroll
                    for (int k = 0; k < R::kInputs; ++k) v[0][k] = load_read_only(vectors[k], i);
                    add_vector(acc[0], v[0], i);
                }
            }
            for (int64_t r = first_vector + n_vectors * kVec + lane; r < end; r += lanes)
                acc[0] = R::add(acc[0], element_at<R>(rows.in[0] + r * kUnit, rows.in[1] + r * kUnit), r);
        } else {
            walk_pointers(kUnit, kUnit);
        }
    } else if (space.single) { // one reduced dimension: walk pointers
        walk_pointers(space.stride[0], space.stride[1]);
    } else {
        for (int64_t r = begin + lane; r < end; r += kInFlight * lanes) {
            typename R::Element x[kInFlight];
#pragma unroll
            for (int u = 0; u < kInFlight; ++u) {
                if (r + u * lanes < end) x[u] = load_element(rows, space, r + u * lanes);
            }
#pragma unroll
            for (int u = 0; u < kInFlight; ++u) {
                if (r + u * lanes < end) acc[u] = R::add(acc[u], x[u], r + u * lanes);
            }
        }
    }
#pragma unroll
    for (int u = 1; u < kInFlight; ++u) acc[0] = R::combine(acc[0], acc[u]);
    return acc[0];
}

// kGroup threads per output: four lanes, a warp or the whole block. The loop runs while any group
// of the block has an output, so every lane reaches the shuffles.
template <typename R, Walk kWalk, int kGroup, int kInFlight = kLanesInFlight>
__global__ void __launch_bounds__(kReduceThreads, kWalk == Walk::kContiguous ? R::kRowBlocks : 1)
    reduce_by_group(ReductionArgs a) {
    constexpr int kGroupsPerBlock = kReduceThreads / kGroup;
    const int lane = threadIdx.x % kGroup, group = threadIdx.x / kGroup;
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * kGroupsPerBlock; base < a.n_outputs;
         base += static_cast<int64_t>(gridDim.x) * kGroupsPerBlock) {
        const int64_t o = base + group;
        int64_t offsets[3] = {0, 0, 0};
        typename R::Acc acc = R::identity();
        if (o < a.n_outputs) {
            byte_offsets(a.kept, o, offsets);
            acc = accumulate<R, kInFlight, kWalk, (kGroup <= 4)>(rows_at<R>(a, offsets), a.reduced, 0,
                                                                 a.n_reduce, lane, kGroup);
        }
        if constexpr (kGroup <= 32) {
            acc = warp_reduce<kGroup>(acc, CombineOf<R>{});
        } else {
            acc = block_reduce<kReduceThreads>(acc, CombineOf<R>{}, R::identity());
        }
        if (o < a.n_outputs && lane == 0) R::finish(a.out + offsets[1], a, acc);
    }
}

// Where slice s of an output's elements begins and ends: whole runs of 64 elements (128 bytes of
// bfloat16, 256 of float32), so that a contiguous row's slices start where its 128-byte lines do and
// no two blocks read the same line (an odd length had every slice's warps straddle lines).
__device__ __forceinline__ void slice_bounds(const ReductionArgs &a, int64_t s, int64_t &begin,
                                             int64_t &end) {
    constexpr int64_t kRun = 64;
    const int64_t per_slice = ((a.n_reduce + a.slices - 1) / a.slices + kRun - 1) / kRun * kRun;
    begin = smaller(s * per_slice, a.n_reduce);
    end = smaller(begin + per_slice, a.n_reduce);
}

// The innermost dimension kept (a column sum): threadIdx.x picks neighbouring outputs, so each
// load of a warp reads one contiguous segment; the block's kColumnRows rows of threads share the
// elements of slice blockIdx.y and combine through shared memory in row order. With one slice
// the result is stored, else it is the partial partials[o * slices + slice].
template <typename R>
__global__ void __launch_bounds__(kReduceThreads) reduce_columns(ReductionArgs a, typename R::Acc *partials) {
    __shared__ typename R::Acc row_partials[kColumnRows][32];
    int64_t begin, end;
    slice_bounds(a, blockIdx.y, begin, end);
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * 32; base < a.n_outputs;
         base += static_cast<int64_t>(gridDim.x) * 32) {
        const int64_t o = base + threadIdx.x;
        int64_t offsets[3] = {0, 0, 0};
        typename R::Acc acc = R::identity();
        if (o < a.n_outputs) {
            byte_offsets(a.kept, o, offsets);
            acc = accumulate<R, kLanesInFlight, Walk::kStrided>(rows_at<R>(a, offsets), a.reduced, begin, end,
                                                                threadIdx.y, kColumnRows);
        }
        row_partials[threadIdx.y][threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.y == 0 && o < a.n_outputs) {
            for (int y = 1; y < kColumnRows; ++y) acc = R::combine(acc, row_partials[y][threadIdx.x]);
            if (partials) {
                partials[o * a.slices + blockIdx.y] = acc;
            } else {
                R::finish(a.out + offsets[1], a, acc);
            }
        }
        __syncthreads(); // row_partials is rewritten by the next iteration
    }
}

// Outputs side by side in memory that one column thread loads together: 16 bytes of float32 or
// float64, 8 of halves, 4 of int8 - four (two for 8-byte types) accumulators per thread.
template <typename T> constexpr int kColumnVector = sizeof(T) == 8 ? 2 : 4;
template <typename T> struct alignas(kColumnVector<T> * sizeof(T)) ColumnLanes {
    T v[kColumnVector<T>];
};

// reduce_columns with kColumnVector neighbouring outputs per thread, one load for all of them: a
// column sum's loads are then 16 bytes, not 4, and the device keeps enough bytes in flight to
// reach its bandwidth. The launcher uses it where make_args found the layout allows it.
template <typename R>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_column_vectors(ReductionArgs a, typename R::Acc *partials) {
    using T = typename R::In;
    using Acc = typename R::Acc;
    constexpr int kV = kColumnVector<T>;
    __shared__ Acc row_partials[kColumnRows][32 * kV];
    int64_t begin, end;
    slice_bounds(a, blockIdx.y, begin, end);
    const int64_t step = a.reduced.stride[0] * kColumnRows;
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * 32; base * kV < a.n_outputs;
         base += static_cast<int64_t>(gridDim.x) * 32) {
        const int64_t first = (base + threadIdx.x) * kV; // this thread's outputs: first .. first + kV - 1
        Acc acc[kV];
#pragma unroll
        for (int j = 0; j < kV; ++j) acc[j] = R::identity();
        if (first < a.n_outputs) {
            int64_t offsets[3];
            byte_offsets(a.kept, first, offsets);
            const char *at = a.in[0] + offsets[0] + (begin + threadIdx.y) * a.reduced.stride[0];
            for (int64_t r = begin + threadIdx.y; r < end; r += kLanesInFlight * kColumnRows) {
                ColumnLanes<T> x[kLanesInFlight];
#pragma unroll
                for (int u = 0; u < kLanesInFlight; ++u) {
                    if (r + u * kColumnRows < end) {
                        x[u] = *reinterpret_cast<const ColumnLanes<T> *>(at + u * step);
                    }
                }
#pragma unroll
                for (int u = 0; u < kLanesInFlight; ++u) {
                    if (r + u * kColumnRows < end) {
#pragma unroll
                        for (int j = 0; j < kV; ++j) acc[j] = R::add(acc[j], x[u].v[j], r + u * kColumnRows);
                    }
                }
                at += kLanesInFlight * step;
            }
        }
#pragma unroll
        for (int j = 0; j < kV; ++j) row_partials[threadIdx.y][threadIdx.x * kV + j] = acc[j];
        __syncthreads();
        if (threadIdx.y == 0 && first < a.n_outputs) {
#pragma unroll
            for (int j = 0; j < kV; ++j) {
                for (int y = 1; y < kColumnRows; ++y)
                    acc[j] = R::combine(acc[j], row_partials[y][threadIdx.x * kV + j]);
                if (partials) {
                    partials[(first + j) * a.slices + blockIdx.y] = acc[j];
                } else {
                    int64_t offsets[3];
                    byte_offsets(a.kept, first + j, offsets);
                    R::finish(a.out + offsets[1], a, acc[j]);
                }
            }
        }
        __syncthreads(); // row_partials is rewritten by the next iteration
    }
}

// Split, pass 1: block b reduces slice b % slices of output b / slices into partials[b].
template <typename R, Walk kWalk>
__global__ void __launch_bounds__(kReduceThreads, kWalk == Walk::kContiguous ? R::kSliceBlocks : 1)
    reduce_slices(ReductionArgs a, typename R::Acc *partials) {
    const int64_t o = blockIdx.x / a.slices;
    int64_t begin, end, offsets[3] = {0, 0, 0};
    slice_bounds(a, blockIdx.x % a.slices, begin, end);
    byte_offsets(a.kept, o, offsets);
    typename R::Acc acc = accumulate<R, kLanesInFlight, kWalk>(rows_at<R>(a, offsets), a.reduced, begin, end,
                                                               threadIdx.x, kReduceThreads);
    acc = block_reduce<kReduceThreads>(acc, CombineOf<R>{}, R::identity());
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// Pass 2 of the split and column strategies: a warp per output combines its partials - lane l
// takes slices l, l + 32, ... in order, then the shuffle tree - and stores the result.
template <typename R>
__global__ void __launch_bounds__(kReduceThreads)
    combine_partials(ReductionArgs a, const typename R::Acc *partials) {
    const int lane = threadIdx.x % 32;
    for (int64_t o = static_cast<int64_t>(blockIdx.x) * kOutputsPerCombineBlock + threadIdx.x / 32;
         o < a.n_outputs; o += static_cast<int64_t>(gridDim.x) * kOutputsPerCombineBlock) {
        typename R::Acc acc = R::identity();
        for (int s = lane; s < a.slices; s += 32) acc = R::combine(acc, partials[o * a.slices + s]);
        acc = warp_reduce(acc, CombineOf<R>{});
        if (lane == 0) {
            int64_t offsets[3];
            byte_offsets(a.kept, o, offsets);
            R::finish(a.out + offsets[1], a, acc);
        }
    }
}

} // namespace

} // namespace lab
