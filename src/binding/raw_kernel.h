/* raw_kernel.h - the private functions behind lab.RawKernel / lab.RawModule (see raw_kernel.c). */
#ifndef LAB_RAW_KERNEL_H
#define LAB_RAW_KERNEL_H

#include "binding/module_state.h"

extern PyMethodDef lab_raw_kernel_methods[];
extern PyType_Spec lab_kernel_launcher_spec; /* lab.lab._KernelLauncher, RawKernel's C base */

#endif
