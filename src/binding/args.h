/* args.h - hand-parsed METH_FASTCALL | METH_KEYWORDS arguments.
 *
 * A call arrives as a C array of positional arguments plus a tuple of keyword names whose values
 * follow the positionals in the same array. lab_parse_args matches both against a signature of
 * interned names (pointer comparison first) and fills one borrowed slot per parameter, creating no
 * Python objects. Errors read like CPython's own ("add() got an unexpected keyword argument 'x'"). */
#ifndef LAB_ARGS_H
#define LAB_ARGS_H

#include <assert.h>

#include "binding/module_state.h"
#include "dispatch/operand.h"
#include "dispatch/stream.h"

#define LAB_MAX_PARAMS 20

/* What a parameter takes. The kind says how the function reads it, and what lab.lab._signatures()
 * reports for it: the generated fuzz (tests/fuzz_calls.py) draws each argument from the kind's
 * families, so an entry point is fuzzed the day its table row exists. */
typedef enum {
    LAB_KIND_NONE = 0, /* no row has it: every kind is one of the rows below */
#define LAB_KIND(id, name, expected) LAB_##id,
#include "binding/param_kinds.def"
#undef LAB_KIND
    LAB_NUM_KINDS
} lab_param_kind;
#define LAB_KIND_MASK 0xff
#define LAB_OR_NONE 0x100  /* None is accepted, and means "not given" */
#define LAB_REQUIRED 0x200 /* a keyword-only parameter that must be given */

typedef struct {
    lab_name name;
    int spec; /* a lab_param_kind, with LAB_OR_NONE and LAB_REQUIRED */
} lab_param;

/* A function's parameters, in its text signature's order: positional ones (the first n_required
 * must be given), then keyword-only ones. Whether an argument may be None is data here, checked
 * once by lab_parse_args for every function: no function tests for None in its own loop. */
typedef struct {
    int n_required;   /* leading parameters that must be given */
    int n_positional; /* leading parameters that may be passed by position (>= n_required) */
    int n_params;     /* positional ones, then keyword-only ones */
    lab_param params[LAB_MAX_PARAMS];
} lab_signature;

/* The signature of a function that takes no arguments (registered like the others). */
extern const lab_signature LAB_NO_PARAMETERS;

/* A signature's row: LAB_PARAM(out, ARRAY), LAB_PARAM(k, ARRAY | LAB_OR_NONE). */
#define LAB_PARAM(id, spec) {LAB_NAME_##id, LAB_##spec}

/* One row of a binding file's table of the signatures it parses with (lab.lab._signatures() lists
 * them all, the fuzz's coverage test checks them against the module's functions). */
typedef struct {
    const char *func; /* as Python names it: "add", "Stream.record_event" */
    const lab_signature *signature;
} lab_signed_function;

/* A reader must never be entered with an exception already set: the Python code it may run
 * (__index__, __bool__, a property) would run with the error pending, and CPython turns the
 * function's result into a SystemError. Each reader asserts it in a build with assertions
 * (LAB_DEBUG=1 python3 setup.py build_ext); every caller stops at the first reader that fails. */
#define LAB_ASSERT_NO_ERROR() assert(!PyErr_Occurred())

/* Fills slots[0 .. n_params) with borrowed references: NULL for a parameter not given, and NULL
 * too for None given where the signature says LAB_OR_NONE - so "not given" has one spelling for
 * every reader. None for any other parameter is a TypeError naming it ("add(): argument 'out'
 * must be a CUDA array, not None"), as is a missing required one. `func` names the function in
 * messages. Returns 0, or -1 with TypeError set. */
int lab_parse_args(lab_state *state, const char *func, const lab_signature *sig, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames, PyObject **slots);

/* Reads the `stream=` argument: None (not given), an int handle, or an object with __cuda_stream__()
 * returning (version, handle), with .cuda_stream (torch) and .ptr (CuPy) as fallbacks.
 * Fills *stream (its owner is obj, borrowed); returns 0, or -1 with TypeError/ValueError set. No CUDA call.
 */
int lab_parse_stream_arg(lab_state *state, PyObject *obj, const char *func, lab_stream_arg *stream);

/* Reads a Python number (int, float, or anything with __index__ or __float__) as the scalar
 * argument `name`, before the op's dtype is known; the plan checks it against the type it computes
 * in (dispatch/operand.h). Returns 0, or -1 with TypeError set naming the argument. */
int lab_read_scalar(PyObject *obj, const char *func, const char *name, lab_scalar_arg *scalar);

/* The readers below leave *value as it is when obj is NULL (not given), so a caller sets the
 * default first; each returns 0, or -1 with an exception naming the argument (or the argument's
 * own error from __float__, __index__ or __bool__). Callers chain them with || and stop at the
 * first -1, so no reader runs with an exception set. */

/* A real number (anything with __float__, bool too), with no bounds: an op's alpha or beta. */
int lab_read_real(PyObject *obj, const char *func, const char *name, double *value);

/* The bounds a number must meet, declared where it is read: [low, high], either end open, and
 * `expected` saying it in words for the message ("sgd_step(): argument 'dampening' must be a
 * number in [0, 1], got -1"). NaN meets no bounds. */
typedef struct {
    double low, high;
    char low_open, high_open;
    const char *expected;
} lab_real_range;
extern const lab_real_range LAB_NONNEGATIVE; /* a finite number >= 0 */
extern const lab_real_range LAB_POSITIVE;    /* a finite number > 0 */
extern const lab_real_range LAB_UNIT;        /* a number in [0, 1] */
extern const lab_real_range LAB_UNIT_OPEN;   /* a number in [0, 1) */

/* A real number within `range` (not bool: True for a learning rate is a mistake). */
int lab_read_real_in(PyObject *obj, const char *func, const char *name, const lab_real_range *range,
                     double *value);

/* An int argument (anything with __index__, not bool) that must fit int64: TypeError or
 * OverflowError naming it otherwise. */
int lab_read_int64(PyObject *obj, const char *func, const char *name, int64_t *value);

/* An int in [low, high], `expected` saying it in words ("an int >= 1"). */
typedef struct {
    int64_t low, high;
    const char *expected;
} lab_int_range;
extern const lab_int_range LAB_COUNT;        /* an int >= 0 */
extern const lab_int_range LAB_POSITIVE_INT; /* an int >= 1 */
int lab_read_int_in(PyObject *obj, const char *func, const char *name, const lab_int_range *range,
                    int64_t *value);

/* A truth value: True/False, or anything with __bool__ (NumPy's bool too). */
int lab_read_flag(PyObject *obj, const char *func, const char *name, int *value);

/* A device ordinal argument (named 'device' in messages): an int in 0 .. LAB_MAX_DEVICES - 1. */
int lab_read_device(PyObject *obj, const char *func, int *device);

/* One axis of an ndim-dimensional array: an int (not bool), negative counting from the end.
 * Returns 0 with *axis in 0 .. ndim - 1, or -1 with TypeError/ValueError naming 'axis' (`accepted`
 * says what the function takes, "an int" or more). */
int lab_read_axis(PyObject *obj, int ndim, const char *accepted, const char *func, int *axis);

/* A tuple of Python ints - a shape, strides - for results and introspection; NULL on failure. */
PyObject *lab_shape_tuple(const int64_t *values, int n);

#endif
