// rowwise_norms.cu - layer_norm and rms_norm, forward and backward (with the deterministic weight
// and bias gradients), for each float dtype: the norms' compile unit of the row-wise ops.
#include "rowwise_launcher.cuh"

namespace lab {

cudaError_t launch_norm_rows(const lab_rowwise_launch &l, cudaStream_t stream) {
    return visit_row_type(l.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (l.op == LAB_ROW_LAYER_NORM) return launch_rows<NormForward<true>, T>(l, stream);
        if (l.op == LAB_ROW_RMS_NORM) return launch_rows<NormForward<false>, T>(l, stream);
        if (l.op == LAB_ROW_RMS_NORM_BACKWARD) return launch_rows<NormBackward<false, false>, T>(l, stream);
        return l.col_data[LAB_COL_GRAD_BIAS] ? launch_rows<NormBackward<true, true>, T>(l, stream)
                                             : launch_rows<NormBackward<true, false>, T>(l, stream);
    });
}

} // namespace lab
