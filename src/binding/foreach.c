/* foreach.c - lists of arrays in one launch: lab.foreach_add/mul/axpby/scale/copy/norm and the fused
 * optimizer steps lab.sgd_step and lab.adam_step (level 2 for dispatch/list_kind.c).
 *
 * Each function parses its arguments, reads its scalars and every array of every list, and hands
 * the call to the op driver as the list kind, whose plan checks the lists and chooses the launches.
 * Which lists an op reads and writes comes from kernels/list_ops.def, never from here. */
#include "binding/foreach.h"

#include <math.h>
#include <string.h>

#include "binding/args.h"
#include "binding/array_reader.h"
#include "binding/errors.h"
#include "dispatch/list_kind.h"

/* Array i of list k into *out. An in-place call passes the same object in two lists
 * (foreach_add(xs, ys, xs)): one read serves both, a third of such a call's reading saved. The
 * snapshots hold both, so the object read is the object that would be read again. */
static int read_once(lab_state *state, const char *func, const char *name, int i, int k,
                     PyObject *const *snapshots, lab_array *const *lists, lab_array *out) {
    PyObject *item = PyTuple_GET_ITEM(snapshots[k], i);
    for (int earlier = 0; earlier < k; earlier++) {
        if (PyTuple_GET_ITEM(snapshots[earlier], i) == item) {
            *out = lists[earlier][i];
            return 0;
        }
    }
    return lab_read_array_item(state, item, func, name, i, out);
}

/* Reads the op's lists (objects[k], called names[k]) into c->lists, one allocation for all of
 * them (*storage, which the caller frees): each a list or tuple, all of one length.
 *
 * Each list is copied into a tuple first (a tuple passes through as it is), held in snapshots[]
 * until the call is done: reading an array can run Python code (a __cuda_array_interface__
 * property) that empties the user's list, which would free the arrays lab is reading or has read.
 * The tuple keeps every array - and so its memory - alive through the launch. */
static int read_lists(lab_state *state, const char *func, PyObject *const *objects, const char *const *names,
                      lab_list_call *c, PyObject **snapshots, lab_array **storage) {
    const int n_lists = lab_list_op_roles[c->op].n_lists;
    for (int k = 0; k < n_lists; k++) {
        if (!PyList_Check(objects[k]) && !PyTuple_Check(objects[k])) {
            PyErr_Format(PyExc_TypeError, "%s(): '%s' must be a list or tuple of CUDA arrays, got %s", func,
                         names[k], Py_TYPE(objects[k])->tp_name);
            return -1;
        }
        snapshots[k] = PySequence_Tuple(objects[k]);
        if (!snapshots[k]) return -1;
        const Py_ssize_t length = PyTuple_GET_SIZE(snapshots[k]);
        if (k == 0) c->n = (int)length;
        if (length != c->n) {
            PyErr_Format(PyExc_ValueError, "%s(): '%s' has %zd arrays but '%s' has %d; the lists must match",
                         func, names[k], length, names[0], c->n);
            return -1;
        }
    }
    *storage = PyMem_Calloc((size_t)n_lists * (size_t)c->n + 1, sizeof(lab_array));
    if (!*storage) {
        PyErr_NoMemory();
        return -1;
    }
    for (int k = 0; k < n_lists; k++) {
        c->names[k] = names[k];
        c->lists[k] = *storage + (size_t)k * (size_t)c->n;
        for (int i = 0; i < c->n; i++) {
            if (read_once(state, func, names[k], i, k, snapshots, c->lists, &c->lists[k][i]) < 0) return -1;
        }
    }
    return 0;
}

