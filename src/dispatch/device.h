/* device.h - which GPU a launch runs on, and switching to it only when needed (docs/design.md, "Devices"). */
#ifndef LAB_DEVICE_H
#define LAB_DEVICE_H

#include <cuda_runtime_api.h>

#include "dispatch/dispatch_state.h"
#include "dispatch/operand.h"

/* No CUDA call: every array whose device is known (DLPack, lab.Array, or located) must be on the
 * same device as the first one that is, in the order of `groups`. ValueError names both. */
int lab_check_same_device(const lab_operand_group *groups, int n_groups, const char *func);

/* Where each CAI operand lives (the dict does not say): asks the driver about the pointer, once per
 * 2 MiB page (cached in the module state), and fills array->device. Memory the GPU cannot reach -
 * ordinary host memory, or an address nobody mapped - is refused with a ValueError naming the
 * argument, unless the device reads pageable host memory itself (HMM/ATS). Arrays whose protocol
 * named the device (DLPack, lab.Array) and empty arrays are skipped. Returns 0, or -1 with
 * ValueError or lab.CudaError set. */
int lab_locate_memory(lab_dispatch_state *state, lab_operand_group *groups, int n_groups, const char *func);

/* The same for one array: messages name it `name[index]` (index -1: just `name`). */
int lab_locate_array(lab_dispatch_state *state, lab_array *array, const char *name, int index,
                     const char *func);

/* The device to launch on: the first operand's whose device is known (after lab_locate_memory, all
 * but page-locked host memory), else the current device. Also returns the caller's current device
 * so the launch can restore it. */
cudaError_t lab_select_device(const lab_array *const *arrays, int n, int *target, int *current);

/* Runs `call` on `device` (-1: the current one), switching the caller's current device only when it
 * differs and restoring it afterwards. Returns the first error. */
cudaError_t lab_with_device(int device, cudaError_t (*call)(void *context), void *context);

#endif
