/* args.h - hand-parsed METH_FASTCALL | METH_KEYWORDS arguments.
 *
 * A call arrives as a C array of positional arguments plus a tuple of keyword names whose values
 * follow the positionals in the same array. lab_parse_args matches both against a signature of
 * interned names (pointer comparison first) and fills one borrowed slot per parameter, creating no
 * Python objects. Errors read like CPython's own ("add() got an unexpected keyword argument 'x'"). */
#ifndef LAB_ARGS_H
#define LAB_ARGS_H

#include "module_state.h"

#define LAB_MAX_PARAMS 12

typedef struct {
    int n_required;         /* leading parameters that must be given */
    int n_positional;       /* leading parameters that may be passed by position (>= n_required) */
    int n_params;           /* positional ones, then keyword-only ones (optional) */
    lab_name names[LAB_MAX_PARAMS];
} lab_signature;

/* Fills slots[0 .. n_params) with borrowed references (NULL for optional ones not given).
 * `func` names the function in messages. Returns 0, or -1 with TypeError set. */
int lab_parse_args(lab_state *state, const char *func, const lab_signature *sig, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames, PyObject **slots);

/* "name[index]" into buf (truncated to fit), for an array of a list in messages. Hand-rolled rather
 * than snprintf: foreach ops name every array of every list up front, hundreds per call. */
void lab_indexed_name(char *buf, size_t size, const char *name, int index);

#endif
