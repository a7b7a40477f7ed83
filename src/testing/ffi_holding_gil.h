/* ffi_holding_gil.h - the tests' entry that runs an XLA FFI handler while Python holds the GIL (see
 * ffi_holding_gil.c). */
#ifndef LAB_FFI_HOLDING_GIL_H
#define LAB_FFI_HOLDING_GIL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyMethodDef lab_ffi_holding_gil_methods[];

#endif
