/* float8_cast_kind.h - the float8 cast op kind: an array cast to float8 with a scale, into out and/or
 * its transpose out_t, with its largest magnitude into amax (level 3, between binding/float8.c and
 * kernels/float8_cast.cu).
 *
 * The plan checks, before any CUDA call: x float16, bfloat16 or float32 and C-contiguous; out (x's
 * shape) and out_t (x 2-D, out_t its transpose's shape) float8_e4m3fn or float8_e5m2, one dtype when
 * both are given, C-contiguous (the layouts lab.matmul's float8 products read), at least one of them;
 * scale one float32 element; amax one float32 element; the written arrays writable and sharing no
 * memory with any other operand. */
#ifndef LAB_FLOAT8_CAST_KIND_H
#define LAB_FLOAT8_CAST_KIND_H

#include "dispatch/driver.h"
#include "kernels/launch.h"

typedef struct {
    lab_array *x, *scale;
    lab_array *out, *out_t, *amax; /* any may be NULL, but not both out and out_t */
    lab_float8_cast_launch launch;
} lab_float8_cast_call;

/* Adds the call's arrays to the op call, the written ones first. */
void lab_float8_cast_add_operands(lab_op_call *call, lab_float8_cast_call *c);

/* A per-tensor scale: one float32 element (any shape of size 1). 0, or -1 with the error set naming
 * `name`. lab.matmul's scale_a and scale_b are checked by it too. */
int lab_check_float8_scale(const lab_array *scale, const char *name, const char *func);

extern const lab_op_kind lab_float8_cast_kind;

#endif