/* Reads the lists and runs the op through the driver; returns `result` (new reference) or NULL. */
static PyObject *run_list_op(lab_state *state, const char *func, lab_list_call *c, PyObject *const *objects,
                             const char *const *names, PyObject *stream_obj, PyObject *result) {
    const lab_list_roles *roles = &lab_list_op_roles[c->op];
    lab_op_call call = {.func = func, .description = c};
    lab_array *storage = NULL;
    PyObject *snapshots[LAB_MAX_OPERANDS] = {NULL};
    PyObject *returned = NULL;
    c->plan = NULL;
    if (lab_parse_stream_arg(state, stream_obj, func, &call.stream) < 0) goto done;
    if (read_lists(state, func, objects, names, c, snapshots, &storage) < 0) goto done;
    for (int k = 0; k < roles->n_lists; k++) {
        lab_op_call_add(&call, names[k], c->lists[k], c->n, 1, (roles->writes >> k) & 1);
    }
    if (c->norms) lab_op_call_add(&call, "out", c->norms, 1, 0, 1);
    if (lab_run_op(&state->dispatch, &lab_list_kind, &call) == 0) {
        returned = Py_NewRef(result);
    } else {
        lab_raise_failure(&state->dispatch);
    }
done:
    lab_list_call_release(c);
    PyMem_Free(storage);
    for (int k = 0; k < roles->n_lists; k++) Py_XDECREF(snapshots[k]);
    return returned;
}

/* ---- the Python functions ---- */

#define P LAB_PARAM
#define STREAM P(stream, STREAM | LAB_OR_NONE)
static const lab_signature FOREACH_BINARY = {
    3, 3, 5, {P(xs, ARRAYS), P(ys, ARRAYS), P(outs, ARRAYS), P(alpha, REAL), STREAM}};
static const lab_signature FOREACH_MUL = {3, 3, 4, {P(xs, ARRAYS), P(ys, ARRAYS), P(outs, ARRAYS), STREAM}};
static const lab_signature FOREACH_AXPBY = {
    5, 5, 6, {P(alpha, REAL), P(xs, ARRAYS), P(beta, REAL), P(ys, ARRAYS), P(outs, ARRAYS), STREAM}};
static const lab_signature FOREACH_SCALE = {
    3, 3, 4, {P(xs, ARRAYS), P(scalar, REAL), P(outs, ARRAYS), STREAM}};
static const lab_signature FOREACH_COPY = {2, 2, 3, {P(srcs, ARRAYS), P(dsts, ARRAYS), STREAM}};
static const lab_signature FOREACH_NORM = {2, 2, 3, {P(xs, ARRAYS), P(out, ARRAY), STREAM}};
static const lab_signature SGD_STEP = {3,
                                       3,
                                       10,
                                       {P(params, ARRAYS), P(grads, ARRAYS),
                                        P(momentum_bufs, ARRAYS | LAB_OR_NONE), P(lr, REAL | LAB_REQUIRED),
                                        P(momentum, REAL), P(dampening, REAL), P(weight_decay, REAL),
                                        P(nesterov, FLAG), P(first_step, FLAG), STREAM}};
static const lab_signature ADAM_STEP = {
    4,
    4,
    12,
    {P(params, ARRAYS), P(grads, ARRAYS), P(exp_avgs, ARRAYS), P(exp_avg_sqs, ARRAYS),
     P(step, INT | LAB_REQUIRED), P(lr, REAL | LAB_REQUIRED), P(beta1, REAL), P(beta2, REAL), P(eps, REAL),
     P(weight_decay, REAL), P(decoupled_weight_decay, FLAG), STREAM}};
#undef STREAM
#undef P

static lab_list_call make_call(lab_mt_op op, double alpha, double beta) {
    lab_list_call c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.params.alpha = (float)alpha;
    c.params.beta = (float)beta;
    c.scalars = (lab_scalars){{alpha, beta}, {(int64_t)alpha, (int64_t)beta}};
    return c;
}

/* foreach_add(xs, ys, outs, *, alpha=1) / foreach_mul(xs, ys, outs) */
static PyObject *foreach_binary(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                const char *func, lab_mt_op op) {
    lab_state *state = lab_get_state(module);
    const lab_signature *signature = op == LAB_MT_ADD ? &FOREACH_BINARY : &FOREACH_MUL;
    PyObject *slots[5] = {NULL};
    if (lab_parse_args(state, func, signature, args, nargs, kwnames, slots) < 0) return NULL;
    double alpha = 1.0;
    if (op == LAB_MT_ADD && lab_read_real(slots[3], func, "alpha", &alpha) < 0) return NULL;
    static const char *const names[] = {"xs", "ys", "outs"};
    lab_list_call c = make_call(op, alpha, 1.0);
    return run_list_op(state, func, &c, slots, names, slots[op == LAB_MT_ADD ? 4 : 3], slots[2]);
}

