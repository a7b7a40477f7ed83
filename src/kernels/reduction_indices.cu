// reduction_indices.cu - the reductions that produce an index (argmax, argmin), each instantiated
// for every input dtype, and the extern "C" launcher of every reduction.
#include "reduction.cuh"

namespace lab {

// Token pasting on reduce_ops.def's `index_output` column (0 or 1) keeps one half's rows:
#define LAB_REDUCE_CASE(id, reducer, integers)                                                               \
    case LAB_REDUCE_##id:                                                                                    \
        return visit_storage_type<bool(integers)>(launch.in_dtype, [&](auto tag) {                           \
            return launch_reducer<reducer<typename decltype(tag)::type>>(launch, stream);                    \
        });
#define LAB_REDUCE_OP(id, reducer, integers, index_output)                                                   \
    LAB_REDUCE_ROW_##index_output(id, reducer, integers)
#define LAB_REDUCE_ROW_0(id, reducer, integers)
#define LAB_REDUCE_ROW_1(id, reducer, integers) LAB_REDUCE_CASE(id, reducer, integers)

cudaError_t launch_index_reduction(const lab_reduction_launch &launch, cudaStream_t stream) {
    switch (launch.op) {
#include "reduce_ops.def"
    default: return cudaErrorInvalidValue;
    }
}

} // namespace lab

extern "C" cudaError_t lab_launch_reduction(const lab_reduction_launch *launch, cudaStream_t stream) {
    if (launch->n_outputs == 0) return cudaSuccess;
    const bool index_output = launch->op == LAB_REDUCE_ARGMAX || launch->op == LAB_REDUCE_ARGMIN;
    return index_output ? lab::launch_index_reduction(*launch, stream)
                        : lab::launch_value_reduction(*launch, stream);
}
