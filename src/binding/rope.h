/* rope.h - lab.rope and lab.rope_backward's binding (see rope.c). */
#ifndef LAB_BINDING_ROPE_H
#define LAB_BINDING_ROPE_H

#include <Python.h>

extern PyMethodDef lab_rope_methods[];

#endif
