/* random_kind.c - the random-number kind's plan and launch (see random_kind.h). */
#include "dispatch/random_kind.h"

#include <stdio.h>

#include "dispatch/dtype.h"

static int plan(lab_op_call *call) {
    lab_random_call *c = call->description;
    const lab_array *out = c->out;
    if (out->dtype != LAB_FLOAT16 && out->dtype != LAB_BFLOAT16 && out->dtype != LAB_FLOAT32 &&
        out->dtype != LAB_FLOAT64) {
        return lab_fail_dtype(call->func, "out", out->dtype,
                              "it must be float16, bfloat16, float32 or float64");
    }
    if (lab_check_writable(out, call->func, "out") < 0) return -1;
    if (!lab_array_is_contiguous(out)) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): argument 'out' must be C-contiguous (an element's number is a function of its "
                 "index); fill a contiguous array and copy it into the view",
                 call->func);
        return -1;
    }
    int64_t numel = 1;
    for (int d = 0; d < out->ndim; d++) numel *= out->shape[d];
    c->launch.out = out->data;
    c->launch.dtype = out->dtype;
    c->launch.numel = numel;
    return numel > 0;
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    lab_random_call *c = call->description;
    lab_random_generator *generator = &c->generators[scope->target];
    const int64_t per_group = c->launch.dtype == LAB_FLOAT64 ? 2 : 4;
    c->launch.seed = generator->seed;
    c->launch.offset = generator->offset;
    if (lab_launch_scope_step(scope, "kernel launch", lab_launch_random(&c->launch, scope->streams.launch))) {
        generator->offset += (uint64_t)((c->launch.numel + per_group - 1) / per_group);
    }
}

const lab_op_kind lab_random_kind = {"random", plan, launch};
