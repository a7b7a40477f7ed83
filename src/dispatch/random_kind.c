/* random_kind.c - the random-number kind's plan and launch (see random_kind.h). */
#include "dispatch/random_kind.h"

#include <stdint.h>
#include <stdio.h>

#include "dispatch/capture.h"
#include "dispatch/dtype.h"

/* [start, end) bytes of a C-contiguous array. */
static void extent(const lab_array *a, uintptr_t *start, uintptr_t *end) {
    int64_t numel = 1;
    for (int d = 0; d < a->ndim; d++) numel *= a->shape[d];
    *start = (uintptr_t)a->data;
    *end = *start + (uintptr_t)(numel * lab_dtype_itemsize[a->dtype]);
}

/* Each thread reads an element of x and residual and writes the same element of out and mask, so out
 * may be x or residual itself (in place); any other sharing of memory would read what another thread
 * wrote, and is refused. */
static int separate_memory(const lab_random_call *c, const char *func) {
    const lab_array *arrays[4] = {c->out, c->mask, c->x, c->residual};
    const char *names[4] = {"out", "mask_out", c->x_name, "residual"};
    for (int i = 0; i < 4; i++) {
        for (int j = i + 1; j < 4; j++) {
            if (!arrays[i] || !arrays[j] || (j >= 2 && i >= 2)) continue; /* two inputs may share */
            uintptr_t s0, e0, s1, e1;
            extent(arrays[i], &s0, &e0);
            extent(arrays[j], &s1, &e1);
            const int same = i == 0 && j >= 2 && s0 == s1 && e0 == e1; /* out in place of an input */
            if (s0 < e1 && s1 < e0 && !same) {
                lab_fail(LAB_FAILURE_VALUE, "%s(): arguments '%s' and '%s' share memory", func, names[i],
                         names[j]);
                return -1;
            }
        }
    }
    return 0;
}

void lab_random_add_operands(lab_op_call *call, lab_random_call *c) {
    lab_op_call_add(call, "out", c->out, 1, 0, 1);
    if (c->mask) lab_op_call_add(call, "mask_out", c->mask, 1, 0, 1);
    if (c->x) lab_op_call_add(call, c->x_name, c->x, 1, 0, 0);
    if (c->residual) lab_op_call_add(call, "residual", c->residual, 1, 0, 0);
}

/* randint's [low, high) within what out's integer dtype holds (a float dtype takes any range,
 * rounding large integers). */
static int range_fits(const lab_random_call *c, const char *func) {
    static const struct {
        lab_dtype dtype;
        int64_t min, max;
    } limits[] = {{LAB_INT8, INT8_MIN, INT8_MAX},
                  {LAB_INT16, INT16_MIN, INT16_MAX},
                  {LAB_INT32, INT32_MIN, INT32_MAX},
                  {LAB_UINT8, 0, UINT8_MAX}};
    const int64_t low = c->launch.low, last = (int64_t)((uint64_t)low + c->launch.range - 1);
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        if (limits[k].dtype == c->out->dtype && (low < limits[k].min || last > limits[k].max)) {
            lab_fail(LAB_FAILURE_VALUE,
                     "%s(): arguments 'low' and 'high' ([%lld, %lld)) must lie within what 'out' (%s) "
                     "holds: [%lld, %lld]",
                     func, (long long)low, (long long)last + 1, lab_dtype_names[c->out->dtype],
                     (long long)limits[k].min, (long long)limits[k].max);
            return -1;
        }
    }
    return 0;
}

