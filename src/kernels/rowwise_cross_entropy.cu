// rowwise_cross_entropy.cu - cross-entropy (loss, and the gradient in the same pass) for each float
// dtype: the count of rows that count ('mean'), the row kernel, the fixed-order sum ('mean', 'sum');
// and its backward (the saved gradient scaled in place).
#include "rowwise_cross_entropy.cuh"
#include "rowwise_launcher.cuh"

namespace lab {

cudaError_t launch_cross_entropy_rows(const lab_rowwise_launch &l, cudaStream_t stream) {
    return visit_row_type(l.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = compute_t<T>;
        if (l.op == LAB_ROW_CROSS_ENTROPY_BACKWARD) return launch_rows<CrossEntropyBackward, T>(l, stream);
        if (l.reduction == LAB_LOSS_NONE) return launch_rows<CrossEntropy, T>(l, stream);
        // scratch: [0] 1 / count, [1] count, then one loss per row
        void *scratch = nullptr;
        cudaError_t err = lab_scratch_alloc(&scratch, sizeof(A) * (2 + size_t(l.rows)), stream);
        if (err != cudaSuccess) return err;
        A *counts = static_cast<A *>(scratch);
        RowArgs totals = make_row_args(l, 1024, false);
        totals.row_losses = counts + 2;
        const bool mean = l.reduction == LAB_LOSS_MEAN;
        if (mean) {
            count_targets<A><<<1, 1024, 0, stream>>>(totals, counts);
            err = cudaGetLastError();
        }
        if (err == cudaSuccess) {
            err = launch_rows<CrossEntropy, T>(l, stream, {totals.row_losses, mean ? counts : nullptr});
        }
        if (err == cudaSuccess) {
            sum_row_losses<A><<<1, 1024, 0, stream>>>(totals, counts);
            err = cudaGetLastError();
        }
        const cudaError_t freed = cudaFreeAsync(scratch, stream);
        return err == cudaSuccess ? freed : err;
    });
}

} // namespace lab
