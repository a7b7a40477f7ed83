/* elementwise.h - the elementwise functions' method table, added to the module by module.c. */
#ifndef LAB_ELEMENTWISE_H
#define LAB_ELEMENTWISE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyMethodDef lab_elementwise_methods[];

#endif
