/* reduction_kind.c - the reduction op kind's plan and launch (see reduction_kind.h). */
#include "dispatch/reduction_kind.h"

#include "dispatch/dtype.h"
#include "dispatch/iterator.h"

/* reduce_ops.def's columns the plan checks, by op. */
typedef struct {
    int integers;     /* integer input allowed */
    int index_output; /* writes an index (argmax, argmin) */
    int empty_value;  /* an empty reduction has a value (sum 0, prod 1, ...) */
} reduce_op_rules;
static const reduce_op_rules RULES[LAB_NUM_REDUCE_OPS] = {
#define LAB_REDUCE_OP(id, reducer, integers, index_output, empty_value, finish, unit)                        \
    {integers, index_output, empty_value},
#include "kernels/reduce_ops.def"
#undef LAB_REDUCE_OP
};

int lab_reduce_integers_allowed(lab_reduce_op op) { return RULES[op].integers; }

/* The output seen with the input's rank: size 1 and stride 0 in reduced dimensions (keepdim form).
 * The output must have the reduced shape - the input's without the reduced dimensions, or with
 * them as size 1 when keepdim. */
static int keepdim_view(const lab_reduction_call *c, const char *func, lab_array *view) {
    const lab_array *in = c->in, *out = c->out;
    int64_t expected[LAB_MAX_DIMS];
    int expected_ndim = 0;
    for (int d = 0; d < in->ndim; d++) {
        const int reduced = (c->reduced >> d) & 1;
        if (!reduced || c->keepdim) expected[expected_ndim++] = reduced ? 1 : in->shape[d];
    }
    int fits = out->ndim == expected_ndim;
    for (int d = 0; fits && d < expected_ndim; d++) fits = out->shape[d] == expected[d];
    if (!fits) {
        char want[256], got[256], from[256];
        lab_shape_text(want, sizeof want, expected, expected_ndim);
        lab_shape_text(got, sizeof got, out->shape, out->ndim);
        lab_shape_text(from, sizeof from, in->shape, in->ndim);
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): argument 'out' has shape %s; reducing the input's shape %s over this axis%s gives %s",
                 func, got, from, c->keepdim ? " with keepdim=True" : "", want);
        return -1;
    }
    *view = *out;
    view->ndim = in->ndim;
    for (int d = 0, k = 0; d < in->ndim; d++) {
        const int reduced = (c->reduced >> d) & 1;
        if (reduced) {
            view->shape[d] = 1;
            view->strides[d] = 0;
            if (c->keepdim) k++;
        } else {
            view->shape[d] = out->shape[k];
            view->strides[d] = out->strides[k];
            k++;
        }
    }
    return 0;
}

static int check_dtypes(const lab_reduction_call *c, const char *func) {
    const lab_dtype in = c->in->dtype, out = c->out->dtype;
    if (!RULES[c->op].integers && lab_dtype_is_integer(in)) {
        lab_fail(LAB_FAILURE_TYPE,
                 "%s(): argument '%s' has integer dtype %s; %s takes floating-point input only (%s) - "
                 "convert first, e.g. lab.copy into a float array",
                 func, c->in_names[0], lab_dtype_names[in], func, lab_supported_dtypes_text(0));
        return -1;
    }
    if (c->in2 && c->in2->dtype != in) {
        lab_fail(LAB_FAILURE_TYPE, "%s(): arguments '%s' and '%s' must have the same dtype, got %s and %s",
                 func, c->in_names[0], c->in_names[1], lab_dtype_names[in], lab_dtype_names[c->in2->dtype]);
        return -1;
    }
    if (RULES[c->op].index_output && out != LAB_INT64 && out != LAB_INT32) {
        lab_fail(LAB_FAILURE_TYPE,
                 "%s(): argument 'out' has dtype %s; %s writes indices, into int64 or int32", func,
                 lab_dtype_names[out], func);
        return -1;
    }
    return 0;
}

/* Two inputs (dot) are two vectors of one length: no broadcasting, as torch.dot. */
static int check_second_input(const lab_reduction_call *c, const char *func) {
    const lab_array *inputs[2] = {c->in, c->in2};
    for (int k = 0; k < 2; k++) {
        if (inputs[k]->ndim != 1) {
            lab_fail(LAB_FAILURE_VALUE, "%s(): argument '%s' must be 1-dimensional, got %d dimensions", func,
                     c->in_names[k], inputs[k]->ndim);
            return -1;
        }
    }
    if (c->in->shape[0] != c->in2->shape[0]) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): arguments '%s' and '%s' must have the same length, got %lld and %lld", func,
                 c->in_names[0], c->in_names[1], (long long)c->in->shape[0], (long long)c->in2->shape[0]);
        return -1;
    }
    return 0;
}

