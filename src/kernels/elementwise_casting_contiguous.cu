// elementwise_casting_contiguous.cu - mixed dtypes on contiguous operands (an fp16 activation plus
// an fp32 residual under autocast, or copy() as a cast), at the speed of the one-dtype paths.
//
// The strided casting path converts one element at a time behind a switch over the operand's
// run-time dtype, so each thread has a few bytes in flight and the bandwidth halves. Here each
// thread moves groups of kGroup consecutive elements: every operand's group is loaded raw with
// 16-byte loads chosen by its item size alone (a 4-way switch, uniform across the grid), then the
// elements are converted from registers. Still one kernel per (op, compute type C): no template
// per dtype combination. The plan takes this path when every operand is contiguous and starts on
// a group boundary (aligned to kGroup * item size); the last n % kGroup elements go one at a time.
#include "casting.cuh"
#include "dispatch.cuh"
#include "elementwise.cuh"

namespace lab {
namespace {

constexpr int kGroup = 8;           // elements per group: 16 bytes of a 2-byte dtype
constexpr int kGroupsPerThread = 2; // loaded before any is converted

// kGroup elements of one operand, as raw bits: 8 bytes (1-byte dtypes) to 64 bytes (8-byte ones).
struct RawGroup {
    uint4 q[4];
};

__device__ __forceinline__ void load_group(const char *p, int itemsize, RawGroup &r) {
    const uint4 *v = reinterpret_cast<const uint4 *>(p);
    switch (itemsize) {
    case 1: {
        const uint2 half = *reinterpret_cast<const uint2 *>(p);
        r.q[0] = make_uint4(half.x, half.y, 0u, 0u);
        break;
    }
    case 2: r.q[0] = v[0]; break;
    case 4:
        r.q[0] = v[0];
        r.q[1] = v[1];
        break;
    default:
        r.q[0] = v[0];
        r.q[1] = v[1];
        r.q[2] = v[2];
        r.q[3] = v[3];
        break;
    }
}

__device__ __forceinline__ void store_group(char *p, int itemsize, const RawGroup &r) {
    uint4 *v = reinterpret_cast<uint4 *>(p);
    switch (itemsize) {
    case 1: *reinterpret_cast<uint2 *>(p) = make_uint2(r.q[0].x, r.q[0].y); break;
    case 2: v[0] = r.q[0]; break;
    case 4:
        v[0] = r.q[0];
        v[1] = r.q[1];
        break;
    default:
        v[0] = r.q[0];
        v[1] = r.q[1];
        v[2] = r.q[2];
        v[3] = r.q[3];
        break;
    }
}

// 32-bit word w of a group; w is a constant once the element loop is unrolled, so the group
// stays in registers.
__device__ __forceinline__ uint32_t word(const RawGroup &r, int w) {
    const uint4 &q = r.q[w >> 2];
    switch (w & 3) {
    case 0: return q.x;
    case 1: return q.y;
    case 2: return q.z;
    default: return q.w;
    }
}
__device__ __forceinline__ void or_word(RawGroup &r, int w, uint32_t bits) {
    uint4 &q = r.q[w >> 2];
    switch (w & 3) {
    case 0: q.x |= bits; break;
    case 1: q.y |= bits; break;
    case 2: q.z |= bits; break;
    default: q.w |= bits; break;
    }
}

// Each bit-level reading and writing below sits inside a switch over the dtype that runs once per
// group, not once per element: the element loop inside each case is unrolled with constant word
// indexes, so the group stays in registers and the switch costs a few instructions per 8 elements.

// The kGroup elements of a group of dtype `dtype`, in the compute type C.
template <typename C>
__device__ __forceinline__ void unpack(const RawGroup &r, lab_dtype dtype, C (&v)[kGroup]) {
    switch (dtype) {
    case LAB_FLOAT16:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            const auto bits = static_cast<unsigned short>(word(r, e >> 1) >> (16 * (e & 1)));
            v[e] = static_cast<C>(__half2float(__ushort_as_half(bits)));
        }
        break;
    case LAB_BFLOAT16:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            const auto bits = static_cast<unsigned short>(word(r, e >> 1) >> (16 * (e & 1)));
            v[e] = static_cast<C>(__bfloat162float(__ushort_as_bfloat16(bits)));
        }
        break;
    case LAB_FLOAT32:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) v[e] = static_cast<C>(__uint_as_float(word(r, e)));
        break;
    case LAB_FLOAT64:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            v[e] = static_cast<C>(
                __hiloint2double(static_cast<int>(word(r, 2 * e + 1)), static_cast<int>(word(r, 2 * e))));
        }
        break;
    case LAB_INT8:
#pragma unroll
        for (int e = 0; e < kGroup; ++e)
            v[e] = static_cast<C>(static_cast<int8_t>(word(r, e >> 2) >> (8 * (e & 3))));
        break;
    case LAB_UINT8:
#pragma unroll
        for (int e = 0; e < kGroup; ++e)
            v[e] = static_cast<C>(static_cast<uint8_t>(word(r, e >> 2) >> (8 * (e & 3))));
        break;
    case LAB_INT16:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            v[e] = static_cast<C>(static_cast<int16_t>(word(r, e >> 1) >> (16 * (e & 1))));
        }
        break;
    case LAB_INT32:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) v[e] = static_cast<C>(static_cast<int32_t>(word(r, e)));
        break;
    default: // LAB_INT64
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            const uint64_t bits = (static_cast<uint64_t>(word(r, 2 * e + 1)) << 32) | word(r, 2 * e);
            v[e] = static_cast<C>(static_cast<int64_t>(bits));
        }
        break;
    }
}

