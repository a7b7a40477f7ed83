// rowwise_launch.cu - lab_launch_rowwise (kernels/launch.h): from the planned op to its unit.
#include "rowwise_launcher.cuh"

namespace lab {
int rowwise_max_chunks = 4;
int64_t rowwise_staged_min_vectors = 0;    // each op its own (Staging<Op>::min_vectors)
int rowwise_staged_vectors_per_thread = 0; // each op its own (Staging<Op>::vectors_per_thread)
int64_t rowwise_staged_most_bytes = -1;    // half of what a block may have, opted in
int rowwise_window_depth = -1;             // default_window_depth's choice
int rowwise_cluster_blocks = -1;           // the fewest that fit, for rows one block does not hold
} // namespace lab

extern "C" int lab_rowwise_set_max_chunks(int chunks) {
    const int previous = lab::rowwise_max_chunks;
    lab::rowwise_max_chunks = chunks;
    return previous;
}

extern "C" int64_t lab_rowwise_set_staged_min_vectors(int64_t vectors) {
    const int64_t previous = lab::rowwise_staged_min_vectors;
    lab::rowwise_staged_min_vectors = vectors;
    return previous;
}

extern "C" int lab_rowwise_set_staged_vectors_per_thread(int vectors) {
    const int previous = lab::rowwise_staged_vectors_per_thread;
    lab::rowwise_staged_vectors_per_thread = vectors;
    return previous;
}

extern "C" int64_t lab_rowwise_set_staged_most_bytes(int64_t bytes) {
    const int64_t previous = lab::rowwise_staged_most_bytes;
    lab::rowwise_staged_most_bytes = bytes;
    return previous;
}

extern "C" int lab_rowwise_set_window_depth(int depth) {
    const int previous = lab::rowwise_window_depth;
    lab::rowwise_window_depth = depth;
    return previous;
}

extern "C" int lab_rowwise_set_cluster_blocks(int blocks) {
    const int previous = lab::rowwise_cluster_blocks;
    lab::rowwise_cluster_blocks = blocks;
    return previous;
}

extern "C" cudaError_t lab_launch_rowwise(const lab_rowwise_launch *launch, cudaStream_t stream) {
    switch (launch->op) {
    case LAB_ROW_SOFTMAX:
    case LAB_ROW_LOG_SOFTMAX:
    case LAB_ROW_SOFTMAX_BACKWARD:
    case LAB_ROW_LOG_SOFTMAX_BACKWARD: return lab::launch_softmax_rows(*launch, stream);
    case LAB_ROW_LAYER_NORM:
    case LAB_ROW_RMS_NORM:
    case LAB_ROW_LAYER_NORM_BACKWARD:
    case LAB_ROW_RMS_NORM_BACKWARD: return lab::launch_norm_rows(*launch, stream);
    case LAB_ROW_CROSS_ENTROPY:
    case LAB_ROW_CROSS_ENTROPY_BACKWARD: return lab::launch_cross_entropy_rows(*launch, stream);
    case LAB_ROW_SWIGLU_BACKWARD:
    case LAB_ROW_GEGLU_BACKWARD: return lab::launch_glu_rows(*launch, stream);
    default: return cudaErrorInvalidValue; // the plan only makes the ops above
    }
}
