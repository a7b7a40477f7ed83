/* launch_scope.c - the bracket around every launch (see launch_scope.h). */
#include "launch_scope.h"

#include "cuda_error.h"
#include "device.h"
#include "runtime_types.h"

int lab_launch_scope_begin(lab_state *state, lab_launch_scope *scope, const lab_array *decide, int n_decide,
                           PyObject *stream_obj, int stream_given, cudaStream_t stream) {
    scope->err = cudaSuccess;
    scope->step = NULL;
    scope->target = scope->current = 0;
    if (lab_plan_streams(state, decide, n_decide, stream_obj, stream_given, stream, &scope->streams) < 0) return -1;
    scope->err = lab_select_device(decide, n_decide, &scope->target, &scope->current);
    if (scope->err != cudaSuccess) {
        scope->step = "device selection";
        scope->current = scope->target; /* nothing to restore */
        return 0;
    }
    if (scope->target != scope->current) lab_launch_scope_step(scope, "switching to the operands' device",
                                                               cudaSetDevice(scope->target));
    if (lab_launch_scope_ok(scope))
        lab_launch_scope_step(scope, "ordering with the producers' streams",
                              lab_order_before_launch(state, &scope->streams, scope->target));
    return 0;
}

int lab_launch_scope_end(lab_state *state, lab_launch_scope *scope, const char *func) {
    if (lab_launch_scope_ok(scope))
        lab_launch_scope_step(scope, "ordering the producers' streams after the launch",
                              lab_order_after_launch(state, &scope->streams, scope->target));
    if (scope->target != scope->current)
        lab_launch_scope_step(scope, "restoring the current device", cudaSetDevice(scope->current));
    if (!lab_launch_scope_ok(scope)) {
        lab_raise_cuda_error(state, scope->err, func, scope->step);
        return -1;
    }
    return 0;
}

void lab_launch_scope_note_stream(const lab_launch_scope *scope, const lab_array *arrays, int n) {
    for (int i = 0; i < n; i++)
        if (arrays[i].lab_array)
            lab_array_object_set_stream((lab_array_object *)arrays[i].lab_array, scope->streams.launch,
                                        scope->streams.launch_owner);
}
