// elementwise_strided_vectorized.cu - one dtype, strided over 16-byte packets: the innermost
// dimension is contiguous for every operand, or broadcast (stride 0) for some inputs, so index
// math is paid once per packet instead of once per element and loads and stores are 16 bytes wide.
// This is the path of a bias row added to a matrix; dispatch/elementwise_kind.c decides when it applies.
#include "dispatch.cuh"
#include "elementwise_strided.cuh"

namespace lab {
namespace {

// One 16-byte packet per item; an input broadcast along the inner dimension (bit k+1 of
// broadcast_inner) loads one element and repeats it across the packet's lanes.
template <typename T, typename Op, int kInputs> struct PacketAccess {
    using C = compute_t<T>;
    using Loaded = Packed16<T>;
    static constexpr int kLanes = Loaded::kCount;
    OperandPtrs<kInputs + 1> ptrs;
    unsigned int broadcast_inner;
    OpParams<C> params;

    __device__ __forceinline__ Loaded load(int k, int64_t offset) const {
        const char *at = ptrs.p[k + 1] + offset;
        if (!(broadcast_inner & (2u << k))) return *reinterpret_cast<const Loaded *>(at);
        Loaded packet;
        const T v = *reinterpret_cast<const T *>(at);
#pragma unroll
        for (int lane = 0; lane < kLanes; ++lane) packet.v[lane] = v;
        return packet;
    }
    __device__ __forceinline__ void store(int64_t offset, const Loaded (&inputs)[kInputs]) const {
        Loaded result;
#pragma unroll
        for (int lane = 0; lane < kLanes; ++lane) {
            C v[3];
#pragma unroll
            for (int k = 0; k < kInputs; ++k) v[k] = load_as_compute(inputs[k].v[lane]);
            result.v[lane] = store_from_compute<T>(apply<C, Op, kInputs>(Op{}, v, params));
        }
        *reinterpret_cast<Loaded *>(ptrs.p[0] + offset) = result;
    }
};

template <typename T, typename Op, int kInputs>
__global__ void __launch_bounds__(kThreads)
    elementwise_strided_vectorized(OperandPtrs<kInputs + 1> ptrs, StridedLayout<kInputs + 1> layout,
                                   int64_t n_packets, unsigned int broadcast_inner,
                                   OpParams<compute_t<T>> params) {
    strided_loop<kInputs>(PacketAccess<T, Op, kInputs>{ptrs, broadcast_inner, params}, layout, n_packets);
}

} // namespace

cudaError_t launch_strided_vectorized(const lab_elementwise_launch &launch, cudaStream_t stream) {
    return visit_op(launch.op, [&](auto op, auto n_inputs, auto integers) {
        return visit_storage_type<decltype(integers)::value>(launch.dtypes[0], [&](auto tag) {
            using T = typename decltype(tag)::type;
            constexpr int kOperands = decltype(n_inputs)::value + 1;
            constexpr int kLanes = Packed16<T>::kCount;
            // The same iteration space counted in packets: the inner dimension shrinks by kLanes and
            // a contiguous operand steps 16 bytes per packet; a broadcast one keeps stride 0.
            lab_elementwise_launch packets = launch;
            const int inner = launch.ndim - 1;
            packets.shape[inner] = launch.shape[inner] / kLanes;
            packets.numel = launch.numel / kLanes;
            unsigned int broadcast_inner = 0;
            OperandPtrs<kOperands> ptrs{};
            for (int k = 0; k < kOperands; ++k) {
                ptrs.p[k] = launch.data[k];
                if (launch.byte_strides[k][inner] == 0) {
                    broadcast_inner |= 1u << k;
                } else {
                    packets.byte_strides[k][inner] = 16;
                }
            }
            elementwise_strided_vectorized<T, decltype(op), kOperands - 1>
                <<<blocks_for(packets.numel), kThreads, 0, stream>>>(ptrs, make_layout<kOperands>(packets),
                                                                     packets.numel, broadcast_inner,
                                                                     to_params<compute_t<T>>(launch.scalars));
            return cudaGetLastError();
        });
    });
}

} // namespace lab
