// reduction_launch.cu - the extern "C" launcher of every reduction: it hands the call to the unit
// (reduction_<unit>.cu) that compiled the op's row of reduce_ops.def.
#include "reduction_launcher.cuh"

namespace {

constexpr int kUnitOf[LAB_NUM_REDUCE_OPS] = {
#define LAB_REDUCE_OP(id, reducer, integers, index_output, empty_value, finish, unit) unit,
#include "reduce_ops.def"
#undef LAB_REDUCE_OP
};

} // namespace

namespace lab {
int reduce_slice_waves = 1;
} // namespace lab

extern "C" int lab_reduce_set_slice_waves(int waves) {
    const int previous = lab::reduce_slice_waves;
    lab::reduce_slice_waves = waves;
    return previous;
}

extern "C" cudaError_t lab_launch_reduction(const lab_reduction_launch *launch, cudaStream_t stream) {
    if (launch->n_outputs == 0) return cudaSuccess;
    if (launch->op < 0 || launch->op >= LAB_NUM_REDUCE_OPS) return cudaErrorInvalidValue;
    switch (kUnitOf[launch->op]) {
    case 0: return lab::launch_unit<0>(*launch, stream);
    case 1: return lab::launch_unit<1>(*launch, stream);
    case 2: return lab::launch_unit<2>(*launch, stream);
    case 3: return lab::launch_unit<3>(*launch, stream);
    default: return cudaErrorInvalidValue;
    }
}
