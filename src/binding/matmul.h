/* matmul.h - lab.matmul's binding (see matmul.c), and the reading of its arguments, which the test
 * entry lab.lab._matmul_plan (src/testing) shares. */
#ifndef LAB_BINDING_MATMUL_H
#define LAB_BINDING_MATMUL_H

#include "binding/args.h"
#include "binding/module_state.h"
#include "dispatch/matmul_kind.h"

extern PyMethodDef lab_matmul_methods[];
extern const lab_signed_function lab_matmul_signatures[]; /* ends with {NULL, NULL} */

/* Where the arrays of one call are read to (lab_matmul_call points into it). */
typedef struct {
    lab_array a, b, out, c, bias, aux_out, aux, bias_grad_out, scale_a, scale_b;
} lab_matmul_arrays;

/* matmul's signature: (a, b, out=None, *, c, alpha, beta, bias, epilogue, aux_out, aux,
 * bias_grad_out, allow_tf32, stream, scale_a, scale_b, fast_accum). */
const lab_signature *lab_matmul_signature(void);

/* The first product loads cuBLASLt from the paths lab/_blas.py lists (LAB_CUBLASLT, the NVIDIA
 * wheels, CUDA_HOME, the loader's path); later calls return at once. 0, or -1 with ImportError. */
int lab_ensure_cublaslt(void);

/* Reads the parsed slots (out from out_obj) into *call: scalars first, then every array.
 * Returns 0, or -1 with TypeError/ValueError naming the argument. No CUDA call. */
int lab_matmul_read(lab_state *state, const char *func, PyObject *const *slots, PyObject *out_obj,
                    lab_matmul_arrays *arrays, lab_matmul_call *call);

#endif
