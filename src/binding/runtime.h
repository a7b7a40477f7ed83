/* runtime.h - module functions about the CUDA runtime and devices (is_available, device_count, ...). */
#ifndef LAB_RUNTIME_H
#define LAB_RUNTIME_H

#include "binding/args.h"

extern PyMethodDef lab_runtime_methods[];
extern const lab_signed_function lab_runtime_signatures[]; /* ends with {NULL, NULL} */

#endif
