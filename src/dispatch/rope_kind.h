/* rope_kind.h - the rotary position embedding op kind: q and k, (batch, heads, positions, head_dim)
 * at any strides, rotated pairwise by angles from cos/sin tables shared by every head (level 3,
 * between binding/rope.c and kernels/rope.cu).
 *
 * The plan checks, before any CUDA call: q 4-dimensional and float; k (optional) q's dtype, batch,
 * positions and head_dim, any number of heads; each output its input's shape and dtype; cos and
 * sin one shape and one dtype (q's, or float32) - (positions, C), (batch or 1, positions, C) as
 * Hugging Face's rotary embedding returns them, or (batch or 1, 1, positions, C) - with C the
 * rotary dimension (a column per element) or half of it (a column per pair, as flash-attn's tables);
 * the rotary dimension even and at most head_dim. Outputs are writable, never write an element twice,
 * and share no memory with another operand - except each output with its own input, in place. */
#ifndef LAB_ROPE_KIND_H
#define LAB_ROPE_KIND_H

#include "dispatch/driver.h"

/* The call's description: the binding fills the arrays (k and k_out NULL when q alone is rotated),
 * their names and the options; the plan fills launch. */
typedef struct {
    lab_array *x[2], *out[2]; /* q, k and what they become */
    const char *x_names[2], *out_names[2];
    lab_array *cos, *sin;
    int64_t rotary_dim; /* -1: the tables' last dimension */
    int interleaved, backward;
    lab_rope_launch launch;
} lab_rope_call;

/* Adds the description's arrays to the call, the outputs first (the first decides the launch stream):
 * what both faces of the op (lab.rope, the XLA FFI handler) do. */
void lab_rope_add_operands(lab_op_call *call, lab_rope_call *c);

extern const lab_op_kind lab_rope_kind;

#endif
