/* driver.c - the sequence of driver.h, written once for every op kind. */
#include "dispatch/driver.h"

#include "dispatch/device.h"

/* The arrays that decide the launch stream and device: the first array of each argument, the
 * written ones first (the output's producer stream wins over the inputs'). */
static int representatives(const lab_op_call *call, const lab_array **chosen) {
    int n = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (int g = 0; g < call->n_groups; g++)
            if (call->groups[g].written == pass && call->groups[g].count > 0) {
                chosen[n++] = &call->groups[g].arrays[0];
            }
    return n;
}

int lab_run_op(lab_dispatch_state *state, const lab_op_kind *kind, lab_op_call *call) {
    const int work = kind->plan(call);
    if (work < 0) return -1;
    if (lab_check_same_device(call->groups, call->n_groups, call->func) < 0) {
        return -1; /* devices the protocols named */
    }
    if (work == 0) return 0; /* nothing to compute: no CUDA call at all */
    if (lab_locate_memory(state, call->groups, call->n_groups, call->func) < 0) return -1;
    if (lab_check_same_device(call->groups, call->n_groups, call->func) < 0) {
        return -1; /* and the located ones */
    }

    const lab_array *decide[LAB_MAX_GROUPS];
    const int n_decide = representatives(call, decide);
    lab_launch_scope scope;
    state->launch_scopes++;
    if (lab_launch_scope_begin(state, &scope, decide, n_decide, &call->stream) < 0) return -1;
    if (lab_launch_scope_ok(&scope)) kind->launch(call, &scope);
    if (lab_launch_scope_end(state, &scope, call->func) < 0) return -1;
    for (int g = 0; g < call->n_groups; g++) {
        lab_launch_scope_note_stream(&scope, call->groups[g].arrays, call->groups[g].count);
    }
    return 0;
}
