/* launch_scope.c - the bracket around every launch (see launch_scope.h). */
#include "dispatch/launch_scope.h"

#include "dispatch/device.h"
#include "dispatch/failure.h"

int lab_launch_scope_begin(lab_dispatch_state *state, lab_launch_scope *scope, const lab_array *const *decide,
                           int n_decide, const lab_stream_arg *stream) {
    scope->err = cudaSuccess;
    scope->step = NULL;
    scope->library_error = (lab_library_error){NULL, NULL, 0, NULL};
    scope->target = scope->current = 0;
    if (lab_plan_streams(state, decide, n_decide, stream, &scope->streams) < 0) return -1;
    scope->err = lab_select_device(decide, n_decide, &scope->target, &scope->current);
    if (scope->err != cudaSuccess) {
        scope->step = "device selection";
        scope->current = scope->target; /* nothing to restore */
        return 0;
    }
    if (scope->target != scope->current) {
        lab_launch_scope_step(scope, "switching to the operands' device", cudaSetDevice(scope->target));
    }
    if (lab_launch_scope_ok(scope)) {
        lab_launch_scope_step(scope, "ordering with the producers' streams",
                              lab_order_before_launch(state, &scope->streams, scope->target));
    }
    return 0;
}

int lab_launch_scope_end(lab_dispatch_state *state, lab_launch_scope *scope, const char *func) {
    if (lab_launch_scope_ok(scope)) {
        lab_launch_scope_step(scope, "ordering the producers' streams after the launch",
                              lab_order_after_launch(state, &scope->streams, scope->target));
    }
    const lab_library_error library = scope->library_error;
    scope->library_error.library = NULL; /* the device is restored whatever failed */
    if (scope->target != scope->current) {
        lab_launch_scope_step(scope, "restoring the current device", cudaSetDevice(scope->current));
    }
    if (library.library && scope->err == cudaSuccess) {
        lab_fail_library(func, library.library, library.step, library.status, library.status_name);
        return -1;
    }
    if (!lab_launch_scope_ok(scope)) {
        lab_fail_cuda(scope->err, func, scope->step);
        return -1;
    }
    return 0;
}

void lab_launch_scope_note_stream(const lab_launch_scope *scope, const lab_array *arrays, int n) {
    for (int i = 0; i < n; i++) {
        lab_last_use *last_use = arrays[i].last_use;
        if (!last_use) continue;
        last_use->stream = scope->streams.launch;
        PyObject *owner = scope->streams.launch_owner;
        Py_XINCREF(owner); /* before the DECREF: owner may be the object already held */
        Py_XSETREF(last_use->owner, owner);
    }
}
