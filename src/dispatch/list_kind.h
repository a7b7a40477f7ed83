/* list_kind.h - the list op kind: foreach ops and fused optimizer steps over lists of arrays, as
 * few launches of the multi-tensor kernel as its parameter space allows (level 3, between
 * binding/foreach.c and kernels/multi_tensor.cu).
 *
 * The plan checks the lists (one shape per index, writable outputs, no partial overlap, dtypes) and
 * sorts the tensors: those that fit the multi-tensor kernel as they are - contiguous, float16/
 * bfloat16/float32, one dtype per list role - go in one launch per dtype pair; foreach ops run
 * the rest through the elementwise kind's plan one tensor at a time (any layout or dtype mix);
 * norms and optimizer steps stage a non-contiguous tensor through a contiguous temporary. */
#ifndef LAB_LIST_KIND_H
#define LAB_LIST_KIND_H

#include "dispatch/driver.h"

/* Each list op's lists and their roles, from kernels/list_ops.def (bit k: list k). */
typedef struct {
    int n_lists;
    int reads, writes, state;
    int elementwise_op; /* the lab_op for tensors off the fast path, or -1 */
} lab_list_roles;

extern const lab_list_roles lab_list_op_roles[LAB_NUM_MT_OPS];

typedef struct lab_list_plan lab_list_plan;

/* The call's description. The binding fills everything above `plan`: the op, its scalars, and the
 * lists in list_ops.def's order (list k: lists[k][0..n), named names[k]). */
typedef struct {
    lab_mt_op op;
    lab_mt_params params; /* float32 scalars for the multi-tensor kernel */
    lab_scalars scalars;  /* the same scalars, for the per-tensor elementwise path */
    int n;                /* arrays per list */
    lab_array *lists[LAB_MAX_OPERANDS];
    const char *names[LAB_MAX_OPERANDS];
    lab_array *norms;    /* foreach_norm's output, else NULL */
    lab_list_plan *plan; /* made by the plan; lab_list_call_release frees it */
} lab_list_call;

extern const lab_op_kind lab_list_kind;

/* Frees what the plan allocated (safe to call when it allocated nothing). */
void lab_list_call_release(lab_list_call *call);

#endif
