// reduction_launcher.cuh - the host side of the reductions: how many blocks and slices each strategy
// of reduction.cuh gets (from the kernel's own occupancy and the device's multiprocessors), the
// arguments the kernels receive, the two-pass runs and, per unit of reduce_ops.def, the switch
// from an op and a dtype to its reducer. Included by the reduction_<unit>.cu files.
#pragma once

#include <atomic>
#include <stdint.h>

#include "reduction.cuh"
#include "resident_blocks.cuh"

namespace lab {

// The waves of blocks a split reduction's first pass is cut into (lab_reduce_set_slice_waves).
extern int reduce_slice_waves;

namespace {

unsigned int grid_for(int64_t items, int64_t per_block) {
    const int64_t blocks = (items + per_block - 1) / per_block;
    return static_cast<unsigned int>(blocks<1 ? 1 : blocks>(1 << 20) ? (1 << 20) : blocks);
}

constexpr lab_reduce_finish kFinishOf[LAB_NUM_REDUCE_OPS] = {
#define LAB_REDUCE_OP(id, reducer, integers, index_output, empty_value, finish, unit) finish,
#include "reduce_ops.def"
#undef LAB_REDUCE_OP
};

template <typename R> ReductionArgs make_args(const lab_reduction_launch &l) {
    ReductionArgs a{};
    a.in[0] = l.in[0];
    a.in[1] = l.in[1];
    a.out = l.out;
    a.out_dtype = l.out_dtype;
    a.finish = kFinishOf[l.op];
    a.correction = l.correction;
    a.n_outputs = l.n_outputs;
    a.n_reduce = l.n_reduce;
    a.slices = 1;
    lab_fill_layout(&a.kept.dims, a.kept.strides, 3, l.kept_ndim, l.kept_shape, l.kept_strides, l.n_outputs);
    StridedLayout<2> &r = a.reduced.layout;
    lab_fill_layout(&r.dims, r.strides, 2, l.reduced_ndim, l.reduced_shape, l.reduced_strides, l.n_reduce);
    a.reduced.single = l.reduced_ndim <= 1;
    a.reduced.stride[0] = l.reduced_ndim == 1 ? l.reduced_strides[0][0] : 0;
    a.reduced.stride[1] = l.reduced_ndim == 1 ? l.reduced_strides[1][0] : 0;
    const int64_t unit = sizeof(typename R::In);
    a.reduced.contiguous = l.reduced_ndim == 1 && a.reduced.stride[0] == unit &&
                           (R::kInputs == 1 || a.reduced.stride[1] == unit);
    return a;
}

// Whether reduce_column_vectors can run: one input, at most one reduced dimension, the innermost
// kept dimension contiguous in the input and a multiple of kColumnVector long, and every load
// aligned to the kColumnVector elements it reads.
template <typename R> bool columns_vectorize(const lab_reduction_launch &l) {
    using T = typename R::In;
    const int64_t width = kColumnVector<T> * static_cast<int64_t>(sizeof(T));
    if (l.kept_ndim < 1 || l.reduced_ndim > 1) return false;
    const int inner = l.kept_ndim - 1;
    if (l.kept_strides[0][inner] != static_cast<int64_t>(sizeof(T)) ||
        l.kept_shape[inner] % kColumnVector<T> != 0) {
        return false;
    }
    bool aligned = reinterpret_cast<uintptr_t>(l.in[0]) % width == 0;
    for (int d = 0; d < inner; ++d) aligned = aligned && l.kept_strides[0][d] % width == 0;
    if (l.reduced_ndim == 1) aligned = aligned && l.reduced_strides[0][0] % width == 0;
    return aligned;
}

// Pass 1 (`first_pass(partials)`, which launches it) into a buffer from lab's scratch pool,
// then combine_partials, then the buffer back to the pool - all queued on `stream`.
template <typename R, typename FirstPass>
cudaError_t run_in_two_passes(const ReductionArgs &a, cudaStream_t stream, FirstPass first_pass) {
    using Acc = typename R::Acc;
    Acc *partials = nullptr;
    cudaError_t err =
        lab_scratch_alloc(reinterpret_cast<void **>(&partials), sizeof(Acc) * a.n_outputs * a.slices, stream);
    if (err != cudaSuccess) return err;
    first_pass(partials);
    err = cudaGetLastError();
    if (err == cudaSuccess) {
        combine_partials<R>
            <<<grid_for(a.n_outputs, kOutputsPerCombineBlock), kReduceThreads, 0, stream>>>(a, partials);
        err = cudaGetLastError();
    }
    const cudaError_t freed = cudaFreeAsync(partials, stream);
    return err != cudaSuccess ? err : freed;
}

// A column kernel (`kernel(grid, block, stream, args, partials)` launches it) over blocks of
// `outputs_per_block` outputs: as many slices as fill the device in whole waves, none shorter than
// 64 elements per row of threads (a partial last wave would leave most multiprocessors idle while
// it runs); with more than one, the partials are combined in a second pass.
template <typename R, typename Kernel>
cudaError_t launch_columns(ReductionArgs &a, int64_t resident, int64_t outputs_per_block, cudaStream_t stream,
                           Kernel kernel) {
    const unsigned int columns = grid_for(a.n_outputs, outputs_per_block);
    a.slices = static_cast<int>(
        larger(1, smaller(65535, smaller(resident / columns, ceil_div(a.n_reduce, 64 * kColumnRows)))));
    const dim3 grid(columns, a.slices), block(32, kColumnRows);
    if (a.slices == 1) {
        kernel(grid, block, stream, a, static_cast<typename R::Acc *>(nullptr));
        return cudaGetLastError();
    }
    return run_in_two_passes<R>(a, stream,
                                [&](typename R::Acc *partials) { kernel(grid, block, stream, a, partials); });
}

// The strategy's kernels walking the reduced elements the kWalk way; each instantiation asks the
// occupancy of its own kernels once (the two walks differ in registers).
template <typename R, Walk kWalk>
cudaError_t launch_walking(const lab_reduction_launch &l, ReductionArgs &a, cudaStream_t stream) {
    int64_t resident = 0;
    static std::atomic<int> columns_per_sm{0}, vectors_per_sm{0}, slices_per_sm{0}; // asked once each
    cudaError_t err = cudaSuccess;
    switch (l.strategy) {
    case LAB_REDUCE_BY_QUAD:
        // rows of at most 64 elements: two 16-byte loads in flight cover a row of 32 floats
        reduce_by_group<R, kWalk, 4, 2>
            <<<grid_for(l.n_outputs, kReduceThreads / 4), kReduceThreads, 0, stream>>>(a);
        return cudaGetLastError();
    case LAB_REDUCE_BY_WARP:
        reduce_by_group<R, kWalk, 32>
            <<<grid_for(l.n_outputs, kReduceThreads / 32), kReduceThreads, 0, stream>>>(a);
        return cudaGetLastError();
    case LAB_REDUCE_BY_BLOCK:
        reduce_by_group<R, kWalk, kReduceThreads><<<grid_for(l.n_outputs, 1), kReduceThreads, 0, stream>>>(a);
        return cudaGetLastError();
    case LAB_REDUCE_BY_COLUMN: {
        // The reduced dimension of a column reduction is never the contiguous one.
        if constexpr (kWalk == Walk::kStrided) {
            if constexpr (R::kInputs == 1) {
                if (columns_vectorize<R>(l)) {
                    err = resident_blocks(reduce_column_vectors<R>, kReduceThreads, 0, vectors_per_sm,
                                          &resident);
                    if (err != cudaSuccess) return err;
                    return launch_columns<R>(
                        a, resident, kColumnVector<typename R::In> * 32, stream,
                        [](dim3 grid, dim3 block, cudaStream_t s, ReductionArgs args, auto *partials) {
                            reduce_column_vectors<R><<<grid, block, 0, s>>>(args, partials);
                        });
                }
            }
            err = resident_blocks(reduce_columns<R>, kReduceThreads, 0, columns_per_sm, &resident);
            if (err != cudaSuccess) return err;
            return launch_columns<R>(
                a, resident, 32, stream,
                [](dim3 grid, dim3 block, cudaStream_t s, ReductionArgs args, auto *partials) {
                    reduce_columns<R><<<grid, block, 0, s>>>(args, partials);
                });
        }
        return cudaErrorInvalidValue;
    }
    case LAB_REDUCE_SPLIT: {
        err = resident_blocks(reduce_slices<R, kWalk>, kReduceThreads, 0, slices_per_sm, &resident);
        if (err != cudaSuccess) return err;
        // Enough blocks to fill the device in whole waves, none with fewer than 8192 elements.
        a.slices = static_cast<int>(
            larger(1, smaller(resident * reduce_slice_waves / l.n_outputs, ceil_div(l.n_reduce, 8192))));
        if (a.slices == 1) {
            reduce_by_group<R, kWalk, kReduceThreads>
                <<<grid_for(l.n_outputs, 1), kReduceThreads, 0, stream>>>(a);
            return cudaGetLastError();
        }
        const unsigned int blocks = static_cast<unsigned int>(l.n_outputs * a.slices);
        return run_in_two_passes<R>(a, stream, [&](typename R::Acc *partials) {
            reduce_slices<R, kWalk><<<blocks, kReduceThreads, 0, stream>>>(a, partials);
        });
    }
    }
    return cudaErrorInvalidValue;
}

template <typename R> cudaError_t launch_reducer(const lab_reduction_launch &l, cudaStream_t stream) {
    ReductionArgs a = make_args<R>(l);
    if (a.reduced.contiguous && l.strategy != LAB_REDUCE_BY_COLUMN) {
        return launch_walking<R, Walk::kContiguous>(l, a, stream);
    }
    return launch_walking<R, Walk::kStrided>(l, a, stream);
}

} // namespace

// The rows of reduce_ops.def in unit kUnit, each instantiated for every input dtype it takes;
// reduction_<unit>.cu instantiates its kUnit, so each file compiles its own rows only.
template <int kUnit> cudaError_t launch_unit(const lab_reduction_launch &launch, cudaStream_t stream) {
    switch (launch.op) {
#define LAB_REDUCE_OP(id, reducer, integers, index_output, empty_value, finish, unit)                        \
    case LAB_REDUCE_##id:                                                                                    \
        if constexpr (unit == kUnit) {                                                                       \
            return visit_storage_type<bool(integers)>(launch.in_dtype, [&](auto tag) {                       \
                return launch_reducer<reducer<typename decltype(tag)::type>>(launch, stream);                \
            });                                                                                              \
        } else {                                                                                             \
            return cudaErrorInvalidValue;                                                                    \
        }
#include "reduce_ops.def"
#undef LAB_REDUCE_OP
    default: return cudaErrorInvalidValue;
    }
}

extern template cudaError_t launch_unit<0>(const lab_reduction_launch &, cudaStream_t);
extern template cudaError_t launch_unit<1>(const lab_reduction_launch &, cudaStream_t);
extern template cudaError_t launch_unit<2>(const lab_reduction_launch &, cudaStream_t);
extern template cudaError_t launch_unit<3>(const lab_reduction_launch &, cudaStream_t);

} // namespace lab