static PyObject *py_foreach_add(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) {
    return foreach_binary(m, a, n, k, "foreach_add", LAB_MT_ADD);
}
static PyObject *py_foreach_mul(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) {
    return foreach_binary(m, a, n, k, "foreach_mul", LAB_MT_MUL);
}

static PyObject *py_foreach_axpby(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "foreach_axpby";
    PyObject *slots[6];
    if (lab_parse_args(state, func, &FOREACH_AXPBY, args, nargs, kwnames, slots) < 0) return NULL;
    double alpha, beta;
    if (lab_read_real(slots[0], func, "alpha", &alpha) < 0 ||
        lab_read_real(slots[2], func, "beta", &beta) < 0) {
        return NULL;
    }
    static const char *const names[] = {"xs", "ys", "outs"};
    PyObject *objects[3] = {slots[1], slots[3], slots[4]};
    lab_list_call c = make_call(LAB_MT_AXPBY, alpha, beta);
    return run_list_op(state, func, &c, objects, names, slots[5], slots[4]);
}

static PyObject *py_foreach_scale(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "foreach_scale";
    PyObject *slots[4];
    if (lab_parse_args(state, func, &FOREACH_SCALE, args, nargs, kwnames, slots) < 0) return NULL;
    double scalar;
    if (lab_read_real(slots[1], func, "scalar", &scalar) < 0) return NULL;
    static const char *const names[] = {"xs", "outs"};
    PyObject *objects[2] = {slots[0], slots[2]};
    lab_list_call c = make_call(LAB_MT_SCALE, scalar, 1.0);
    return run_list_op(state, func, &c, objects, names, slots[3], slots[2]);
}

static PyObject *py_foreach_copy(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "foreach_copy";
    PyObject *slots[3];
    if (lab_parse_args(state, func, &FOREACH_COPY, args, nargs, kwnames, slots) < 0) return NULL;
    static const char *const names[] = {"srcs", "dsts"};
    lab_list_call c = make_call(LAB_MT_COPY, 1.0, 1.0);
    return run_list_op(state, func, &c, slots, names, slots[2], slots[1]);
}

static PyObject *py_foreach_norm(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "foreach_norm";
    PyObject *slots[3];
    if (lab_parse_args(state, func, &FOREACH_NORM, args, nargs, kwnames, slots) < 0) return NULL;
    lab_array norms; /* its length is checked by the plan, against the snapshot of xs actually read */
    if (lab_read_array(state, slots[1], func, "out", &norms) < 0) return NULL;
    if (lab_check_writable(&norms, func, "out") < 0) return lab_raise_failure(&state->dispatch);
    static const char *const names[] = {"xs"};
    lab_list_call c = make_call(LAB_MT_NORM, 1.0, 1.0);
    c.norms = &norms;
    return run_list_op(state, func, &c, slots, names, slots[2], slots[1]);
}

/* sgd_step(params, grads, momentum_bufs, *, lr, momentum=0, dampening=0, weight_decay=0,
 *          nesterov=False, first_step=False) */
