// reduction_moments.cu - unit 3 of reduce_ops.def: the 1- and 2-norms, var and std, logsumexp and
// dot, each instantiated for every floating-point input dtype.
#include "reduction_launcher.cuh"

template cudaError_t lab::launch_unit<3>(const lab_reduction_launch &, cudaStream_t);
