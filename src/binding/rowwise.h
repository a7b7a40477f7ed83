/* rowwise.h - the row-wise ops' method table, added to the module by module.c. */
#ifndef LAB_ROWWISE_H
#define LAB_ROWWISE_H

#include "binding/args.h"

extern PyMethodDef lab_rowwise_methods[];
extern const lab_signed_function lab_rowwise_signatures[]; /* ends with {NULL, NULL} */

#endif
