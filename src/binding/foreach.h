/* foreach.h - the multi-tensor functions (foreach_*, sgd_step, adam_step), added by module.c. */
#ifndef LAB_FOREACH_H
#define LAB_FOREACH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyMethodDef lab_foreach_methods[];

#endif
