// multi_tensor.cu - multi-tensor apply: one kernel launch for a whole list of tensors.
//
// An optimizer step touches hundreds of small tensors; launching once per tensor costs ~4 us of
// host time each, far more than the GPU work. Here every tensor is cut into chunks of kChunk
// elements, one block each, and the host packs into the kernel's parameters a table of the tensors
// (pointers, size, first block); a block finds its tensor by binary search. A table holds 32
// tensors (under the classic 4 KB of parameters) or 256 (under 16 KB, from CUDA 12.1); more tensors
// take more launches. Elements are read as float, computed in float (half types too) and written back in
// each list's dtype. (apex / PyTorch's MultiTensorApply.cuh follow the same plan.)
#include <type_traits>

#include "dispatch.cuh"
#include "launch.h"
#include "list_steps.cuh"
#include "reduce.cuh"

namespace lab {
namespace {

constexpr int kChunk = 65536; // elements per block
constexpr int kMtThreads = 512;
constexpr int kIlp = 4; // misaligned tensors: elements per thread per step, loaded before use

// A launch's table, passed as the kernel's parameters: per tensor its pointers (one per list), its
// size, and the first block that works on it. Block b finds its tensor by binary search over
// first_block, so the table grows with the number of tensors only - not with the blocks they need -
// and a launch sends no more parameter bytes than its tensors fill: the driver copies every byte
// of a kernel's parameters into the launch, ~1 us per KB measured here (2026-11-30).
template <int kMaxTensorsV> struct ChunkTable {
    static constexpr int kMaxTensors = kMaxTensorsV;
    char *ptrs[LAB_MAX_OPERANDS][kMaxTensors];
    int64_t sizes[kMaxTensors];
    int32_t first_block[kMaxTensors];
    int32_t norm_index[kMaxTensors];
    int32_t n_tensors;
};
using SmallTable = ChunkTable<32>;  // short lists (and drivers before CUDA 12.1): under 4 KB
using LargeTable = ChunkTable<256>; // long lists: under 16 KB of the 32 KB CUDA 12.1 allows
static_assert(sizeof(SmallTable) + sizeof(lab_mt_params) + 64 < 4096, "4 KB parameter limit");
static_assert(sizeof(LargeTable) + sizeof(lab_mt_params) + 64 < 16384, "parameter budget");

// The tensor block b works on, and the chunk of it: the last tensor whose first block is <= b.
template <typename Table> __device__ __forceinline__ int tensor_of_block(const Table &table, int b) {
    int lo = 0, hi = table.n_tensors - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (table.first_block[mid] <= b) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    return lo;
}

// One element of list k of the block's tensor: the state dtype S or the parameter dtype P.
template <typename Op, typename P, typename S>
__device__ __forceinline__ float load_element(const char *list, int k, int i) {
    if ((Op::kState >> k) & 1) return load_as_compute(reinterpret_cast<const S *>(list)[i]);
    return load_as_compute(reinterpret_cast<const P *>(list)[i]);
}
template <typename Op, typename P, typename S>
__device__ __forceinline__ void store_element(char *list, int k, int i, float v) {
    if ((Op::kState >> k) & 1) {
        reinterpret_cast<S *>(list)[i] = store_from_compute<S>(v);
    } else {
        reinterpret_cast<P *>(list)[i] = store_from_compute<P>(v);
    }
}

// kVec consecutive elements moved by one instruction: 16 bytes of the parameter dtype (a state
// list in float32 next to half parameters moves 32 bytes, two instructions).
template <typename T, int kVec> struct alignas(sizeof(T) * kVec) Vector {
    T v[kVec];
};
template <typename Op, typename P, typename S, int kVec>
__device__ __forceinline__ void load_vector(const char *list, int k, int v, float (&r)[kVec][4]) {
    if ((Op::kState >> k) & 1) {
        const Vector<S, kVec> x = reinterpret_cast<const Vector<S, kVec> *>(list)[v];
#pragma unroll
        for (int e = 0; e < kVec; ++e) r[e][k] = load_as_compute(x.v[e]);
    } else {
        const Vector<P, kVec> x = reinterpret_cast<const Vector<P, kVec> *>(list)[v];
#pragma unroll
        for (int e = 0; e < kVec; ++e) r[e][k] = load_as_compute(x.v[e]);
    }
}
template <typename Op, typename P, typename S, int kVec>
__device__ __forceinline__ void store_vector(char *list, int k, int v, const float (&r)[kVec][4]) {
    if ((Op::kState >> k) & 1) {
        Vector<S, kVec> x;
#pragma unroll
        for (int e = 0; e < kVec; ++e) x.v[e] = store_from_compute<S>(r[e][k]);
        reinterpret_cast<Vector<S, kVec> *>(list)[v] = x;
    } else {
        Vector<P, kVec> x;
#pragma unroll
        for (int e = 0; e < kVec; ++e) x.v[e] = store_from_compute<P>(r[e][k]);
        reinterpret_cast<Vector<P, kVec> *>(list)[v] = x;
    }
}

// Block b handles chunk block_chunk[b] of tensor block_tensor[b]. Neighbouring threads touch
// neighbouring memory on every step (coalesced): when every list of the tensor is aligned, each
// thread moves whole vectors, kUnroll of them loaded before any is used; the rest of the chunk
// (the last len % kVec elements, or all of a misaligned view) goes kIlp elements per thread, each
// kMtThreads apart.
template <typename Op, typename P, typename S, typename Table>
__global__ void __launch_bounds__(kMtThreads) multi_tensor_kernel(Table table, lab_mt_params params) {
    constexpr int kVec = 16 / sizeof(P);
    // Two vectors in flight per thread when they fit in registers (float32, or few lists).
    constexpr int kUnroll = kVec * Op::kLists <= 16 ? 2 : 1;
    const Op op;
    const int t = tensor_of_block(table, blockIdx.x);
    const int64_t start = static_cast<int64_t>(blockIdx.x - table.first_block[t]) * kChunk;
    const int64_t remaining = table.sizes[t] - start;
    const int len = static_cast<int>(remaining < kChunk ? remaining : kChunk);

    char *list[Op::kLists];
    bool aligned = true;
#pragma unroll
    for (int k = 0; k < Op::kLists; ++k) {
        const int element_size = ((Op::kState >> k) & 1) ? sizeof(S) : sizeof(P);
        list[k] = table.ptrs[k][t] + start * element_size;
        aligned &= reinterpret_cast<uintptr_t>(list[k]) % (element_size * kVec) == 0;
    }

    int done = 0;
    if (aligned) {
        const int n_vectors = len / kVec;
        for (int first = threadIdx.x; first < n_vectors; first += kMtThreads * kUnroll) {
            float r[kUnroll][kVec][4];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int v = first + u * kMtThreads;
#pragma unroll
                for (int k = 0; k < Op::kLists; ++k)
                    if (((Op::kReads >> k) & 1) && v < n_vectors) {
                        load_vector<Op, P, S, kVec>(list[k], k, v, r[u]);
                    }
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int v = first + u * kMtThreads;
                if (v >= n_vectors) break;
#pragma unroll
                for (int e = 0; e < kVec; ++e) op(r[u][e], params);
#pragma unroll
                for (int k = 0; k < Op::kLists; ++k)
                    if ((Op::kWrites >> k) & 1) store_vector<Op, P, S, kVec>(list[k], k, v, r[u]);
            }
        }
        done = n_vectors * kVec;
    }
    for (int first = done + threadIdx.x; first < len; first += kMtThreads * kIlp) {
        float r[kIlp][4];
#pragma unroll
        for (int e = 0; e < kIlp; ++e) {
            const int i = first + e * kMtThreads;
#pragma unroll
            for (int k = 0; k < Op::kLists; ++k)
                if (((Op::kReads >> k) & 1) && i < len) r[e][k] = load_element<Op, P, S>(list[k], k, i);
        }
#pragma unroll
        for (int e = 0; e < kIlp; ++e) {
            const int i = first + e * kMtThreads;
            if (i >= len) break;
            op(r[e], params);
#pragma unroll
            for (int k = 0; k < Op::kLists; ++k)
                if ((Op::kWrites >> k) & 1) store_element<Op, P, S>(list[k], k, i, r[e][k]);
        }
    }
}

// Sum of squares of each chunk into partials[block]: no atomics, so finish_norms_kernel can add a
// tensor's chunks in a fixed order and a norm is bitwise the same on every run.
template <typename P, typename Table>
__global__ void __launch_bounds__(kMtThreads) sum_of_squares_kernel(Table table, float *partials) {
    const int t = tensor_of_block(table, blockIdx.x);
    const int64_t start = static_cast<int64_t>(blockIdx.x - table.first_block[t]) * kChunk;
    const int64_t remaining = table.sizes[t] - start;
    const int len = static_cast<int>(remaining < kChunk ? remaining : kChunk);
    const P *x = reinterpret_cast<const P *>(table.ptrs[0][t]) + start;
    const SumOfSquares square;
    float sum = 0.f;
    for (int i = threadIdx.x; i < len; i += kMtThreads) sum += square(load_as_compute(x[i]));
    sum = block_reduce<kMtThreads>(sum, SumCombine(), 0.f);
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// A warp per tensor of the table: lane l adds the tensor's chunks l, l + 32, ... in order, the
// shuffle tree adds the lanes, and the square root lands in norms[norm_index[t]].
constexpr int kNormsPerBlock = 8;
template <typename Table>
__global__ void __launch_bounds__(32 * kNormsPerBlock)
    finish_norms_kernel(Table table, const float *partials, float *norms) {
    const int t = blockIdx.x * kNormsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (t >= table.n_tensors) return; // the whole warp leaves together
    const int64_t chunks = (table.sizes[t] + kChunk - 1) / kChunk;
    float sum = 0.f;
    for (int64_t c = lane; c < chunks; c += 32) sum += partials[table.first_block[t] + c];
    sum = warp_reduce(sum, SumCombine());
    if (lane == 0) norms[table.norm_index[t]] = sqrtf(sum);
}

// One table's norms: its chunks' partial sums (into scratch memory), then each tensor's norm.
template <typename P, typename Table>
cudaError_t launch_norm_table(const Table &table, int64_t blocks, float *norms, cudaStream_t stream) {
    float *partials = nullptr;
    cudaError_t err = lab_scratch_alloc(reinterpret_cast<void **>(&partials), sizeof(float) * blocks, stream);
    if (err != cudaSuccess) return err;
    sum_of_squares_kernel<P, Table>
        <<<static_cast<unsigned int>(blocks), kMtThreads, 0, stream>>>(table, partials);
    err = cudaGetLastError();
    if (err == cudaSuccess) {
        const unsigned int grid =
            static_cast<unsigned int>((table.n_tensors + kNormsPerBlock - 1) / kNormsPerBlock);
        finish_norms_kernel<Table><<<grid, 32 * kNormsPerBlock, 0, stream>>>(table, partials, norms);
        err = cudaGetLastError();
    }
    const cudaError_t freed = cudaFreeAsync(partials, stream);
    return err != cudaSuccess ? err : freed;
}

template <typename Op, typename P, typename S, typename Table>
cudaError_t launch_tables(const lab_multi_tensor_launch &launch, int first, int last, cudaStream_t stream) {
    Table table;
    int64_t blocks = 0;
    table.n_tensors = 0;
    auto flush = [&]() -> cudaError_t {
        cudaError_t err = cudaSuccess;
        if (table.n_tensors > 0) {
            if constexpr (IsReduction<typename Op::StepType>::value) {
                err = launch_norm_table<P, Table>(table, blocks, launch.norms, stream);
            } else {
                const unsigned int grid = static_cast<unsigned int>(blocks);
                multi_tensor_kernel<Op, P, S, Table><<<grid, kMtThreads, 0, stream>>>(table, launch.params);
                err = cudaGetLastError();
            }
        }
        table.n_tensors = 0;
        blocks = 0;
        return err;
    };
    for (int i = first; i < last; ++i) {
        const int64_t n = launch.sizes[i];
        if (n == 0) continue;
        const int64_t chunks = (n + kChunk - 1) / kChunk;
        // one launch's grid stays under 2^31 blocks (x dimension) and first_block in int32
        if (table.n_tensors == Table::kMaxTensors || blocks + chunks > INT32_MAX) {
            cudaError_t err = flush();
            if (err != cudaSuccess) return err;
        }
        const int t = table.n_tensors++;
        for (int k = 0; k < launch.n_lists; ++k) table.ptrs[k][t] = launch.ptrs[k][i];
        table.sizes[t] = n;
        table.first_block[t] = static_cast<int32_t>(blocks);
        table.norm_index[t] = launch.norm_index ? launch.norm_index[i] : 0;
        blocks += chunks;
    }
    return flush();
}

// Whole large tables while many tensors remain, then the small table for the rest: a list of a
// few tensors sends a 4 KB table, not a 16 KB one.
template <typename Op, typename P, typename S>
cudaError_t launch_op(const lab_multi_tensor_launch &launch, cudaStream_t stream) {
    const int n = launch.n_tensors;
    int large_end = 0;
    if (launch.large_params && n > SmallTable::kMaxTensors) {
        large_end =
            n - (n % LargeTable::kMaxTensors <= SmallTable::kMaxTensors ? n % LargeTable::kMaxTensors : 0);
    }
    cudaError_t err = cudaSuccess;
    if (large_end > 0) err = launch_tables<Op, P, S, LargeTable>(launch, 0, large_end, stream);
    if (err == cudaSuccess && large_end < n) {
        err = launch_tables<Op, P, S, SmallTable>(launch, large_end, n, stream);
    }
    return err;
}

// float16 / bfloat16 / float32 for the lists; state lists either the same type or float32.
template <typename Fn> cudaError_t visit_mt_type(lab_dtype dtype, Fn &&fn) {
    switch (dtype) {
    case LAB_FLOAT16: return fn(TypeTag<__half>{});
    case LAB_BFLOAT16: return fn(TypeTag<__nv_bfloat16>{});
    case LAB_FLOAT32: return fn(TypeTag<float>{});
    default: return cudaErrorInvalidValue;
    }
}

template <typename Op>
cudaError_t launch_with_types(const lab_multi_tensor_launch &launch, cudaStream_t stream) {
    return visit_mt_type(launch.dtype, [&](auto tag) {
        using P = typename decltype(tag)::type;
        if constexpr (Op::kState != 0) {
            if (launch.state_dtype == LAB_FLOAT32 && !std::is_same_v<P, float>) {
                return launch_op<Op, P, float>(launch, stream);
            }
        }
        if (launch.state_dtype != launch.dtype) return cudaErrorInvalidValue;
        return launch_op<Op, P, P>(launch, stream);
    });
}

// Norms of the launch's tensors (the caller zeroed `norms` first: an empty tensor's norm is 0).
cudaError_t launch_norms(const lab_multi_tensor_launch &launch, cudaStream_t stream) {
    return visit_mt_type(launch.dtype, [&](auto tag) {
        using P = typename decltype(tag)::type;
        return launch_op<ListOp<SumOfSquares, 1, 0x1, 0x0, 0x0>, P, P>(launch, stream);
    });
}

template <typename Op>
cudaError_t launch_list_op(const lab_multi_tensor_launch &launch, cudaStream_t stream) {
    if constexpr (IsReduction<typename Op::StepType>::value) {
        return launch_norms(launch, stream);
    } else {
        return launch_with_types<Op>(launch, stream);
    }
}

} // namespace
} // namespace lab

extern "C" cudaError_t lab_launch_multi_tensor(const lab_multi_tensor_launch *launch, cudaStream_t stream) {
    using namespace lab;
    switch (launch->op) {
#define LAB_LIST_OP(id, step, lists, reads, writes, state, elementwise)                                      \
    case LAB_MT_##id: return launch_list_op<ListOp<step, lists, reads, writes, state>>(*launch, stream);
#include "list_ops.def"
#undef LAB_LIST_OP
    default: return cudaErrorInvalidValue;
    }
}