static PyObject *py_sgd_step(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "sgd_step";
    PyObject *slots[10];
    if (lab_parse_args(state, func, &SGD_STEP, args, nargs, kwnames, slots) < 0) return NULL;
    double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
    int nesterov = 0, first_step = 0;
    if (lab_read_real_in(slots[3], func, "lr", &LAB_NONNEGATIVE, &lr) < 0 ||
        lab_read_real_in(slots[4], func, "momentum", &LAB_NONNEGATIVE, &momentum) < 0 ||
        lab_read_real_in(slots[5], func, "dampening", &LAB_UNIT, &dampening) < 0 ||
        lab_read_real_in(slots[6], func, "weight_decay", &LAB_NONNEGATIVE, &weight_decay) < 0 ||
        lab_read_flag(slots[7], func, "nesterov", &nesterov) < 0 ||
        lab_read_flag(slots[8], func, "first_step", &first_step) < 0) {
        return NULL;
    }
    if (nesterov && (momentum <= 0 || dampening != 0)) {
        /* PyErr_Format has no %g (Python 3.12 raises SystemError on it): the numbers go as floats' reprs. */
        PyObject *momentum_number = PyFloat_FromDouble(momentum);
        PyObject *dampening_number = momentum_number ? PyFloat_FromDouble(dampening) : NULL;
        if (dampening_number) {
            PyErr_Format(
                PyExc_ValueError,
                "%s(): argument 'nesterov' = True needs a momentum > 0 and dampening 0 (got momentum %R, "
                "dampening %R)",
                func, momentum_number, dampening_number);
        }
        Py_XDECREF(momentum_number);
        Py_XDECREF(dampening_number);
        return NULL;
    }
    const int with_momentum = momentum != 0;
    if (with_momentum && !slots[2]) {
        return PyErr_Format(
            PyExc_TypeError,
            "%s(): argument 'momentum_bufs' must be a list of arrays with momentum=%R, got None", func,
            slots[4]);
    }
    static const char *const names[] = {"params", "grads", "momentum_bufs"};
    lab_list_call c = make_call(with_momentum ? LAB_MT_SGD_MOMENTUM : LAB_MT_SGD, 1.0, 1.0);
    c.params.lr = (float)lr;
    c.params.momentum = (float)momentum;
    c.params.dampening = (float)dampening;
    c.params.weight_decay = (float)weight_decay;
    c.params.nesterov = nesterov;
    c.params.first_step = first_step;
    return run_list_op(state, func, &c, slots, names, slots[9], Py_None);
}

/* adam_step(params, grads, exp_avgs, exp_avg_sqs, *, step, lr, beta1=0.9, beta2=0.999, eps=1e-8,
 *           weight_decay=0, decoupled_weight_decay=False) */
static PyObject *py_adam_step(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "adam_step";
    PyObject *slots[12];
    if (lab_parse_args(state, func, &ADAM_STEP, args, nargs, kwnames, slots) < 0) return NULL;
    int64_t step = 1;
    double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
    int decoupled = 0;
    if (lab_read_int_in(slots[4], func, "step", &LAB_POSITIVE_INT, &step) < 0 ||
        lab_read_real_in(slots[5], func, "lr", &LAB_NONNEGATIVE, &lr) < 0 ||
        lab_read_real_in(slots[6], func, "beta1", &LAB_UNIT_OPEN, &beta1) < 0 ||
        lab_read_real_in(slots[7], func, "beta2", &LAB_UNIT_OPEN, &beta2) < 0 ||
        lab_read_real_in(slots[8], func, "eps", &LAB_NONNEGATIVE, &eps) < 0 ||
        lab_read_real_in(slots[9], func, "weight_decay", &LAB_NONNEGATIVE, &weight_decay) < 0 ||
        lab_read_flag(slots[10], func, "decoupled_weight_decay", &decoupled) < 0) {
        return NULL;
    }
    static const char *const names[] = {"params", "grads", "exp_avgs", "exp_avg_sqs"};
    /* Bias corrections in double on the host, as torch computes them in Python floats. */
    const double bias_correction1 = 1.0 - pow(beta1, (double)step);
    const double bias_correction2 = 1.0 - pow(beta2, (double)step);
    lab_list_call c = make_call(LAB_MT_ADAM, 1.0, 1.0);
    c.params.lr = (float)lr;
    c.params.beta1 = (float)beta1;
    c.params.beta2 = (float)beta2;
    c.params.eps = (float)eps;
    c.params.weight_decay = (float)weight_decay;
    c.params.decoupled_weight_decay = decoupled;
    c.params.step_size = (float)(lr / bias_correction1);
    c.params.bias_correction2_sqrt = (float)sqrt(bias_correction2);
    return run_list_op(state, func, &c, slots, names, slots[11], Py_None);
}

