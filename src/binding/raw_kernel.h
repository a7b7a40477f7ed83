/* raw_kernel.h - the private functions behind lab.RawKernel / lab.RawModule (see raw_kernel.c). */
#ifndef LAB_RAW_KERNEL_H
#define LAB_RAW_KERNEL_H

#include "binding/args.h"
#include "binding/module_state.h"

extern PyMethodDef lab_raw_kernel_methods[];
extern const lab_signed_function lab_raw_kernel_signatures[]; /* ends with {NULL, NULL} */
extern PyType_Spec lab_kernel_launcher_spec; /* lab.lab._KernelLauncher, RawKernel's C base */

#endif
