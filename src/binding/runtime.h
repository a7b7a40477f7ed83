/* runtime.h - module functions about the CUDA runtime and devices (is_available, device_count, ...). */
#ifndef LAB_RUNTIME_H
#define LAB_RUNTIME_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyMethodDef lab_runtime_methods[];

#endif
