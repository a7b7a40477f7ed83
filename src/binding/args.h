/* args.h - hand-parsed METH_FASTCALL | METH_KEYWORDS arguments.
 *
 * A call arrives as a C array of positional arguments plus a tuple of keyword names whose values
 * follow the positionals in the same array. lab_parse_args matches both against a signature of
 * interned names (pointer comparison first) and fills one borrowed slot per parameter, creating no
 * Python objects. Errors read like CPython's own ("add() got an unexpected keyword argument 'x'"). */
#ifndef LAB_ARGS_H
#define LAB_ARGS_H

#include "binding/module_state.h"
#include "dispatch/operand.h"
#include "dispatch/stream.h"

#define LAB_MAX_PARAMS 20

typedef struct {
    int n_required;   /* leading parameters that must be given */
    int n_positional; /* leading parameters that may be passed by position (>= n_required) */
    int n_params;     /* positional ones, then keyword-only ones (optional) */
    lab_name names[LAB_MAX_PARAMS];
} lab_signature;

/* Fills slots[0 .. n_params) with borrowed references (NULL for optional ones not given).
 * `func` names the function in messages. Returns 0, or -1 with TypeError set. */
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

/* The same, as a float: for ops whose scalars are float32 math (list ops, optimizer steps). */
int lab_read_real(PyObject *obj, const char *func, const char *name, double *value);

/* An int argument (anything with __index__, not bool) that must fit int64: TypeError or
 * OverflowError naming it otherwise. */
int lab_read_int64(PyObject *obj, const char *func, const char *name, int64_t *value);

/* A device ordinal argument (named 'device' in messages): an int in 0 .. LAB_MAX_DEVICES - 1. */
int lab_read_device(PyObject *obj, const char *func, int *device);

/* One axis of an ndim-dimensional array: an int (not bool), negative counting from the end.
 * Returns 0 with *axis in 0 .. ndim - 1, or -1 with TypeError/ValueError naming 'axis' (`accepted`
 * says what the function takes, "an int" or more). */
int lab_read_axis(PyObject *obj, int ndim, const char *accepted, const char *func, int *axis);

/* A tuple of Python ints - a shape, strides - for results and introspection; NULL on failure. */
PyObject *lab_shape_tuple(const int64_t *values, int n);

#endif
