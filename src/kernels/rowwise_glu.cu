// rowwise_glu.cu - the SwiGLU and GeGLU backwards for each float dtype: the GLU unit of the
// row-wise ops.
#include "rowwise_glu.cuh"
#include "rowwise_launcher.cuh"

namespace lab {
namespace {

// Threads per block and packets per thread: the elementwise kernels' tuning for transcendental
// ops (elementwise_vectorized.cuh), two packets of each of three inputs. Four ran 30% slower
// (bench/results/2026-12-04-h200-glu-packets.txt).
constexpr int kGluThreads = 128, kGluPackets = 2;

// The packet path's operands, where it applies: every operand contiguous along the row and 16-byte
// aligned (rows_vectorizable), rows in one dimension of strides, whole packets a row, and a packet
// count that 32 bits hold.
template <typename T> bool glu_packets(const lab_rowwise_launch &l, GluPackets *p) {
    constexpr int V = Packed16<T>::kCount;
    if (l.lead_ndim > 1 || l.n % V != 0 || !rows_vectorizable<T>(l)) return false;
    const int64_t per_row = l.n / V, total = l.rows * per_row;
    if (total > INT32_MAX - int64_t(kGluThreads) * kGluPackets * 65536) return false;
    const int roles[6] = {LAB_ROW_GRAD, LAB_ROW_X, LAB_ROW_UP, LAB_ROW_OUT, LAB_ROW_GRAD_UP, LAB_ROW_PRODUCT};
    for (int k = 0; k < 6; k++) p->row_stride[k] = l.lead_ndim == 1 ? l.lead_strides[roles[k]][0] : 0;
    p->grad_out = l.row_data[LAB_ROW_GRAD], p->gate = l.row_data[LAB_ROW_X], p->up = l.row_data[LAB_ROW_UP];
    p->grad_gate = l.row_data[LAB_ROW_OUT], p->grad_up = l.row_data[LAB_ROW_GRAD_UP];
    p->product = l.row_data[LAB_ROW_PRODUCT];
    p->packets_per_row = uint32_t(per_row), p->total = uint32_t(total);
    return true;
}

template <bool kGelu, typename T> cudaError_t launch_glu(const lab_rowwise_launch &l, cudaStream_t stream) {
    GluPackets p;
    if (!glu_packets<T>(l, &p)) {
        return l.row_data[LAB_ROW_PRODUCT] ? launch_rows<GluBackward<kGelu, true>, T>(l, stream)
                                           : launch_rows<GluBackward<kGelu, false>, T>(l, stream);
    }
    if (p.total == 0) return cudaSuccess;
    const int64_t per_block = int64_t(kGluThreads) * kGluPackets;
    const int64_t blocks = std::min<int64_t>((int64_t(p.total) + per_block - 1) / per_block, 65536);
    if (p.product) {
        glu_backward_packets<kGelu, true, T, kGluThreads, kGluPackets>
            <<<unsigned(blocks), kGluThreads, 0, stream>>>(p);
    } else {
        glu_backward_packets<kGelu, false, T, kGluThreads, kGluPackets>
            <<<unsigned(blocks), kGluThreads, 0, stream>>>(p);
    }
    return cudaGetLastError();
}

} // namespace

cudaError_t launch_glu_rows(const lab_rowwise_launch &l, cudaStream_t stream) {
    return visit_row_type(l.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return l.op == LAB_ROW_GEGLU_BACKWARD ? launch_glu<true, T>(l, stream)
                                              : launch_glu<false, T>(l, stream);
    });
}

} // namespace lab
