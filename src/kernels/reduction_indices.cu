// reduction_indices.cu - unit 2 of reduce_ops.def: argmax and argmin, each instantiated for every
// input dtype.
#include "reduction_launcher.cuh"

template cudaError_t lab::launch_unit<2>(const lab_reduction_launch &, cudaStream_t);
