/* rowwise.h - the row-wise ops' method table, added to the module by module.c. */
#ifndef LAB_ROWWISE_H
#define LAB_ROWWISE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyMethodDef lab_rowwise_methods[];

#endif
