// reduction_values.cu - the reductions that produce a value (sum, mean, prod, amax, amin), each
// instantiated for every input dtype it takes (reduce_ops.def).
#include "reduction.cuh"

namespace lab {

#define LAB_REDUCE_ROW_0(id, reducer, integers) LAB_REDUCE_CASE(id, reducer, integers)
#define LAB_REDUCE_ROW_1(id, reducer, integers)

cudaError_t launch_value_reduction(const lab_reduction_launch &launch, cudaStream_t stream) {
    switch (launch.op) {
#include "reduce_ops.def"
    default: return cudaErrorInvalidValue;
    }
}

} // namespace lab
