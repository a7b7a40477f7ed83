/* args.c - the FASTCALL argument parser described in args.h. */
#include "args.h"

static int find_param(lab_state *state, const lab_signature *sig, PyObject *keyword) {
    for (int i = 0; i < sig->n_params; i++)  /* call sites intern keyword names: usually a pointer hit */
        if (state->names[sig->names[i]] == keyword) return i;
    for (int i = 0; i < sig->n_params; i++)
        if (PyUnicode_Compare(state->names[sig->names[i]], keyword) == 0) return i;
    return -1;
}

int lab_parse_args(lab_state *state, const char *func, const lab_signature *sig, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames, PyObject **slots) {
    nargs = PyVectorcall_NARGS(nargs);
    if (nargs > sig->n_positional) {
        PyErr_Format(PyExc_TypeError, "%s() takes %s%d positional arguments but %zd were given", func,
                     sig->n_required < sig->n_positional ? "at most " : "", sig->n_positional, nargs);
        return -1;
    }
    for (int i = 0; i < sig->n_params; i++) slots[i] = i < nargs ? args[i] : NULL;

    const Py_ssize_t n_keywords = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < n_keywords; k++) {
        PyObject *keyword = PyTuple_GET_ITEM(kwnames, k);
        int i = find_param(state, sig, keyword);
        if (i < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", func, keyword);
            return -1;
        }
        if (slots[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", func, keyword);
            return -1;
        }
        slots[i] = args[nargs + k];
    }
    for (int i = 0; i < sig->n_required; i++) {
        if (!slots[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%U' (pos %d)", func,
                         state->names[sig->names[i]], i + 1);
            return -1;
        }
    }
    return 0;
}

void lab_indexed_name(char *buf, size_t size, const char *name, int index) {
    char digits[12];
    int n_digits = 0;
    unsigned int value = index < 0 ? 0u : (unsigned int)index;
    do {
        digits[n_digits++] = (char)('0' + value % 10);
        value /= 10;
    } while (value && n_digits < (int)sizeof digits);
    size_t at = 0;
    while (*name && at + 1 < size) buf[at++] = *name++;
    if (at + 1 < size) buf[at++] = '[';
    while (n_digits && at + 1 < size) buf[at++] = digits[--n_digits];
    if (at + 1 < size) buf[at++] = ']';
    buf[at] = '\0';
}
