/* elementwise.c - every elementwise function Python sees, and the one path they all share (level 3).
 *
 * lab.add(a, b, out) lands in py_add(), generated below from its row in ops_table.h, which calls
 * run_elementwise() with that row. run_elementwise() parses the arguments, reads each array into a
 * lab_array, has plan.c validate them and plan the launch (broadcasting, dtypes, layout, overlap),
 * checks scalars, and only then touches CUDA: locate the operands' memory and check they share a device,
 * then launch inside launch_scope.c's bracket (stream, device, ordering, error). */
#include "elementwise.h"

#include "args.h"
#include "array.h"
#include "device.h"
#include "dtype.h"
#include "kernels/launch.h"
#include "launch_scope.h"
#include "plan.h"
#include "stream.h"

/* What each parameter of a signature family means to run_elementwise. */
typedef enum { ROLE_INPUT, ROLE_OUTPUT, ROLE_ALPHA, ROLE_BETA, ROLE_SCALE, ROLE_APPROXIMATE, ROLE_STREAM } lab_role;

typedef struct {
    lab_signature signature;
    lab_role roles[LAB_MAX_PARAMS];
} lab_family;

#define N(id) LAB_NAME_##id
static const lab_family FAMILY_UNARY = {{2, 2, 3, {N(x), N(out), N(stream)}}, {ROLE_INPUT, ROLE_OUTPUT, ROLE_STREAM}};
static const lab_family FAMILY_COPY = {{2, 2, 3, {N(src), N(dst), N(stream)}}, {ROLE_INPUT, ROLE_OUTPUT, ROLE_STREAM}};
static const lab_family FAMILY_GELU = {{2, 2, 4, {N(x), N(out), N(approximate), N(stream)}},
                                       {ROLE_INPUT, ROLE_OUTPUT, ROLE_APPROXIMATE, ROLE_STREAM}};
static const lab_family FAMILY_BINARY = {{3, 3, 4, {N(a), N(b), N(out), N(stream)}},
                                         {ROLE_INPUT, ROLE_INPUT, ROLE_OUTPUT, ROLE_STREAM}};
static const lab_family FAMILY_ADD = {{3, 3, 5, {N(a), N(b), N(out), N(alpha), N(stream)}},
                                      {ROLE_INPUT, ROLE_INPUT, ROLE_OUTPUT, ROLE_ALPHA, ROLE_STREAM}};
static const lab_family FAMILY_FUSED = {{4, 4, 5, {N(a), N(b), N(s), N(out), N(stream)}},
                                        {ROLE_INPUT, ROLE_INPUT, ROLE_SCALE, ROLE_OUTPUT, ROLE_STREAM}};
static const lab_family FAMILY_AXPBY = {{5, 5, 6, {N(alpha), N(x), N(beta), N(y), N(out), N(stream)}},
                                        {ROLE_ALPHA, ROLE_INPUT, ROLE_BETA, ROLE_INPUT, ROLE_OUTPUT, ROLE_STREAM}};
#undef N

typedef struct {
    const char *name;
    const lab_family *family;
    lab_op op;
    lab_op variant;
} lab_op_entry;

/* Per kernel op, from ops.def: how many array inputs it reads, and whether integer dtypes are allowed. */
static const int OP_INPUTS[LAB_NUM_OPS] = {
#define LAB_OP(id, functor, n_inputs, integers) n_inputs,
#include "kernels/ops.def"
#undef LAB_OP
};
static const int OP_INTEGERS[LAB_NUM_OPS] = {
#define LAB_OP(id, functor, n_inputs, integers) integers,
#include "kernels/ops.def"
#undef LAB_OP
};

static const char *param_name(lab_state *state, const lab_family *family, int i) {
    return PyUnicode_AsUTF8(state->names[family->signature.names[i]]); /* interned ASCII: cached, cannot fail */
}

/* A Python number for a scalar parameter, converted for the op's dtype. */
static int read_scalar(PyObject *obj, lab_dtype dtype, const char *func, const char *argname, double *as_float,
                       int64_t *as_int) {
    if (lab_dtype_is_integer(dtype)) {
        if (PyFloat_Check(obj) || !PyIndex_Check(obj)) {
            PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be an int for integer dtype %s, got %s", func, argname,
                         lab_dtype_names[dtype], Py_TYPE(obj)->tp_name);
            return -1;
        }
        PyObject *index = PyNumber_Index(obj);
        if (!index) return -1;
        int overflow = 0;
        long long value = PyLong_AsLongLongAndOverflow(index, &overflow);
        Py_DECREF(index);
        if (overflow) {
            PyErr_Format(PyExc_OverflowError, "%s(): argument '%s' does not fit in int64", func, argname);
            return -1;
        }
        *as_int = value;
        *as_float = (double)value;
        return 0;
    }
    double value = PyFloat_AsDouble(obj);
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be a real number, got %s", func, argname,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *as_float = value;
    *as_int = 0;
    return 0;
}

static int is_python_number(PyObject *obj) {
    return PyFloat_Check(obj) || PyLong_Check(obj);
}

static int launch(lab_state *state, const lab_operands *ops, const lab_elementwise_launch *plan, PyObject *stream_obj,
                  int stream_given, cudaStream_t stream, const char *func) {
    lab_launch_scope scope;
    if (lab_launch_scope_begin(state, &scope, ops->arrays, ops->count, stream_obj, stream_given, stream) < 0) return -1;
    if (lab_launch_scope_ok(&scope))
        lab_launch_scope_step(&scope, "kernel launch", lab_launch_elementwise(plan, scope.streams.launch));
    if (lab_launch_scope_end(state, &scope, func) < 0) return -1;
    lab_launch_scope_note_stream(&scope, ops->arrays, ops->count);
    return 0;
}

