/* elementwise.c - every elementwise function Python sees (level 2).
 *
 * lab.add(a, b, out) lands in py_add(), generated below from its row in ops_table.h, which calls
 * run_elementwise() with that row. run_elementwise() parses the arguments against the row's
 * signature family, reads each array into a lab_array and each scalar into a lab_scalar_arg, and
 * hands the call to the op driver (dispatch/driver.c) as the elementwise kind: the kind plans
 * (dispatch/elementwise_kind.c, on top of the iterator) and the driver does the rest - devices,
 * stream, launch, errors - exactly as for every other op. */
#include "binding/elementwise.h"

#include "binding/args.h"
#include "binding/array_reader.h"
#include "binding/errors.h"
#include "dispatch/elementwise_kind.h"

/* What each parameter of a signature family means to run_elementwise. */
typedef enum {
    ROLE_INPUT,
    ROLE_OUTPUT,
    ROLE_ALPHA,
    ROLE_BETA,
    ROLE_SCALE,
    ROLE_APPROXIMATE,
    ROLE_STREAM
} lab_role;

typedef struct {
    lab_signature signature;
    lab_role roles[LAB_MAX_PARAMS];
} lab_family;

#define P LAB_PARAM
#define STREAM P(stream, STREAM | LAB_OR_NONE)
static const lab_family FAMILY_UNARY = {{2, 2, 3, {P(x, ARRAY), P(out, ARRAY), STREAM}},
                                        {ROLE_INPUT, ROLE_OUTPUT, ROLE_STREAM}};
static const lab_family FAMILY_COPY = {{2, 2, 3, {P(src, ARRAY), P(dst, ARRAY), STREAM}},
                                       {ROLE_INPUT, ROLE_OUTPUT, ROLE_STREAM}};
static const lab_family FAMILY_GELU = {
    {2, 2, 4, {P(x, ARRAY), P(out, ARRAY), P(approximate, CHOICE), STREAM}},
    {ROLE_INPUT, ROLE_OUTPUT, ROLE_APPROXIMATE, ROLE_STREAM}};
static const lab_family FAMILY_BINARY = {{3, 3, 4, {P(a, ARRAY), P(b, ARRAY), P(out, ARRAY), STREAM}},
                                         {ROLE_INPUT, ROLE_INPUT, ROLE_OUTPUT, ROLE_STREAM}};
static const lab_family FAMILY_GLU = {{3, 3, 4, {P(gate, ARRAY), P(up, ARRAY), P(out, ARRAY), STREAM}},
                                      {ROLE_INPUT, ROLE_INPUT, ROLE_OUTPUT, ROLE_STREAM}};
static const lab_family FAMILY_ADD = {
    {3, 3, 5, {P(a, ARRAY), P(b, ARRAY), P(out, ARRAY), P(alpha, REAL), STREAM}},
    {ROLE_INPUT, ROLE_INPUT, ROLE_OUTPUT, ROLE_ALPHA, ROLE_STREAM}};
static const lab_family FAMILY_FUSED = {
    {4, 4, 5, {P(a, ARRAY), P(b, ARRAY), P(s, ARRAY_OR_NUMBER), P(out, ARRAY), STREAM}},
    {ROLE_INPUT, ROLE_INPUT, ROLE_SCALE, ROLE_OUTPUT, ROLE_STREAM}};
static const lab_family FAMILY_AXPBY = {
    {5, 5, 6, {P(alpha, REAL), P(x, ARRAY), P(beta, REAL), P(y, ARRAY), P(out, ARRAY), STREAM}},
    {ROLE_ALPHA, ROLE_INPUT, ROLE_BETA, ROLE_INPUT, ROLE_OUTPUT, ROLE_STREAM}};
#undef STREAM
#undef P

typedef struct {
    const char *name;
    const lab_family *family;
    lab_op op;
    lab_op variant;
} lab_op_entry;

static const char *param_name(lab_state *state, const lab_family *family, int i) {
    return PyUnicode_AsUTF8(
        state->names[family->signature.params[i].name]); /* interned ASCII: cached, cannot fail */
}

static int is_python_number(PyObject *obj) { return PyFloat_Check(obj) || PyLong_Check(obj); }

/* Parse, read every argument into the elementwise kind's description, and hand the call to the
 * driver. The output goes first among the operands: it decides the device and stream. */
