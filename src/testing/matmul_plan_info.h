/* matmul_plan_info.h - lab.lab._matmul_plan, the matrix product's plan as a dict (for tests). */
#ifndef LAB_MATMUL_PLAN_INFO_H
#define LAB_MATMUL_PLAN_INFO_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyMethodDef lab_matmul_plan_info_methods[];

#endif
