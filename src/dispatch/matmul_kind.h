/* matmul_kind.h - the matrix product op kind: out = epilogue(alpha * a @ b + beta * c + bias) through
 * cuBLASLt (level 3, between binding/matmul.c and the vendor library of cublaslt.h).
 *
 * The plan (matmul_plan.c, pure C, tested on the CPU) maps row-major NumPy semantics onto the
 * column-major library: a row-major matrix is the column-major storage of its transpose, so
 * out = a @ b is computed as out^T = b^T @ a^T, and a transposed view is a transpose flag, never a
 * copy. Batches (NumPy broadcasting of the leading dimensions) become one strided-batched call when
 * each operand's batch dimensions collapse to one stride, else one call per batch. The launch
 * (matmul_kind.c) finds the descriptors and the heuristic's algorithm in a per-problem cache, so a
 * repeated call makes no heuristic query and no allocation. */
#ifndef LAB_MATMUL_KIND_H
#define LAB_MATMUL_KIND_H

#include "dispatch/driver.h"
#include "dispatch/reduction_kind.h"

typedef enum {
    LAB_MATMUL_NONE,      /* out = alpha * a @ b + beta * c (+ bias) */
    LAB_MATMUL_RELU,      /* relu of that */
    LAB_MATMUL_GELU_TANH, /* gelu (tanh approximation) of that; aux_out saves its input */
    LAB_MATMUL_DGELU,     /* (a @ b) * gelu'(aux): the backward of a gelu_tanh epilogue */
} lab_matmul_epilogue;

/* One operand as the library sees it: column-major rows x cols with leading dimension ld, read
 * transposed when trans is set, batch i at data + i * batch_stride elements. */
typedef struct {
    int trans;
    int64_t rows, cols, ld;
    int64_t batch_stride;                /* used when the plan's batches collapse */
    int64_t batch_strides[LAB_MAX_DIMS]; /* per batch dimension, for one call per batch */
} lab_matmul_operand;

typedef struct {
    int64_t m, n, k; /* the library's problem: D (m x n) = op(A) (m x k) @ op(B) (k x n) */
    lab_matmul_operand A, B, C, D, aux;
    const lab_array *A_array, *B_array; /* which of the user's arrays is the library's A and B */
    int swapped; /* 1 when out is computed transposed (out row-major: the usual case) */
    int n_batch_dims;
    int64_t batch_shape[LAB_MAX_DIMS];
    int64_t batch_count;
    int collapsed; /* every operand's batches are one stride apart: one strided-batched call */
    int data_type, out_type, compute_type, scale_type; /* cudaDataType / cublasComputeType values */
    int b_data_type;      /* the library's B's type: data_type, except for mixed float8 inputs */
    int library_epilogue; /* cublasLtEpilogue_t */
    /* float8 inputs: the scales of the library's A and B (scale_b and scale_a when swapped) */
    const lab_array *A_scale, *B_scale;
    int fast_accum;
} lab_matmul_plan;

typedef struct {
    /* what the binding read (NULL where an argument was not given) */
    lab_array *a, *b, *out, *c, *bias, *aux_out, *aux, *bias_grad_out;
    lab_array *scale_a, *scale_b; /* float8 inputs' scales: float32 device scalars */
    double alpha, beta;
    lab_matmul_epilogue epilogue;
    int allow_tf32;
    int fast_accum; /* float8 only: cuBLASLt's FAST_ACCUM, partial sums not promoted to float32 */
    /* the plan */
    lab_matmul_plan plan;
    int planned; /* 0, or 1 + lab_plan_matmul's result when the binding planned already */
    /* epilogue='dgelu' with bias_grad_out: the column sums of out by lab's own reduction kind, run
     * after the product in the same launch scope (see lab_matmul_fuse_dgelu_bias_grad) */
    int sum_bias_grad;
    /* a and b with no contiguous dimension among their last two: copied contiguous at launch */
    int stage[2];
    lab_array staged[2];
    lab_reduction_call bias_sum;
    lab_op_call bias_sum_call;
} lab_matmul_call;

/* Whether epilogue='dgelu' leaves the bias gradient to cuBLASLt's DGELU_BGRAD epilogue (1) or sums
 * out's columns with lab's reduction after a plain DGELU product (0, the default: on the H200 the
 * fused epilogue ran at 273 TFLOP/s against 725+ for the product alone, bench_gemm 2026-12-01). */
extern int lab_matmul_fuse_dgelu_bias_grad;

/* The plan alone (matmul_plan.c): shapes, dtypes, layouts, batches, epilogue and every refusal.
 * Returns 1 with work to launch, 0 when out is empty, -1 with TypeError/ValueError naming the
 * argument. No CUDA call. */
int lab_plan_matmul(lab_matmul_call *c, const char *func);

/* The float8 rules (matmul_float8.c): 0 when neither a nor b is float8 (and no scale was given), 1
 * when they are and every float8 rule holds, -1 with TypeError/ValueError naming the argument. The
 * other arrays' dtypes (out's, for c and bias) the plan checks for every product. */
int lab_matmul_check_float8(const lab_matmul_call *c, const char *func);

/* a @ b's shape (broadcast batch dimensions, then m, n) from a and b alone, for out=None; the same
 * errors as the plan for arrays that are not matrices or whose shapes do not chain. */
int lab_matmul_result_shape(const lab_array *a, const lab_array *b, const char *func, int64_t *shape,
                            int *ndim);

extern const lab_op_kind lab_matmul_kind;

#endif
