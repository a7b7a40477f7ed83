/* device.c - device checks and selection for launches (see device.h). */
#include "device.h"

int lab_check_same_device(const lab_array *arrays, const char *const *names, int n, const char *func) {
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (arrays[i].device < 0) continue;
        if (first < 0) {
            first = i;
        } else if (arrays[i].device != arrays[first].device) {
            PyErr_Format(PyExc_ValueError, "%s(): argument '%s' is on cuda:%d but '%s' is on cuda:%d; all operands must "
                         "be on one device", func, names[i], arrays[i].device, names[first], arrays[first].device);
            return -1;
        }
    }
    return 0;
}

cudaError_t lab_select_device(lab_state *state, const lab_array *arrays, int n, int *target, int *current) {
    cudaError_t err = cudaGetDevice(current);
    if (err != cudaSuccess) return err;
    for (int i = 0; i < n; i++) {
        if (arrays[i].device >= 0) {
            *target = arrays[i].device;
            return cudaSuccess;
        }
    }
    /* Only CAI operands: the dict does not say where the memory lives. With one GPU the answer is
     * known without asking; with several, ask the driver about the output's pointer. */
    if (state->device_count < 0) {
        int count = 0;
        err = cudaGetDeviceCount(&count);
        if (err != cudaSuccess) return err;
        state->device_count = count;
    }
    *target = *current;
    if (state->device_count > 1) {
        struct cudaPointerAttributes attributes;
        err = cudaPointerGetAttributes(&attributes, arrays[0].data);
        if (err != cudaSuccess) return err;
        if (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged)
            *target = attributes.device;
    }
    return cudaSuccess;
}

cudaError_t lab_with_device(int device, cudaError_t (*call)(void *context), void *context) {
    int current = 0;
    cudaError_t err = cudaGetDevice(&current);
    if (err != cudaSuccess) return err;
    if (device < 0 || device == current) return call(context);
    if ((err = cudaSetDevice(device)) != cudaSuccess) return err;
    err = call(context);
    cudaError_t restore = cudaSetDevice(current);
    return err != cudaSuccess ? err : restore;
}