// A group of dtype `dtype` holding v, converted.
template <typename C>
__device__ __forceinline__ void pack(RawGroup &r, lab_dtype dtype, const C (&v)[kGroup]) {
    r = RawGroup{};
    switch (dtype) {
    case LAB_FLOAT16:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            or_word(r, e >> 1,
                    static_cast<uint32_t>(__half_as_ushort(convert_to<__half>(v[e]))) << (16 * (e & 1)));
        }
        break;
    case LAB_BFLOAT16:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            const uint32_t bits = __bfloat16_as_ushort(convert_to<__nv_bfloat16>(v[e]));
            or_word(r, e >> 1, bits << (16 * (e & 1)));
        }
        break;
    case LAB_FLOAT32:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) or_word(r, e, __float_as_uint(convert_to<float>(v[e])));
        break;
    case LAB_FLOAT64:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            const double d = convert_to<double>(v[e]);
            or_word(r, 2 * e, static_cast<uint32_t>(__double2loint(d)));
            or_word(r, 2 * e + 1, static_cast<uint32_t>(__double2hiint(d)));
        }
        break;
    case LAB_INT8:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            const uint32_t bits = static_cast<uint8_t>(convert_to<int8_t>(v[e]));
            or_word(r, e >> 2, bits << (8 * (e & 3)));
        }
        break;
    case LAB_UINT8:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            or_word(r, e >> 2, static_cast<uint32_t>(convert_to<uint8_t>(v[e])) << (8 * (e & 3)));
        }
        break;
    case LAB_INT16:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            const uint32_t bits = static_cast<uint16_t>(convert_to<int16_t>(v[e]));
            or_word(r, e >> 1, bits << (16 * (e & 1)));
        }
        break;
    case LAB_INT32:
#pragma unroll
        for (int e = 0; e < kGroup; ++e) or_word(r, e, static_cast<uint32_t>(convert_to<int32_t>(v[e])));
        break;
    default: // LAB_INT64
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            const uint64_t bits = static_cast<uint64_t>(convert_to<int64_t>(v[e]));
            or_word(r, 2 * e, static_cast<uint32_t>(bits));
            or_word(r, 2 * e + 1, static_cast<uint32_t>(bits >> 32));
        }
        break;
    }
}

template <int kOperands> struct Itemsizes {
    int bytes[kOperands];
};

template <typename C, typename Op, int kInputs>
__global__ void __launch_bounds__(kThreads)
    elementwise_casting_contiguous(CastingOperands<kInputs + 1> operands, Itemsizes<kInputs + 1> sizes,
                                   int64_t n, OpParams<C> params) {
    const int64_t n_groups = n / kGroup;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * kGroupsPerThread + threadIdx.x;
    RawGroup in[kGroupsPerThread][kInputs];
#pragma unroll
    for (int u = 0; u < kGroupsPerThread; ++u) {
        const int64_t g = first + static_cast<int64_t>(u) * kThreads;
        if (g >= n_groups) continue;
#pragma unroll
        for (int k = 0; k < kInputs; ++k)
            load_group(operands.p[k + 1] + g * kGroup * sizes.bytes[k + 1], sizes.bytes[k + 1], in[u][k]);
    }
#pragma unroll
    for (int u = 0; u < kGroupsPerThread; ++u) {
        const int64_t g = first + static_cast<int64_t>(u) * kThreads;
        if (g >= n_groups) continue;
        C values[kInputs][kGroup], results[kGroup];
#pragma unroll
        for (int k = 0; k < kInputs; ++k) unpack<C>(in[u][k], operands.dtypes[k + 1], values[k]);
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
            C v[3];
#pragma unroll
            for (int k = 0; k < kInputs; ++k) v[k] = values[k][e];
            results[e] = apply<C, Op, kInputs>(Op{}, v, params);
        }
        RawGroup out;
        pack<C>(out, operands.dtypes[0], results);
        store_group(operands.p[0] + g * kGroup * sizes.bytes[0], sizes.bytes[0], out);
    }
    if (blockIdx.x == 0) { // the last n % kGroup elements, one at a time
        for (int64_t i = n_groups * kGroup + threadIdx.x; i < n; i += kThreads) {
            C v[3];
#pragma unroll
            for (int k = 0; k < kInputs; ++k)
                v[k] = load_converted<C>(operands.p[k + 1] + i * sizes.bytes[k + 1], operands.dtypes[k + 1]);
            store_converted<C>(operands.p[0] + i * sizes.bytes[0], operands.dtypes[0],
                               apply<C, Op, kInputs>(Op{}, v, params));
        }
    }
}

} // namespace

cudaError_t launch_casting_contiguous(const lab_elementwise_launch &launch, cudaStream_t stream) {
    return visit_op(launch.op, [&](auto op, auto n_inputs, auto integers) {
        return visit_compute_type<decltype(integers)::value>(launch.compute, [&](auto tag) {
            using C = typename decltype(tag)::type;
            constexpr int kOperands = decltype(n_inputs)::value + 1;
            const CastingOperands<kOperands> operands = casting_operands<kOperands>(launch);
            Itemsizes<kOperands> sizes{};
            for (int k = 0; k < kOperands; ++k) sizes.bytes[k] = static_cast<int>(launch.byte_strides[k][0]);
            const int64_t groups = launch.numel / kGroup;
            const int64_t per_block = static_cast<int64_t>(kThreads) * kGroupsPerThread;
            const int64_t blocks = groups > 0 ? (groups + per_block - 1) / per_block : 1;
            elementwise_casting_contiguous<C, decltype(op), kOperands - 1>
                <<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(operands, sizes, launch.numel,
                                                                             to_params<C>(launch.scalars));
            return cudaGetLastError();
        });
    });
}

} // namespace lab
