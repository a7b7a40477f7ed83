/* introspect.h - private module functions that expose the binding's decisions (for tests). */
#ifndef LAB_INTROSPECT_H
#define LAB_INTROSPECT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyMethodDef lab_introspect_methods[];

#endif
