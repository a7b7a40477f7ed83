/* float8_cast_kind.c - the float8 cast kind's plan and launch (see float8_cast_kind.h). */
#include "dispatch/float8_cast_kind.h"

#include <stdio.h>

#include "dispatch/dtype.h"
#include "dispatch/iterator.h"

/* One float32 element (any shape of size 1); `role` closes each message, e.g. "(a per-tensor scale)". */
static int check_float32_scalar(const lab_array *a, const char *name, const char *dtype_role,
                                const char *role, const char *func) {
    if (a->dtype != LAB_FLOAT32) {
        return lab_fail(LAB_FAILURE_TYPE, "%s(): argument '%s' has dtype %s; it must be float32 %s", func,
                        name, lab_dtype_names[a->dtype], dtype_role);
    }
    if (a->numel != 1) {
        return lab_fail(LAB_FAILURE_VALUE, "%s(): argument '%s' has %lld elements; it must hold one%s", func,
                        name, (long long)a->numel, role);
    }
    return 0;
}

int lab_check_float8_scale(const lab_array *scale, const char *name, const char *func) {
    return check_float32_scalar(scale, name, "(a per-tensor scale)", " (a per-tensor scale)", func);
}

void lab_float8_cast_add_operands(lab_op_call *call, lab_float8_cast_call *c) {
    if (c->out) lab_op_call_add(call, "out", c->out, 1, 0, 1);
    if (c->out_t) lab_op_call_add(call, "out_t", c->out_t, 1, 0, 1);
    if (c->amax) lab_op_call_add(call, "amax", c->amax, 1, 0, 1);
    lab_op_call_add(call, "x", c->x, 1, 0, 0);
    lab_op_call_add(call, "scale", c->scale, 1, 0, 0);
}

/* A float8 output: its dtype, C-contiguity and shape (`want`, `what` naming it in the message). */
static int check_float8_out(const lab_array *a, const char *name, const int64_t *want, int want_ndim,
                            const char *what, const char *func) {
    if (!lab_dtype_is_float8(a->dtype)) {
        return lab_fail_dtype(func, name, a->dtype, "it must be float8_e4m3fn or float8_e5m2");
    }
    if (!lab_has_shape(a, want, want_ndim)) return lab_fail_shape(func, name, a, want, want_ndim, what);
    if (!lab_array_is_contiguous(a)) {
        return lab_fail(LAB_FAILURE_VALUE,
                        "%s(): argument '%s' must be C-contiguous (the layout lab.matmul's float8 products "
                        "read); cast into a contiguous array",
                        func, name);
    }
    return 0;
}

static int plan(lab_op_call *call) {
    lab_float8_cast_call *c = call->description;
    const char *func = call->func;
    const lab_array *x = c->x;
    if (x->dtype != LAB_FLOAT16 && x->dtype != LAB_BFLOAT16 && x->dtype != LAB_FLOAT32) {
        return lab_fail_dtype(func, "x", x->dtype, "it must be float16, bfloat16 or float32");
    }
    if (!lab_array_is_contiguous(x)) {
        return lab_fail(LAB_FAILURE_VALUE, "%s(): argument 'x' must be C-contiguous", func);
    }
    if (!c->out && !c->out_t) {
        return lab_fail(LAB_FAILURE_TYPE, "%s(): give 'out', 'out_t' or both (None is neither)", func);
    }
    if (c->out && check_float8_out(c->out, "out", x->shape, x->ndim, "the shape of 'x'", func) < 0) return -1;
    if (c->out_t) {
        if (x->ndim != 2) {
            return lab_fail(LAB_FAILURE_VALUE,
                            "%s(): argument 'out_t' is x's transpose, and x has %d dimension(s); it must be "
                            "a matrix (2 dimensions)",
                            func, x->ndim);
        }
        const int64_t transposed[2] = {x->shape[1], x->shape[0]};
        if (check_float8_out(c->out_t, "out_t", transposed, 2, "the shape of x's transpose", func) < 0) {
            return -1;
        }
        if (c->out && c->out->dtype != c->out_t->dtype) {
            char text[64];
            snprintf(text, sizeof text, "it must have the dtype of 'out', %s",
                     lab_dtype_names[c->out->dtype]);
            return lab_fail_dtype(func, "out_t", c->out_t->dtype, text);
        }
    }
    if (lab_check_float8_scale(c->scale, "scale", func) < 0) return -1;
    if (c->amax && check_float32_scalar(c->amax, "amax", "(one element)", "", func) < 0) return -1;
    const lab_array *arrays[5] = {c->out, c->out_t, c->amax, c->x, c->scale};
    const char *names[5] = {"out", "out_t", "amax", "x", "scale"};
    const int written[5] = {1, 1, 1, 0, 0};
    const lab_array *present[5];
    const char *present_names[5];
    int present_written[5], count = 0;
    for (int i = 0; i < 5; i++) {
        if (!arrays[i]) continue;
        present[count] = arrays[i], present_names[count] = names[i], present_written[count] = written[i];
        count++;
    }
    if (lab_check_written_apart(present, present_names, present_written, NULL, count, func) < 0) return -1;
    const lab_array *cast = c->out ? c->out : c->out_t;
    c->launch.x = x->data;
    c->launch.x_dtype = x->dtype;
    c->launch.out_dtype = cast->dtype;
    c->launch.cols = x->ndim ? x->shape[x->ndim - 1] : 1;
    c->launch.rows = c->launch.cols ? x->numel / c->launch.cols : 0;
    c->launch.out = c->out ? c->out->data : NULL;
    c->launch.out_t = c->out_t ? c->out_t->data : NULL;
    c->launch.scale = (const float *)c->scale->data;
    c->launch.amax = c->amax ? (float *)c->amax->data : NULL;
    return x->numel > 0 || c->amax; /* an empty x still writes amax (0) */
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    lab_float8_cast_call *c = call->description;
    lab_launch_scope_step(scope, "kernel launch", lab_launch_float8_cast(&c->launch, scope->streams.launch));
}

const lab_op_kind lab_float8_cast_kind = {"float8 cast", plan, launch};
