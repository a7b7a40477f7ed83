// reduction_sums.cu - unit 0 of reduce_ops.def: sum, mean and prod, each instantiated for every
// input dtype it takes.
#include "reduction_launcher.cuh"

template cudaError_t lab::launch_unit<0>(const lab_reduction_launch &, cudaStream_t);
