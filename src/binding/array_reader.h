/* array_reader.h - reading any Python CUDA array into a lab_array (dispatch/operand.h).
 *
 * lab_read_array() is the only place that speaks the array protocols: it fills a lab_array from a
 * type's DLPack C exchange API (torch: tens of nanoseconds, bfloat16 and the stream unambiguous) or
 * from __cuda_array_interface__ v0-v3 (CuPy, Numba, JAX, anything else); lab's own lab.Array is
 * read straight from its C struct. Everything after it sees only the struct. */
#ifndef LAB_ARRAY_READER_H
#define LAB_ARRAY_READER_H

#include "binding/module_state.h"
#include "dispatch/operand.h"

/* Reads `obj` (the argument called `argname` of function `func`) into *array.
 * Returns 0, or -1 with TypeError/ValueError/OverflowError set naming the argument. No CUDA call. */
int lab_read_array(lab_state *state, PyObject *obj, const char *func, const char *argname, lab_array *array);

/* The same, also taking the float8 types (lab_read_array refuses them): for lab.matmul's a and b. */
int lab_read_array_float8(lab_state *state, PyObject *obj, const char *func, const char *argname,
                          lab_array *array);

/* The same for item `index` of the list argument `listname`: messages name it "xs[17]". */
int lab_read_array_item(lab_state *state, PyObject *obj, const char *func, const char *listname, int index,
                        lab_array *array);

/* Whether obj offers an array protocol lab reads (used where an argument may be a number instead). */
int lab_has_array_protocol(lab_state *state, PyObject *obj);

#endif
