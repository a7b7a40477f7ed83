// rowwise_softmax.cu - softmax and log_softmax, forward and backward, for each float dtype (one
// compile unit of the row-wise ops, so nvcc builds the units in parallel).
#include "rowwise_launcher.cuh"

namespace lab {

cudaError_t launch_softmax_rows(const lab_rowwise_launch &l, cudaStream_t stream) {
    const bool forward = l.op == LAB_ROW_SOFTMAX || l.op == LAB_ROW_LOG_SOFTMAX;
    return visit_row_type(l.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return forward ? launch_rows<SoftmaxForward, T>(l, stream)
                       : launch_rows<SoftmaxBackward, T>(l, stream);
    });
}

} // namespace lab
