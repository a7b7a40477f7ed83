// rowwise_cross_entropy.cu - cross-entropy (loss, and the gradient in the same pass) for each float
// dtype, in its three parts - the count of rows that count ('mean'), the row kernel, the fixed-order
// sum ('mean', 'sum') - which lab_launch_rowwise runs back to back and the fused linear
// cross-entropy runs around its chunks; and its backward (the saved gradient scaled in place).
#include "rowwise_cross_entropy.cuh"
#include "rowwise_launcher.cuh"

extern "C" cudaError_t lab_launch_cross_entropy_part(const lab_rowwise_launch *launch,
                                                     lab_cross_entropy_part part, void *totals,
                                                     void *row_losses, cudaStream_t stream) {
    using namespace lab;
    const lab_rowwise_launch &l = *launch;
    return visit_row_type(l.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = compute_t<T>;
        A *counts = static_cast<A *>(totals);
        const bool mean = l.reduction == LAB_LOSS_MEAN;
        if (part == LAB_CE_ROWS) {
            if (l.rows == 0) return cudaSuccess;
            return launch_rows<CrossEntropy, T>(l, stream, {row_losses, mean ? counts : nullptr});
        }
        RowArgs all = make_row_args(l, 1024, false);
        all.row_losses = row_losses;
        if (part == LAB_CE_COUNT) {
            count_targets<A><<<1, 1024, 0, stream>>>(all, counts);
        } else {
            sum_row_losses<A><<<1, 1024, 0, stream>>>(all, counts);
        }
        return cudaGetLastError();
    });
}

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
        const bool mean = l.reduction == LAB_LOSS_MEAN;
        if (mean) err = lab_launch_cross_entropy_part(&l, LAB_CE_COUNT, counts, counts + 2, stream);
        if (err == cudaSuccess) {
            err = lab_launch_cross_entropy_part(&l, LAB_CE_ROWS, counts, counts + 2, stream);
        }
        if (err == cudaSuccess) {
            err = lab_launch_cross_entropy_part(&l, LAB_CE_SUM, counts, counts + 2, stream);
        }
        const cudaError_t freed = cudaFreeAsync(scratch, stream);
        return err == cudaSuccess ? freed : err;
    });
}

} // namespace lab
