/* float8.h - lab.cast_float8's binding (see float8.c). */
#ifndef LAB_BINDING_FLOAT8_H
#define LAB_BINDING_FLOAT8_H

#include "binding/args.h"

extern PyMethodDef lab_float8_methods[];
extern const lab_signed_function lab_float8_signatures[]; /* ends with {NULL, NULL} */

#endif