/* How threads share the work (see lab_reduce_strategy in kernels/launch.h); the launcher decides
 * how many slices split an output. The row-length thresholds follow bench/bench_reductions.py. */
static lab_reduce_strategy choose_strategy(const lab_reduction_launch *l, int innermost_kept) {
    if (innermost_kept) return LAB_REDUCE_BY_COLUMN;
    if (l->n_outputs < 1024 && l->n_reduce >= 16384) return LAB_REDUCE_SPLIT;
    if (l->n_reduce >= 8192) return LAB_REDUCE_BY_BLOCK;
    return l->n_reduce > 64 ? LAB_REDUCE_BY_WARP : LAB_REDUCE_BY_QUAD;
}

static int plan(lab_op_call *call) {
    lab_reduction_call *c = call->description;
    const char *func = call->func;
    lab_reduction_launch *l = &c->launch;
    if (check_dtypes(c, func) < 0) return -1;
    if (c->in2 && check_second_input(c, func) < 0) return -1;
    lab_operands ops;
    ops.count = c->in2 ? 3 : 2;
    ops.n_outputs = 1;
    ops.names[0] = "out";
    ops.names[1] = c->in_names[0];
    ops.names[2] = c->in_names[1];
    if (keepdim_view(c, func, &ops.arrays[0]) < 0) return -1;
    ops.arrays[1] = *c->in;
    if (c->in2) ops.arrays[2] = *c->in2;
    /* argmax reports a flat position along the reduced dimensions: keep their logical order */
    const uint32_t flags = RULES[c->op].index_output ? LAB_ITERATE_KEEP_REDUCED_ORDER : 0;
    lab_iteration it;
    if (lab_iterate_with(&ops, c->reduced, flags, func, &it) < 0) return -1;

    l->op = c->op;
    l->in_dtype = c->in->dtype;
    l->out_dtype = c->out->dtype;
    l->correction = c->correction;
    l->kept_ndim = l->reduced_ndim = 0;
    l->n_outputs = l->n_reduce = 1;
    for (int d = 0; d < c->in->ndim; d++)
        *(((c->reduced >> d) & 1) ? &l->n_reduce : &l->n_outputs) *= c->in->shape[d];
    if (l->n_outputs == 0) return 0; /* nothing to write */
    if (l->n_reduce == 0 && !RULES[c->op].empty_value) {
        lab_fail(
            LAB_FAILURE_VALUE,
            "%s(): argument '%s' has zero elements along the reduced dimensions, whose reduction has no %s "
            "(sum, prod and mean of nothing are 0, 1 and NaN; this op has no such value)",
            func, c->in_names[0], RULES[c->op].index_output ? "index" : "value");
        return -1;
    }
    /* With no elements to reduce the iterator made no space: every output gets the identity. */
    l->in[0] = it.numel ? it.data[1] : c->in->data;
    l->in[1] = c->in2 ? (it.numel ? it.data[2] : c->in2->data) : NULL;
    static const int kept_operand[3] = {1, 0, 2}; /* the launch's input, output, second input */
    int innermost_kept = 0;
    for (int d = 0; it.numel && d < it.ndim; d++) {
        if ((it.reduced >> d) & 1) {
            l->reduced_shape[l->reduced_ndim] = it.shape[d];
            l->reduced_strides[0][l->reduced_ndim] = it.byte_strides[1][d];
            l->reduced_strides[1][l->reduced_ndim++] = c->in2 ? it.byte_strides[2][d] : 0;
        } else {
            l->kept_shape[l->kept_ndim] = it.shape[d];
            for (int k = 0; k < 3; k++)
                l->kept_strides[k][l->kept_ndim] =
                    kept_operand[k] < ops.count ? it.byte_strides[kept_operand[k]][d] : 0;
            l->kept_ndim++;
        }
        innermost_kept = !((it.reduced >> d) & 1);
    }
    if (!it.numel) { /* empty reduction: outputs laid out as out's own (contiguous or not) view */
        for (int d = 0; d < c->out->ndim; d++) {
            if (c->out->shape[d] == 1) continue;
            l->kept_shape[l->kept_ndim] = c->out->shape[d];
            l->kept_strides[0][l->kept_ndim] = l->kept_strides[2][l->kept_ndim] = 0;
            l->kept_strides[1][l->kept_ndim++] = c->out->strides[d] * lab_dtype_itemsize[c->out->dtype];
        }
        l->out = c->out->data;
        l->strategy = LAB_REDUCE_BY_COLUMN;
        return 1;
    }
    l->out = it.data[0];
    l->strategy = choose_strategy(l, innermost_kept);
    return 1;
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    const lab_reduction_call *c = call->description;
    lab_launch_scope_step(scope, "kernel launch", lab_launch_reduction(&c->launch, scope->streams.launch));
}

const lab_op_kind lab_reduction_kind = {"reduction", plan, launch};
