/* protocol_reader.h - what the two protocol readers share (array_reader.c reads lab.Array and the
 * DLPack exchange API and picks the protocol; cai_reader.c reads __cuda_array_interface__): the
 * name of the argument being read, for messages, and the element count of what was read. */
#ifndef LAB_PROTOCOL_READER_H
#define LAB_PROTOCOL_READER_H

#include "binding/module_state.h"
#include "dispatch/operand.h"

/* Who is being read: argument `name` of `func`, or item `index` of the list `name` ("xs[17]") when
 * index >= 0. Formatted only when a message needs it: a foreach call reads hundreds of arrays. */
typedef struct {
    const char *func;
    const char *name;
    int index;
} lab_arg_label;

/* Raises `type` with "func(): argument 'name'" followed by `format` (PyUnicode_FromFormat's
 * codes). Returns -1, so error paths read `return lab_raise_arg(...)`. */
int lab_raise_arg(PyObject *type, const lab_arg_label *label, const char *format, ...);

/* numel = prod(shape), refusing sizes whose byte count would not fit in int64. 0 or -1. */
int lab_compute_numel(lab_array *array, const lab_arg_label *label);

/* Reads obj's __cuda_array_interface__ into *array (cai_reader.c). 0, or -1 with an error set:
 * TypeError/ValueError naming the argument, or the producer's own error from its property. */
int lab_read_cai(lab_state *state, PyObject *obj, const lab_arg_label *label, lab_array *array);

#endif
