/* reduction.h - the reductions' method table, added to the module by module.c. */
#ifndef LAB_REDUCTION_H
#define LAB_REDUCTION_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyMethodDef lab_reduction_methods[];

#endif
