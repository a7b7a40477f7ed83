/* elementwise_kernel.h - lab.lab._ElementwiseLauncher, the C base of lab.ElementwiseKernel (see
 * elementwise_kernel.c). */
#ifndef LAB_ELEMENTWISE_KERNEL_H
#define LAB_ELEMENTWISE_KERNEL_H

#include "binding/module_state.h"

extern PyType_Spec lab_elementwise_launcher_spec;

#endif
