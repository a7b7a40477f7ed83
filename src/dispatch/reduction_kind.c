/* reduction_kind.c - the reduction op kind's plan and launch (see reduction_kind.h). */
#include "dispatch/reduction_kind.h"

#include "dispatch/dtype.h"
#include "dispatch/iterator.h"

static const int REDUCE_INTEGERS[LAB_NUM_REDUCE_OPS] = {
#define LAB_REDUCE_OP(id, reducer, integers, index_output) integers,
#include "kernels/reduce_ops.def"
#undef LAB_REDUCE_OP
};
static const int REDUCE_INDEX_OUTPUT[LAB_NUM_REDUCE_OPS] = {
#define LAB_REDUCE_OP(id, reducer, integers, index_output) index_output,
#include "kernels/reduce_ops.def"
#undef LAB_REDUCE_OP
};

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
        PyObject *want = lab_shape_tuple(expected, expected_ndim),
                 *got = lab_shape_tuple(out->shape, out->ndim);
        PyObject *from = lab_shape_tuple(in->shape, in->ndim);
        if (want && got && from) {
            PyErr_Format(
                PyExc_ValueError,
                "%s(): argument 'out' has shape %R; reducing the input's shape %R over this axis%s gives %R",
                func, got, from, c->keepdim ? " with keepdim=True" : "", want);
        }
        Py_XDECREF(want);
        Py_XDECREF(got);
        Py_XDECREF(from);
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
    if (!REDUCE_INTEGERS[c->op] && lab_dtype_is_integer(in)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'x' has integer dtype %s; %s takes floating-point input only (%s) - "
                     "convert first, e.g. lab.copy into a float array",
                     func, lab_dtype_names[in], func, lab_supported_dtypes_text(0));
        return -1;
    }
    if (REDUCE_INDEX_OUTPUT[c->op] && out != LAB_INT64 && out != LAB_INT32) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'out' has dtype %s; %s writes indices, into int64 or int32", func,
                     lab_dtype_names[out], func);
        return -1;
    }
    return 0;
}

/* How threads share the work (see lab_reduce_strategy in kernels/launch.h). The thresholds are
 * the plan's guesses, pending the benchmark's measurements. */
static lab_reduce_strategy choose_strategy(const lab_reduction_launch *l, int innermost_kept, int *slices) {
    *slices = 1;
    if (innermost_kept && l->n_outputs >= 1024) return LAB_REDUCE_BY_THREAD; /* column sums */
    if (l->n_outputs < 256 && l->n_reduce >= 65536) {
        int64_t s = (l->n_reduce + 32767) / 32768, most = 2048 / l->n_outputs;
        if (most < 1) most = 1;
        *slices = (int)(s < most ? s : most);
        if (*slices > 1) return LAB_REDUCE_SPLIT;
    }
    return l->n_reduce >= 4096 ? LAB_REDUCE_BY_BLOCK : LAB_REDUCE_BY_WARP;
}

static int plan(lab_op_call *call) {
    lab_reduction_call *c = call->description;
    const char *func = call->func;
    lab_reduction_launch *l = &c->launch;
    if (check_dtypes(c, func) < 0) return -1;
    lab_operands ops;
    ops.count = 2;
    ops.names[0] = "out";
    ops.names[1] = "x";
    if (keepdim_view(c, func, &ops.arrays[0]) < 0) return -1;
    ops.arrays[1] = *c->in;
    /* argmax reports a flat position along the reduced dimensions: keep their logical order */
    const uint32_t flags = REDUCE_INDEX_OUTPUT[c->op] ? LAB_ITERATE_KEEP_REDUCED_ORDER : 0;
    lab_iteration it;
    if (lab_iterate_with(&ops, c->reduced, flags, func, &it) < 0) return -1;

    l->op = c->op;
    l->in_dtype = c->in->dtype;
    l->out_dtype = c->out->dtype;
    l->in = ops.arrays[1].data;
    l->out = it.data[0];
    l->kept_ndim = l->reduced_ndim = 0;
    l->n_outputs = l->n_reduce = 1;
    for (int d = 0; d < c->in->ndim; d++)
        *(((c->reduced >> d) & 1) ? &l->n_reduce : &l->n_outputs) *= c->in->shape[d];
    if (l->n_outputs == 0) return 0; /* nothing to write */
    if (l->n_reduce == 0 &&
        (c->op != LAB_REDUCE_SUM && c->op != LAB_REDUCE_PROD && c->op != LAB_REDUCE_MEAN)) {
        PyErr_Format(
            PyExc_ValueError,
            "%s(): the reduction is over zero elements, which has no %s (sum, prod and mean of nothing "
            "are 0, 1 and NaN; this op has no such value)",
            func, REDUCE_INDEX_OUTPUT[c->op] ? "index" : "value");
        return -1;
    }
    /* With no elements to reduce the iterator made no space: every output gets the identity. */
    l->in = it.numel ? it.data[1] : c->in->data;
    int innermost_kept = 0;
    for (int d = 0; it.numel && d < it.ndim; d++) {
        if ((it.reduced >> d) & 1) {
            l->reduced_shape[l->reduced_ndim] = it.shape[d];
            l->reduced_in_strides[l->reduced_ndim++] = it.byte_strides[1][d];
        } else {
            l->kept_shape[l->kept_ndim] = it.shape[d];
            l->kept_in_strides[l->kept_ndim] = it.byte_strides[1][d];
            l->kept_out_strides[l->kept_ndim++] = it.byte_strides[0][d];
        }
        innermost_kept = !((it.reduced >> d) & 1);
    }
    if (!it.numel) { /* empty reduction: outputs laid out as out's own (contiguous or not) view */
        for (int d = 0; d < c->out->ndim; d++) {
            if (c->out->shape[d] == 1) continue;
            l->kept_shape[l->kept_ndim] = c->out->shape[d];
            l->kept_in_strides[l->kept_ndim] = 0;
            l->kept_out_strides[l->kept_ndim++] = c->out->strides[d] * lab_dtype_itemsize[c->out->dtype];
        }
        l->out = c->out->data;
        l->strategy = LAB_REDUCE_BY_THREAD;
        l->slices = 1;
        return 1;
    }
    l->strategy = choose_strategy(l, innermost_kept, &l->slices);
    return 1;
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    const lab_reduction_call *c = call->description;
    lab_launch_scope_step(scope, "kernel launch", lab_launch_reduction(&c->launch, scope->streams.launch));
}

const lab_op_kind lab_reduction_kind = {"reduction", plan, launch};
