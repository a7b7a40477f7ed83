/* signatures.c - lab.lab._signatures() and lab.lab._launch_scopes(), for the generated fuzz.
 *
 * _signatures() gathers every binding file's table of (function, signature) and returns, for each
 * function, its parameters as the table declares them: name, kind, whether None is accepted,
 * whether it must be given, whether it may be passed by position. tests/test_contract.py
 * checks each public function of lab.lab against it (an entry point with no row fails), and
 * tests/fuzz_calls.py draws every argument from its kind's families. */
#include "testing/signatures.h"

#include "binding/attention.h"
#include "binding/elementwise.h"
#include "binding/float8.h"
#include "binding/foreach.h"
#include "binding/linear_ce.h"
#include "binding/matmul.h"
#include "binding/random.h"
#include "binding/raw_kernel.h"
#include "binding/reduction.h"
#include "binding/rope.h"
#include "binding/rowwise.h"
#include "binding/runtime.h"
#include "binding/runtime_types.h"

static const char *const KIND_NAMES[LAB_NUM_KINDS] = {
#define LAB_KIND(id, name, expected) [LAB_##id] = name,
#include "binding/param_kinds.def"
#undef LAB_KIND
};

static PyObject *describe(lab_state *state, const lab_signature *sig) {
    PyObject *params = PyTuple_New(sig->n_params);
    for (int i = 0; params && i < sig->n_params; i++) {
        const int spec = sig->params[i].spec, kind = spec & LAB_KIND_MASK;
        const int known = kind > 0 && kind < LAB_NUM_KINDS;
        PyObject *row = Py_BuildValue("(OsOOO)", state->names[sig->params[i].name],
                                      known ? KIND_NAMES[kind] : "?", spec & LAB_OR_NONE ? Py_True : Py_False,
                                      i < sig->n_required || (spec & LAB_REQUIRED) ? Py_True : Py_False,
                                      i < sig->n_positional ? Py_True : Py_False);
        if (!row) {
            Py_CLEAR(params);
        } else {
            PyTuple_SET_ITEM(params, i, row);
        }
    }
    return params;
}

static PyObject *py_signatures(PyObject *module, PyObject *unused) {
    lab_state *state = lab_get_state(module);
    const lab_signed_function *const tables[] = {
        lab_elementwise_signatures, lab_foreach_signatures, lab_reduction_signatures,
        lab_rowwise_signatures,     lab_matmul_signatures,  lab_linear_ce_signatures,
        lab_rope_signatures,        lab_random_signatures,  lab_raw_kernel_signatures,
        lab_runtime_signatures,     lab_stream_signatures,  lab_array_signatures,
        lab_attention_signatures,   lab_graph_signatures,   lab_float8_signatures,
    };
    PyObject *result = PyDict_New();
    for (size_t t = 0; result && t < sizeof tables / sizeof tables[0]; t++) {
        for (const lab_signed_function *f = tables[t]; f->func; f++) {
            PyObject *params = describe(state, f->signature);
            if (!params || PyDict_SetItemString(result, f->func, params) < 0) Py_CLEAR(result);
            Py_XDECREF(params);
            if (!result) break;
        }
    }
    return result;
}

static PyObject *py_launch_scopes(PyObject *module, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(lab_get_state(module)->dispatch.launch_scopes);
}

PyMethodDef lab_signatures_methods[] = {
    {"_signatures", py_signatures, METH_NOARGS,
     "_signatures()\n--\n\nPrivate: {function: ((name, kind, accepts None, required, positional), ...)} for "
     "every signature table the binding parses calls with. For the generated fuzz."},
    {"_launch_scopes", py_launch_scopes, METH_NOARGS,
     "_launch_scopes()\n--\n\nPrivate: how many calls have reached a launch scope in this module. A call "
     "refused with TypeError or ValueError must not have added one."},
    {NULL, NULL, 0, NULL},
};
