/* reduction.h - the reductions' method table, added to the module by module.c. */
#ifndef LAB_REDUCTION_H
#define LAB_REDUCTION_H

#include "binding/args.h"

extern PyMethodDef lab_reduction_methods[];
extern const lab_signed_function lab_reduction_signatures[]; /* ends with {NULL, NULL} */

#endif
