/* linear_ce_kind.h - the fused linear cross-entropy op kind: the loss of logits = hidden @ weight^T
 * (+ bias) against target, and its gradients, without ever holding the logits (level 3, between
 * binding/linear_ce.c and the matmul and row-wise kinds, whose launches it drives chunk by chunk).
 *
 * The rows (tokens) are cut into chunks that fit the scratch memory. For each chunk, on one stream:
 *   logits_c = hidden_c @ weight^T (+ bias)            cuBLASLt, into scratch
 *   loss rows, and d loss / d logits_c in place         lab's cross-entropy row kernel
 *   grad_hidden_c = dlogits_c @ weight                   cuBLASLt
 *   grad_weight (+)= dlogits_c^T @ hidden_c              cuBLASLt, beta = 1 after the first chunk
 *   grad_bias (+)= dlogits_c summed over its rows        lab's reduction, float32 across chunks
 * The 'mean' count runs once before the chunks and the reduced loss once after them, in a fixed
 * order: the same bits every run. */
#ifndef LAB_LINEAR_CE_KIND_H
#define LAB_LINEAR_CE_KIND_H

#include "dispatch/driver.h"

#define LAB_LINEAR_CE_DEFAULT_SCRATCH ((int64_t)256 << 20)

/* How the rows are chunked and where each part of the scratch memory lies (byte offsets, each
 * 256-byte aligned): the chunk's logits (rows padded to 128 bytes: an odd vocabulary, 50257, would
 * leave every row misaligned and the products on cuBLASLt's slow unaligned kernels, measured 2x), the 'mean'
 * totals, every row's loss (reduced losses only), and the bias gradient's float32 sums (running and this
 * chunk's). */
typedef struct {
    int64_t chunk_rows, chunks;
    int64_t logits_ld; /* elements from one row of logits to the next: classes rounded up to 64 */
    int64_t logits_offset, totals_offset, losses_offset, bias_offset, bytes;
} lab_linear_ce_chunks;

/* The chunking for `rows` rows of `classes` logits of `dtype` within max_scratch_bytes: as few
 * chunks as fit, then rows spread evenly over them (a multiple of 64 where that still fits, so the
 * products' tiles stay whole). -1 with a ValueError naming budget_name (the argument that set
 * the budget) when not even one row fits. No CUDA call. */
int lab_plan_linear_ce_chunks(int64_t rows, int64_t classes, lab_dtype dtype, int reduced_loss, int bias_grad,
                              int64_t max_scratch_bytes, const char *func, const char *budget_name,
                              lab_linear_ce_chunks *chunks);

typedef struct {
    /* what the binding read (NULL where not given) */
    lab_array *hidden, *weight, *target, *loss, *bias, *grad_hidden, *grad_weight, *grad_bias, *grad_output,
        *scratch;
    lab_loss_reduction reduction;
    int64_t ignore_index;
    double label_smoothing, softcap, z_loss;
    int accumulate;            /* add the gradients into grad_hidden/grad_weight/grad_bias */
    int64_t max_scratch_bytes; /* < 0: the scratch array's size, else the default */
    /* the plan: hidden as rows x depth, the per-row operands' strides along those rows (elements) */
    int64_t rows, classes, depth;
    int64_t hidden_stride, grad_hidden_stride, target_stride, loss_stride, upstream_stride;
    lab_linear_ce_chunks chunks;
    int planned; /* 1 + the plan's result when the binding planned already (before loading cuBLASLt) */
} lab_linear_ce_call;

/* Checks every operand (TypeError/ValueError naming it) and plans the chunks: the kind's plan. */
int lab_plan_linear_ce(lab_op_call *call);

/* bytes rounded up to a multiple of 256, where the scratch memory's parts start */
static inline int64_t lab_align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

extern const lab_op_kind lab_linear_ce_kind;

#endif