static PyObject *run_elementwise(PyObject *module, const lab_op_entry *entry, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const lab_family *family = entry->family;
    const char *func = entry->name;
    PyObject *slots[LAB_MAX_PARAMS];
    if (lab_parse_args(state, func, &family->signature, args, nargs, kwnames, slots) < 0) return NULL;

    lab_elementwise_call description;
    lab_operands *ops = &description.operands;
    ops->count = 1;
    ops->n_outputs = 1;
    description.op = entry->op;
    description.scalars[0].name = description.scalars[1].name = NULL;
    PyObject *out_obj = NULL, *stream_obj = NULL;
    for (int i = 0; i < family->signature.n_params; i++) {
        PyObject *value = slots[i];
        const char *name = param_name(state, family, i);
        switch (family->roles[i]) {
        case ROLE_SCALE:
            if (is_python_number(value) || !lab_has_array_protocol(state, value)) {
                if (!is_python_number(value)) {
                    PyErr_Format(PyExc_TypeError,
                                 "%s(): argument '%s' must be a CUDA array or a Python number (int or "
                                 "float), got %s",
                                 func, name, Py_TYPE(value)->tp_name);
                    return NULL;
                }
                if (lab_read_scalar(value, func, name, &description.scalars[0]) < 0) return NULL;
                description.op = entry->variant;
                break;
            }
            /* an array: an input like any other */
            /* fall through */
        case ROLE_INPUT:
            ops->names[ops->count] = name;
            if (lab_read_array(state, value, func, name, &ops->arrays[ops->count]) < 0) return NULL;
            ops->count++;
            break;
        case ROLE_OUTPUT:
            out_obj = value;
            ops->names[0] = name;
            if (lab_read_array(state, value, func, name, &ops->arrays[0]) < 0) return NULL;
            break;
        case ROLE_ALPHA:
        case ROLE_BETA:
            if (value &&
                lab_read_scalar(value, func, name, &description.scalars[family->roles[i] == ROLE_BETA]) < 0) {
                return NULL;
            }
            break;
        case ROLE_APPROXIMATE:
            if (!value || value == LAB_NAME_OBJ(state, none) ||
                (PyUnicode_Check(value) && PyUnicode_Compare(value, LAB_NAME_OBJ(state, none)) == 0)) {
                description.op = entry->op;
            } else if (PyUnicode_Check(value) && PyUnicode_Compare(value, LAB_NAME_OBJ(state, tanh)) == 0) {
                description.op = entry->variant;
            } else {
                PyErr_Format(PyExc_ValueError,
                             "%s(): argument 'approximate' must be 'none' or 'tanh', got %R", func, value);
                return NULL;
            }
            break;
        case ROLE_STREAM: stream_obj = value; break;
        }
    }
    lab_op_call call = {.func = func, .description = &description};
    if (lab_parse_stream_arg(state, stream_obj, func, &call.stream) < 0) return NULL;
    for (int i = 0; i < ops->count; i++) lab_op_call_add(&call, ops->names[i], &ops->arrays[i], 1, 0, i == 0);
    if (lab_run_op(&state->dispatch, &lab_elementwise_kind, &call) < 0) {
        return lab_raise_failure(&state->dispatch);
    }
    return Py_NewRef(out_obj);
}

/* One METH_FASTCALL function per row of ops_table.h, each passing its row to run_elementwise. */
#define LAB_PY_OP(py_name, family, op, variant, doc)                                                         \
    static const lab_op_entry ENTRY_##py_name = {#py_name, &FAMILY_##family, LAB_OP_##op, LAB_OP_##variant}; \
    static PyObject *py_##py_name(PyObject *module, PyObject *const *args, Py_ssize_t nargs,                 \
                                  PyObject *kwnames) {                                                       \
        return run_elementwise(module, &ENTRY_##py_name, args, nargs, kwnames);                              \
    }
#include "binding/ops_table.h"
#undef LAB_PY_OP

PyMethodDef lab_elementwise_methods[] = {
#define LAB_PY_OP(py_name, family, op, variant, doc)                                                         \
    {#py_name, (PyCFunction)(void (*)(void))py_##py_name, METH_FASTCALL | METH_KEYWORDS, doc},
#include "binding/ops_table.h"
#undef LAB_PY_OP
    {NULL, NULL, 0, NULL},
};

const lab_signed_function lab_elementwise_signatures[] = {
#define LAB_PY_OP(py_name, family, op, variant, doc) {#py_name, &FAMILY_##family.signature},
#include "binding/ops_table.h"
#undef LAB_PY_OP
    {NULL, NULL},
};
