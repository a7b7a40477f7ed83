/* driver.h - the one sequence every Python-facing op runs (level 3 of docs/design.md's four).
 *
 * The binding (level 2) parses the call and reads each array argument into a lab_array; from
 * there lab_run_op() runs the same steps for every op kind:
 *
 *   plan (the kind's: pure C, no CUDA) -> check devices the protocols named -> locate CAI memory
 *   and check again -> launch scope (stream, device, ordering with producers' streams) -> launch
 *   (the kind's) -> close the scope (order back, restore device, raise lab.CudaError) -> note the
 *   launch stream on lab.Arrays.
 *
 * An op kind - elementwise, list (foreach and optimizer steps), reduction, raw (a user's
 * runtime-compiled kernel), row-wise, elementwise kernel (a user's lab.ElementwiseKernel), matmul,
 * linear cross-entropy (whose launch drives the matmul and row-wise launches), rope (q and k
 * rotated in one launch) and attention (forward, or the backward's two kernels) - supplies only its
 * plan and its launch. */
#ifndef LAB_DRIVER_H
#define LAB_DRIVER_H

#include "dispatch/dispatch_state.h"
#include "dispatch/launch_scope.h"
#include "dispatch/operand.h"
#include "dispatch/stream.h"

typedef struct lab_op_call lab_op_call;

typedef struct {
    const char *name; /* "elementwise", "list": for messages and the tour */
    /* Operands -> the kind's launch description in call->description. No CUDA call. Returns 1 when
     * there is work to launch, 0 when there is none (empty arrays), -1 with TypeError/ValueError set. */
    int (*plan)(lab_op_call *call);
    /* Queues the planned work on scope->streams.launch (the device is current, the producers'
     * streams ordered). Records each step's CUDA result with lab_launch_scope_step. */
    void (*launch)(lab_op_call *call, lab_launch_scope *scope);
} lab_op_kind;

struct lab_op_call {
    const char *func;                         /* the Python name, for every message */
    lab_operand_group groups[LAB_MAX_GROUPS]; /* the array arguments, in the order devices are checked */
    int n_groups;
    lab_stream_arg stream; /* the `stream=` argument */
    void *description;     /* the kind's: what the binding read in, the plan out */
};

/* Adds an array argument to the call (a single array: count 1, is_list 0). */
static inline void lab_op_call_add(lab_op_call *call, const char *name, lab_array *arrays, int count,
                                   int is_list, int written) {
    lab_operand_group *g = &call->groups[call->n_groups++];
    g->name = name;
    g->arrays = arrays;
    g->count = count;
    g->is_list = is_list;
    g->written = written;
}

/* Runs the sequence above. Returns 0, or -1 with a Python exception set. */
int lab_run_op(lab_dispatch_state *state, const lab_op_kind *kind, lab_op_call *call);

#endif
