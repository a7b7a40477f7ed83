/* launch.h - the one boundary between the binding (C, level 2-3) and the kernels (CUDA, level 4).
 *
 * Everything that crosses it is plain C: pointers, element counts, a dtype enum, an op enum, the
 * op's scalar parameters and a cudaStream_t. Launchers return cudaError_t and never touch Python;
 * the C side turns a non-success code into lab.CudaError. */
#ifndef LAB_KERNELS_LAUNCH_H
#define LAB_KERNELS_LAUNCH_H

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types lab computes on. The order is also the order of the tables in dtype.c. */
typedef enum {
    LAB_FLOAT16 = 0,
    LAB_BFLOAT16,
    LAB_FLOAT32,
    LAB_FLOAT64,
    LAB_INT8,
    LAB_INT16,
    LAB_INT32,
    LAB_INT64,
    LAB_UINT8,
    LAB_NUM_DTYPES
} lab_dtype;

/* Kernel-level elementwise ops, one per row of ops.def (some rows are internal variants that the
 * Python layer picks, e.g. fused_add_mul with a Python-number scale). */
typedef enum {
#define LAB_OP(id, functor, n_inputs, integers) LAB_OP_##id,
#include "ops.def"
#undef LAB_OP
    LAB_NUM_OPS
} lab_op;

/* Scalar parameters of an op (alpha, beta, a scale). The C layer fills the float half for float
 * dtypes and the integer half for integer dtypes; the kernel converts them to its compute type. */
typedef struct {
    double as_float[2];
    int64_t as_int[2];
} lab_scalars;

/* Contiguous elementwise launch: out[i] = op(in[0][i], in[1][i], in[2][i]) for i < n.
 * All arrays have dtype `dtype`; unused inputs are NULL. n == 0 launches nothing. */
cudaError_t lab_launch_elementwise(lab_op op, lab_dtype dtype, void *out, const void *const in[3],
                                   int64_t n, lab_scalars scalars, cudaStream_t stream);

/* Architectures this build carries, as "sm_80 sm_90 compute_90" (for `python -m lab`). */
const char *lab_compiled_architectures(void);

#ifdef __cplusplus
}
#endif

#endif /* LAB_KERNELS_LAUNCH_H */
