// elementwise_kernel.cuh - the loops behind lab.ElementwiseKernel. NVRTC compiles this header with
// the code lab/_elementwise_kernel.py generates from a CuPy-style kernel ("float32 x, float32 y",
// "float32 z", "z = (x + y) * 0.5f"): that code defines an Op - the operation as a function of one
// element of every operand, the operands' types, the scalar arguments - and two extern "C" kernels
// that call vectorized() and strided() below. The C side (src/dispatch/elementwise_kernel_kind.c)
// plans the call with lab's iterator and picks one of the two.
//
// Every operand has a storage type (the array's dtype) and a parameter type (what the operation
// sees, the kernel's declared type): loads convert storage -> parameter, stores parameter ->
// storage, so an operation written for float32 runs on float16 arrays. Both loops issue every load
// of a thread before its first use, as lab's built-in kernels do (elementwise_vectorized.cuh,
// elementwise_strided.cuh): bytes in flight hide HBM latency.
#pragma once

#include "dtype_traits.cuh"
#include "indexing.cuh"

namespace lab {
namespace jit {

// The little of <tuple>, <utility> and <type_traits> these loops need, written out: including
// libcu++'s headers costs NVRTC about a second a compile (measured: 1.06 s for <cuda/std/type_traits>
// alone against 0.04 s for everything else here), and every new combination of types is a compile.
template <typename A, typename B> constexpr bool kSame = false;
template <typename A> constexpr bool kSame<A, A> = true;

template <int... K> struct Indices {};
template <int N, int... K> struct MakeIndices : MakeIndices<N - 1, N - 1, K...> {};
template <int... K> struct MakeIndices<0, K...> {
    using type = Indices<K...>;
};

// A tuple: one base class a member, each told apart by its index; get<K> finds the K-th by
// deducing its type from the base.
template <int K, typename T> struct Slot {
    T value;
};
template <typename Is, typename... T> struct TupleOf;
template <int... K, typename... T> struct TupleOf<Indices<K...>, T...> : Slot<K, T>... {};
template <typename... T> using Tuple = TupleOf<typename MakeIndices<sizeof...(T)>::type, T...>;
template <int K, typename T> __device__ __forceinline__ T &get(Slot<K, T> &slot) { return slot.value; }

constexpr int kThreads = 128; // threads per block, both kernels
constexpr int kItemsPerThread =
    2; // vectorized: items per thread (the built-in's tuning for memory-bound ops)
constexpr int kElementsPerThread = 4; // strided: elements per thread

// What an operand is to the operation: an input, an output it only assigns, or an output it may
// read or leave unassigned (`z += x`, `if (x > 0) z = x;`), which is loaded first so that what the
// operation does not write keeps its value - CuPy's semantics, where an output is a reference.
enum Role { kInput, kOutput, kOutputLoaded };

template <typename StorageType, typename ParamType, int kRole> struct Operand {
    using Storage = StorageType;
    using Param = ParamType;
    static constexpr bool kLoaded = kRole != kOutput;
    static constexpr bool kStored = kRole != kInput;
};
template <typename... O> struct Operands {
    static constexpr int kCount = sizeof...(O);
};

template <int kCount> struct Pointers {
    char *p[kCount];
};

// CuPy's `_ind.size()`: how many elements the call walks.
struct Indexer {
    long long n;
    __device__ __forceinline__ long long size() const { return n; }
};

template <typename T> constexpr bool kIsHalf = kSame<T, __half> || kSame<T, __nv_bfloat16>;

// 8-byte types: converted to a half type through double, so the value rounds once.
template <typename T> constexpr bool kIsWide = sizeof(T) == 8;

// One value from one type to another. Half types go through float (or double, so a double
// rounds once); everything else is a C++ conversion.
template <typename To, typename From> __device__ __forceinline__ To convert(const From &v) {
    if constexpr (kSame<To, From>) {
        return v;
    } else if constexpr (kSame<To, __half>) {
        if constexpr (kIsWide<From>) {
            return __double2half(static_cast<double>(v));
        } else {
            return __float2half_rn(static_cast<float>(load_as_compute(v)));
        }
    } else if constexpr (kSame<To, __nv_bfloat16>) {
        if constexpr (kIsWide<From>) {
            return __double2bfloat16(static_cast<double>(v));
        } else {
            return __float2bfloat16_rn(static_cast<float>(load_as_compute(v)));
        }
    } else {
        return static_cast<To>(load_as_compute(v));
    }
}

// The elements of one vectorized item: one 16-byte packet of the narrowest operand, so the wider
// ones move several packets an item.
template <typename... O> __host__ __device__ constexpr int vector_elements(Operands<O...>) {
    int narrowest = 16;
    ((narrowest = sizeof(typename O::Storage) < narrowest ? int(sizeof(typename O::Storage)) : narrowest),
     ...);
    return 16 / narrowest;
}

template <typename T, int kCount> struct Values {
    T v[kCount];
};

template <typename O, int kVector>
__device__ __forceinline__ void load_item(Values<typename O::Param, kVector> &values, const char *base,
                                          int64_t item) {
    if constexpr (O::kLoaded) {
        using Packet = Packed16<typename O::Storage>;
        constexpr int kPackets = kVector / Packet::kCount;
        const Packet *at = reinterpret_cast<const Packet *>(base) + item * kPackets;
        Packet raw[kPackets];
#pragma unroll
        for (int j = 0; j < kPackets; ++j) raw[j] = at[j];
#pragma unroll
        for (int l = 0; l < kVector; ++l)
            values.v[l] = convert<typename O::Param>(raw[l / Packet::kCount].v[l % Packet::kCount]);
    }
}

template <typename O, int kVector>
__device__ __forceinline__ void store_item(const Values<typename O::Param, kVector> &values, char *base,
                                           int64_t item) {
    if constexpr (O::kStored) {
        using Packet = Packed16<typename O::Storage>;
        constexpr int kPackets = kVector / Packet::kCount;
        Packet raw[kPackets];
#pragma unroll
        for (int l = 0; l < kVector; ++l)
            raw[l / Packet::kCount].v[l % Packet::kCount] = convert<typename O::Storage>(values.v[l]);
        Packet *at = reinterpret_cast<Packet *>(base) + item * kPackets;
#pragma unroll
        for (int j = 0; j < kPackets; ++j) at[j] = raw[j];
    }
}

template <typename O> __device__ __forceinline__ void load_element(typename O::Param &value, const char *at) {
    if constexpr (O::kLoaded) {
        value = convert<typename O::Param>(*reinterpret_cast<const typename O::Storage *>(at));
    }
}

template <typename O>
__device__ __forceinline__ void store_element(const typename O::Param &value, char *at) {
    if constexpr (O::kStored) {
        *reinterpret_cast<typename O::Storage *>(at) = convert<typename O::Storage>(value);
    }
}

// The position counter: where the operation uses `i` (its element's index in C order over the
// broadcast shape), the plan carries it as one more operand of 1-byte elements starting at
// "address" 0, so the iterator's reordering, flipping and merging move it like any array's and
// its offset at an element is that element's index.
template <typename Op, int kPointers>
__device__ __forceinline__ long long position(const Pointers<kPointers> &p, int64_t offset) {
    if constexpr (Op::kUsesIndex) {
        return static_cast<long long>(reinterpret_cast<unsigned long long>(p.p[kPointers - 1])) + offset;
    } else {
        return 0;
    }
}

template <typename Op, int kPointers, typename... O, int... K>
__device__ __forceinline__ void vectorized_loop(const Op &op, const Pointers<kPointers> &p, int64_t n,
                                                Operands<O...> operands, Indices<K...>) {
    constexpr int kVector = vector_elements(operands);
    const int64_t n_items = n / kVector;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * kItemsPerThread + threadIdx.x;
    const Indexer indexer{n};
    Tuple<Values<typename O::Param, kVector>...> values[kItemsPerThread];
#pragma unroll
    for (int u = 0; u < kItemsPerThread; ++u) {
        const int64_t item = first + static_cast<int64_t>(u) * kThreads;
        if (item < n_items) (load_item<O, kVector>(get<K>(values[u]), p.p[K], item), ...);
    }
#pragma unroll
    for (int u = 0; u < kItemsPerThread; ++u) {
        const int64_t item = first + static_cast<int64_t>(u) * kThreads;
        if (item < n_items) {
#pragma unroll
            for (int l = 0; l < kVector; ++l)
                op(get<K>(values[u]).v[l]..., position<Op>(p, item * kVector + l), indexer);
            (store_item<O, kVector>(get<K>(values[u]), p.p[K], item), ...);
        }
    }
    // the last n % kVector elements, one a thread of block 0
    const int64_t e = n_items * kVector + threadIdx.x;
    if (blockIdx.x == 0 && e < n) {
        Tuple<typename O::Param...> element;
        (load_element<O>(get<K>(element), p.p[K] + e * sizeof(typename O::Storage)), ...);
        op(get<K>(element)..., position<Op>(p, e), indexer);
        (store_element<O>(get<K>(element), p.p[K] + e * sizeof(typename O::Storage)), ...);
    }
}

template <typename Op, int kPointers, typename... O, int... K>
__device__ __forceinline__ void strided_loop(const Op &op, const Pointers<kPointers> &p,
                                             const StridedLayout<kPointers> &layout, int64_t n,
                                             Operands<O...>, Indices<K...>) {
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * kElementsPerThread + threadIdx.x;
    const Indexer indexer{n};
    Tuple<typename O::Param...> values[kElementsPerThread];
    int64_t offsets[kElementsPerThread][kPointers];
#pragma unroll
    for (int u = 0; u < kElementsPerThread; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kThreads;
        if (i < n) {
            byte_offsets(layout, i, offsets[u]);
            (load_element<O>(get<K>(values[u]), p.p[K] + offsets[u][K]), ...);
        }
    }
#pragma unroll
    for (int u = 0; u < kElementsPerThread; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kThreads;
        if (i < n) {
            op(get<K>(values[u])..., position<Op>(p, offsets[u][kPointers - 1]), indexer);
            (store_element<O>(get<K>(values[u]), p.p[K] + offsets[u][K]), ...);
        }
    }
}

// The two kernels' bodies. kPointers: the operands, plus the position counter when Op::kUsesIndex.
// vectorized: every operand contiguous and 16-byte aligned (and the counter contiguous).
template <typename Op, int kPointers>
__device__ __forceinline__ void vectorized(const Op &op, const Pointers<kPointers> &p, int64_t n) {
    using List = typename Op::Operands;
    vectorized_loop(op, p, n, List{}, typename MakeIndices<List::kCount>::type{});
}

template <typename Op, int kPointers>
__device__ __forceinline__ void strided(const Op &op, const Pointers<kPointers> &p,
                                        const StridedLayout<kPointers> &layout, int64_t n) {
    using List = typename Op::Operands;
    strided_loop(op, p, layout, n, List{}, typename MakeIndices<List::kCount>::type{});
}

} // namespace jit
} // namespace lab
