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
// Four: the float32 sum of 2^28 elements 4.14 -> 4.23 TB/s, eight sums of 2^25 4.13 -> 4.26, the
// bfloat16 sum unchanged (bench/sweep_reductions.py, 2026-12-04): in one wave every multiprocessor
// waits for its slowest block, in several the early ones take the next.
int reduce_slice_waves = 4;
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
