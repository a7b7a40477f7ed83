/* linear_ce.h - lab.linear_cross_entropy's binding (see linear_ce.c). */
#ifndef LAB_BINDING_LINEAR_CE_H
#define LAB_BINDING_LINEAR_CE_H

#include "binding/args.h"

extern PyMethodDef lab_linear_ce_methods[];
extern const lab_signed_function lab_linear_ce_signatures[]; /* ends with {NULL, NULL} */

#endif