static int plan(lab_op_call *call) {
    lab_random_call *c = call->description;
    const lab_array *out = c->out;
    if (c->launch.distribution == LAB_RANDOM_RANDINT) {
        if (range_fits(c, call->func) < 0) return -1;
    } else if (out->dtype != LAB_FLOAT16 && out->dtype != LAB_BFLOAT16 && out->dtype != LAB_FLOAT32 &&
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
    const lab_array *same[2] = {c->x, c->residual};
    const char *same_names[2] = {c->x_name, "residual"};
    for (int k = 0; k < 2; k++) {
        const lab_array *a = same[k];
        if (!a) continue;
        if (!lab_has_shape(a, out->shape, out->ndim)) {
            return lab_fail_shape(call->func, same_names[k], a, out->shape, out->ndim, "the shape of 'out'");
        }
        if (a->dtype != out->dtype) {
            char text[64];
            snprintf(text, sizeof text, "it must have the dtype of 'out', %s", lab_dtype_names[out->dtype]);
            return lab_fail_dtype(call->func, same_names[k], a->dtype, text);
        }
        if (!lab_array_is_contiguous(a)) {
            lab_fail(LAB_FAILURE_VALUE, "%s(): argument '%s' must be C-contiguous, as 'out'", call->func,
                     same_names[k]);
            return -1;
        }
    }
    if (c->mask) {
        if (c->mask->dtype != LAB_UINT8) {
            return lab_fail_dtype(call->func, "mask_out", c->mask->dtype, "it must be uint8");
        }
        if (!lab_has_shape(c->mask, out->shape, out->ndim)) {
            return lab_fail_shape(call->func, "mask_out", c->mask, out->shape, out->ndim,
                                  "the shape of 'out'");
        }
        if (lab_check_writable(c->mask, call->func, "mask_out") < 0) return -1;
        if (!lab_array_is_contiguous(c->mask)) {
            lab_fail(LAB_FAILURE_VALUE, "%s(): argument 'mask_out' must be C-contiguous, as 'out'",
                     call->func);
            return -1;
        }
    }
    int64_t numel = 1;
    for (int d = 0; d < out->ndim; d++) numel *= out->shape[d];
    if (numel > 0 && separate_memory(c, call->func) < 0) return -1;
    c->launch.x = c->x ? c->x->data : NULL;
    c->launch.residual = c->residual ? c->residual->data : NULL;
    c->launch.mask = c->mask ? (uint8_t *)c->mask->data : NULL;
    c->launch.out = out->data;
    c->launch.dtype = out->dtype;
    c->launch.numel = numel;
    return numel > 0;
}

/* Where the kernel takes (seed, offset) from when the launch stream is capturing a graph: from the
 * state a lab.Graph's replays write, relative to where its capture began, for a draw in that capture
 * (from the generator, or from an rng_state taken inside it); a draw from the generator inside any
 * other capture is refused (the scope's error set). */
static void take_state_under_capture(lab_random_call *c, lab_launch_scope *scope,
                                     const lab_random_generator *generator) {
    unsigned long long capture_id = 0;
    if (!lab_launch_scope_step(scope, "asking whether the launch stream is capturing a graph",
                               lab_stream_capture_id(scope->streams.launch, &capture_id)) ||
        capture_id == 0) {
        return;
    }
    const lab_random_capture *capture = &c->captures[scope->target];
    if (capture_id != capture->capture_id) {
        if (!c->explicit_state) {
            lab_launch_scope_step(scope,
                                  "drawing from lab's generator inside a graph capture that is not a "
                                  "lab.Graph's (every replay would repeat the numbers): capture with "
                                  "lab.graph, or pass rng_state",
                                  cudaErrorStreamCaptureUnsupported);
        }
        return;
    }
    if (c->launch.seed == generator->seed && c->launch.offset >= capture->start_offset) {
        c->launch.replay_state = capture->replay_state;
        c->launch.offset -= capture->start_offset;
    }
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    lab_random_call *c = call->description;
    lab_random_generator *generator = &c->generators[scope->target];
    const int64_t per_group = lab_random_per_group(&c->launch);
    if (!c->explicit_state) {
        c->launch.seed = generator->seed;
        c->launch.offset = generator->offset;
    }
    take_state_under_capture(c, scope, generator);
    if (!lab_launch_scope_ok(scope)) return;
    const int launched =
        lab_launch_scope_step(scope, "kernel launch", lab_launch_random(&c->launch, scope->streams.launch));
    if (launched && !c->explicit_state) {
        generator->offset += (uint64_t)((c->launch.numel + per_group - 1) / per_group);
    }
}

const lab_op_kind lab_random_kind = {"random", plan, launch};
