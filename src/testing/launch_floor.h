/* launch_floor.h - the benchmarks' bare-launch entry point (see launch_floor.c). */
#ifndef LAB_LAUNCH_FLOOR_H
#define LAB_LAUNCH_FLOOR_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyMethodDef lab_launch_floor_methods[];

#endif
