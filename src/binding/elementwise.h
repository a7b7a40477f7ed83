/* elementwise.h - the elementwise functions' method table, added to the module by module.c. */
#ifndef LAB_ELEMENTWISE_H
#define LAB_ELEMENTWISE_H

#include "binding/args.h"

extern PyMethodDef lab_elementwise_methods[];
extern const lab_signed_function lab_elementwise_signatures[]; /* ends with {NULL, NULL} */

#endif
