// reduction_indices.cu - the reductions that produce an index (argmax, argmin), each instantiated
// for every input dtype, and the extern "C" launcher of every reduction.
#include "reduction.cuh"

namespace lab {

#define LAB_REDUCE_ROW_0(id, reducer, integers)
#define LAB_REDUCE_ROW_1(id, reducer, integers) LAB_REDUCE_CASE(id, reducer, integers)

cudaError_t launch_index_reduction(const lab_reduction_launch &launch, cudaStream_t stream) {
    switch (launch.op) {
#include "reduce_ops.def"
    default: return cudaErrorInvalidValue;
    }
}

} // namespace lab

#undef LAB_REDUCE_OP
// Which half a reduction is in, from the same column of reduce_ops.def.
static const bool kIndexOutput[LAB_NUM_REDUCE_OPS] = {
#define LAB_REDUCE_OP(id, reducer, integers, index_output) bool(index_output),
#include "reduce_ops.def"
#undef LAB_REDUCE_OP
};

extern "C" cudaError_t lab_launch_reduction(const lab_reduction_launch *launch, cudaStream_t stream) {
    if (launch->n_outputs == 0) return cudaSuccess;
    if (launch->op < 0 || launch->op >= LAB_NUM_REDUCE_OPS) return cudaErrorInvalidValue;
    return kIndexOutput[launch->op] ? lab::launch_index_reduction(*launch, stream)
                                    : lab::launch_value_reduction(*launch, stream);
}