static PyObject *run_elementwise(PyObject *module, const lab_op_entry *entry, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const lab_family *family = entry->family;
    const char *func = entry->name;
    PyObject *slots[LAB_MAX_PARAMS];
    if (lab_parse_args(state, func, &family->signature, args, nargs, kwnames, slots) < 0) return NULL;

    lab_operands ops;
    ops.count = 1;
    PyObject *out_obj = NULL, *alpha = NULL, *beta = NULL, *scale = NULL, *stream_obj = NULL;
    const char *alpha_name = "alpha", *beta_name = "beta", *scale_name = "s";
    lab_op op = entry->op;
    for (int i = 0; i < family->signature.n_params; i++) {
        PyObject *value = slots[i];
        const char *name = param_name(state, family, i);
        switch (family->roles[i]) {
        case ROLE_INPUT:
            ops.names[ops.count] = name;
            if (lab_read_array(state, value, func, name, &ops.arrays[ops.count]) < 0) return NULL;
            ops.count++;
            break;
        case ROLE_SCALE:
            if (is_python_number(value) || !lab_has_array_protocol(state, value)) {
                if (!is_python_number(value)) {
                    PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be a CUDA array or a Python number (int or "
                                 "float), got %s", func, name, Py_TYPE(value)->tp_name);
                    return NULL;
                }
                scale = value;
                scale_name = name;
                op = entry->variant;
            } else {
                ops.names[ops.count] = name;
                if (lab_read_array(state, value, func, name, &ops.arrays[ops.count]) < 0) return NULL;
                ops.count++;
            }
            break;
        case ROLE_OUTPUT:
            out_obj = value;
            ops.names[0] = name;
            if (lab_read_array(state, value, func, name, &ops.arrays[0]) < 0) return NULL;
            break;
        case ROLE_ALPHA: alpha = value; alpha_name = name; break;
        case ROLE_BETA: beta = value; beta_name = name; break;
        case ROLE_APPROXIMATE:
            if (!value || value == LAB_NAME_OBJ(state, none) ||
                (PyUnicode_Check(value) && PyUnicode_Compare(value, LAB_NAME_OBJ(state, none)) == 0)) {
                op = entry->op;
            } else if (PyUnicode_Check(value) && PyUnicode_Compare(value, LAB_NAME_OBJ(state, tanh)) == 0) {
                op = entry->variant;
            } else {
                PyErr_Format(PyExc_ValueError, "%s(): argument 'approximate' must be 'none' or 'tanh', got %R", func, value);
                return NULL;
            }
            break;
        case ROLE_STREAM: stream_obj = value; break;
        }
    }
    if (ops.count - 1 != OP_INPUTS[op]) {  /* a table bug, not a user error */
        PyErr_Format(PyExc_SystemError, "%s(): op table expects %d inputs, got %d", func, OP_INPUTS[op], ops.count - 1);
        return NULL;
    }
    lab_elementwise_launch plan;
    if (lab_plan_elementwise(&ops, OP_INTEGERS[op], func, &plan) < 0) return NULL;
    plan.op = op;

    /* Scalars take the compute type: integers for integer arithmetic, else any real number. */
    plan.scalars = (lab_scalars){{1.0, 1.0}, {1, 1}};
    if (alpha && read_scalar(alpha, plan.compute, func, alpha_name, &plan.scalars.as_float[0], &plan.scalars.as_int[0]) < 0)
        return NULL;
    if (scale && read_scalar(scale, plan.compute, func, scale_name, &plan.scalars.as_float[0], &plan.scalars.as_int[0]) < 0)
        return NULL;
    if (beta && read_scalar(beta, plan.compute, func, beta_name, &plan.scalars.as_float[1], &plan.scalars.as_int[1]) < 0)
        return NULL;

    int stream_given = 0;
    cudaStream_t stream = 0;
    if (lab_parse_stream_arg(state, stream_obj, func, &stream_given, &stream) < 0) return NULL;

    if (lab_check_same_device(ops.arrays, ops.names, ops.count, func) < 0) return NULL; /* devices the protocols named */
    if (plan.path == LAB_PATH_EMPTY) return Py_NewRef(out_obj); /* nothing to do: no CUDA call, no launch */
    if (lab_locate_memory(state, ops.arrays, ops.names, ops.count, func) < 0) return NULL;
    if (lab_check_same_device(ops.arrays, ops.names, ops.count, func) < 0) return NULL; /* and the located ones */
    if (launch(state, &ops, &plan, stream_obj, stream_given, stream, func) < 0) return NULL;
    return Py_NewRef(out_obj);
}

/* One METH_FASTCALL function per row of ops_table.h, each passing its row to run_elementwise. */
#define LAB_PY_OP(py_name, family, op, variant, doc)                                                              \
    static const lab_op_entry ENTRY_##py_name = {#py_name, &FAMILY_##family, LAB_OP_##op, LAB_OP_##variant};    \
    static PyObject *py_##py_name(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) { \
        return run_elementwise(module, &ENTRY_##py_name, args, nargs, kwnames);                                   \
    }
#include "ops_table.h"
#undef LAB_PY_OP

PyMethodDef lab_elementwise_methods[] = {
#define LAB_PY_OP(py_name, family, op, variant, doc) \
    {#py_name, (PyCFunction)(void (*)(void))py_##py_name, METH_FASTCALL | METH_KEYWORDS, doc},
#include "ops_table.h"
#undef LAB_PY_OP
    {NULL, NULL, 0, NULL},
};
