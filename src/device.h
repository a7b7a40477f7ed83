/* device.h - which GPU a launch runs on, and switching to it only when needed (DESIGN.md, "Devices"). */
#ifndef LAB_DEVICE_H
#define LAB_DEVICE_H

#include <cuda_runtime_api.h>

#include "array.h"

/* Validation, no CUDA call: every operand whose protocol names its device (DLPack) must be on the
 * same device as the first one that does. arrays[0] is the output. ValueError names both. */
int lab_check_same_device(const lab_array *arrays, const char *const *names, int n, const char *func);

/* The device to launch on: the output's (or an input's) where the protocol says it; for CAI
 * arrays, the pointer's device when more than one GPU exists, else the current device.
 * Also returns the caller's current device so the launch can restore it. */
cudaError_t lab_select_device(lab_state *state, const lab_array *arrays, int n, int *target, int *current);

/* Runs `call` on `device` (-1: the current one), switching the caller's current device only when it
 * differs and restoring it afterwards. Returns the first error. */
cudaError_t lab_with_device(int device, cudaError_t (*call)(void *context), void *context);

#endif