#define LAB_LIST_DOC                                                                                         \
    " Lists are lists or tuples of CUDA arrays of equal length; the arrays at one index have one "           \
    "shape. One launch covers many arrays (contiguous float16/bfloat16/float32); others take a slower, "     \
    "correct path."

PyMethodDef lab_foreach_methods[] = {
    {"foreach_add", (PyCFunction)(void (*)(void))py_foreach_add, METH_FASTCALL | METH_KEYWORDS,
     "foreach_add(xs, ys, outs, *, alpha=1, stream=None)\n--\n\nouts[i] = xs[i] + alpha * ys[i]; returns "
     "outs." LAB_LIST_DOC},
    {"foreach_mul", (PyCFunction)(void (*)(void))py_foreach_mul, METH_FASTCALL | METH_KEYWORDS,
     "foreach_mul(xs, ys, outs, *, stream=None)\n--\n\nouts[i] = xs[i] * ys[i]; returns outs." LAB_LIST_DOC},
    {"foreach_axpby", (PyCFunction)(void (*)(void))py_foreach_axpby, METH_FASTCALL | METH_KEYWORDS,
     "foreach_axpby(alpha, xs, beta, ys, outs, *, stream=None)\n--\n\nouts[i] = alpha * xs[i] + beta * "
     "ys[i]; returns "
     "outs." LAB_LIST_DOC},
    {"foreach_scale", (PyCFunction)(void (*)(void))py_foreach_scale, METH_FASTCALL | METH_KEYWORDS,
     "foreach_scale(xs, scalar, outs, *, stream=None)\n--\n\nouts[i] = scalar * xs[i]; returns "
     "outs." LAB_LIST_DOC},
    {"foreach_copy", (PyCFunction)(void (*)(void))py_foreach_copy, METH_FASTCALL | METH_KEYWORDS,
     "foreach_copy(srcs, dsts, *, stream=None)\n--\n\ndsts[i][...] = srcs[i]; returns dsts." LAB_LIST_DOC},
    {"foreach_norm", (PyCFunction)(void (*)(void))py_foreach_norm, METH_FASTCALL | METH_KEYWORDS,
     "foreach_norm(xs, out, *, stream=None)\n--\n\nout[i] = L2 norm of xs[i], into a 1-D float32 CUDA array "
     "of len(xs) "
     "elements, with no host sync; returns out." LAB_LIST_DOC},
    {"sgd_step", (PyCFunction)(void (*)(void))py_sgd_step, METH_FASTCALL | METH_KEYWORDS,
     "sgd_step(params, grads, momentum_bufs, *, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False, "
     "first_step=False, stream=None)\n--\n\nOne torch.optim.SGD step over all params, in place (float32 "
     "math). "
     "momentum_bufs may be None without momentum; pass first_step=True on the first step, where torch starts "
     "the "
     "buffer as a copy of the gradient." LAB_LIST_DOC},
    {"adam_step", (PyCFunction)(void (*)(void))py_adam_step, METH_FASTCALL | METH_KEYWORDS,
     "adam_step(params, grads, exp_avgs, exp_avg_sqs, *, step, lr, beta1=0.9, beta2=0.999, eps=1e-08, "
     "weight_decay=0, decoupled_weight_decay=False, stream=None)\n--\n\nOne torch.optim.Adam step "
     "(AdamW with decoupled_weight_decay=True) over all params, in place: the same update and bias "
     "correction, float32 "
     "math for half-precision params; `step` counts from 1. State may be float32 for half "
     "params." LAB_LIST_DOC},
    {NULL, NULL, 0, NULL},
};

const lab_signed_function lab_foreach_signatures[] = {
    {"foreach_add", &FOREACH_BINARY},  {"foreach_mul", &FOREACH_MUL},   {"foreach_axpby", &FOREACH_AXPBY},
    {"foreach_scale", &FOREACH_SCALE}, {"foreach_copy", &FOREACH_COPY}, {"foreach_norm", &FOREACH_NORM},
    {"sgd_step", &SGD_STEP},           {"adam_step", &ADAM_STEP},       {NULL, NULL},
};
