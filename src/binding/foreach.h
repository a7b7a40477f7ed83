/* foreach.h - the multi-tensor functions (foreach_*, sgd_step, adam_step), added by module.c. */
#ifndef LAB_FOREACH_H
#define LAB_FOREACH_H

#include "binding/args.h"

extern PyMethodDef lab_foreach_methods[];
extern const lab_signed_function lab_foreach_signatures[]; /* ends with {NULL, NULL} */

#endif
