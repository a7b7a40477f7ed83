/* rope.h - lab.rope and lab.rope_backward's binding (see rope.c). */
#ifndef LAB_BINDING_ROPE_H
#define LAB_BINDING_ROPE_H

#include "binding/args.h"

extern PyMethodDef lab_rope_methods[];
extern const lab_signed_function lab_rope_signatures[]; /* ends with {NULL, NULL} */

#endif
