/* attention_kind.h - the attention op kind: softmax(q k^T * scale) v and its gradients, over a fixed
 * batch (batch, heads, positions, head_dim) or a packed one (tokens, heads, head_dim) with
 * cumulative sequence lengths (level 3, between binding/attention.c and kernels/attention_*.cu).
 *
 * The plan checks, before any CUDA call: q, k, v float16 or bfloat16, one dtype, 4-dimensional (3
 * when packed); head_dim 64, 96 or 128 (256 in the forward), the same for all three; k's heads
 * dividing q's (grouped queries, one k/v head for all: multi-query); v k's shape; every output its
 * input's shape and dtype; lse float32 (batch, heads, positions) or, packed, (heads, tokens);
 * cu_seqlens_q and cu_seqlens_k int32, 1-dimensional, one length (batch + 1); the head dimension
 * contiguous and every other stride a multiple of 8 elements, data 16-byte aligned (the kernels copy
 * 16-byte chunks); outputs writable and apart from every other operand. What only the device knows -
 * cumulative lengths that decrease or pass the tokens given - cannot move a kernel outside its
 * operands (launch.h: the bounds are clamped); rows of a packed output that no sequence covers are
 * left as they were. */
#ifndef LAB_ATTENTION_KIND_H
#define LAB_ATTENTION_KIND_H

#include "dispatch/driver.h"

/* The call's description: the binding fills the arrays (NULL where not given), the options, and the
 * names; the plan fills launch. */
typedef struct {
    int backward;
    lab_array *q, *k, *v, *out, *lse;               /* out is read by the backward, written by the forward */
    lab_array *grad_out, *grad_q, *grad_k, *grad_v; /* the backward's */
    lab_array *cu_seqlens_q, *cu_seqlens_k;
    int causal;
    int64_t window_left, window_right;  /* -1: unbounded */
    double scale;                       /* < 0: not given (1 / sqrt(head_dim)) */
    double softcap;                     /* 0: none */
    int64_t max_seqlen_q, max_seqlen_k; /* packed batches: the longest sequences; -1 not given */
    lab_attention_launch launch;
} lab_attention_call;

/* Adds the description's arrays to the call, the written ones first: what each face of the op does. */
void lab_attention_add_operands(lab_op_call *call, lab_attention_call *c);

extern const lab_op_kind lab_attention_kind;

#endif
