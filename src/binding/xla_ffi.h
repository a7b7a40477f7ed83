/* xla_ffi.h - lab's XLA FFI handlers' method table (see xla_ffi.c), added to the module by module.c. */
#ifndef LAB_BINDING_XLA_FFI_H
#define LAB_BINDING_XLA_FFI_H

#include <Python.h>

extern PyMethodDef lab_xla_ffi_methods[];

#endif
