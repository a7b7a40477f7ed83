// rowwise_glu.cu - the SwiGLU and GeGLU backwards for each float dtype: the GLU unit of the
// row-wise ops.
#include "rowwise_glu.cuh"
#include "rowwise_launcher.cuh"

namespace lab {

cudaError_t launch_glu_rows(const lab_rowwise_launch &l, cudaStream_t stream) {
    return visit_row_type(l.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return l.op == LAB_ROW_GEGLU_BACKWARD ? launch_rows<GluBackward<true>, T>(l, stream)
                                              : launch_rows<GluBackward<false>, T>(l, stream);
    });
}

} // namespace lab
