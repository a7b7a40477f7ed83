// reduction_extremes.cu - unit 1 of reduce_ops.def: amax, amin and the inf-norm, each instantiated
// for every input dtype it takes.
#include "reduction_launcher.cuh"

template cudaError_t lab::launch_unit<1>(const lab_reduction_launch &, cudaStream_t);
