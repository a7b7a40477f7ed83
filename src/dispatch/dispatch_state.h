/* dispatch_state.h - what level 3 keeps between calls: the exception type CUDA failures become, the
 * per-device ordering events, and the cache of where device memory lives. It sits inside the
 * module's state (binding/module_state.h), so every (sub)interpreter has its own, and the levels
 * above hand it down; nothing here knows about Python functions or lab's C types. */
#ifndef LAB_DISPATCH_STATE_H
#define LAB_DISPATCH_STATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define LAB_MAX_DEVICES 64
#define LAB_DEVICE_PAGE_SLOTS 4096 /* pages known to hold device memory (device.c) */

/* A device's random-number generator (dispatch/random_kind.h): the numbers are a function of
 * (seed, offset, index), and each fill moves the offset past the groups it used. */
typedef struct {
    uint64_t seed, offset;
} lab_random_generator;
#define LAB_DEFAULT_SEED 67280421310721ull /* torch's default_generator's initial seed */

/* A lab.Graph capturing on a device (binding/graph_type.c). A captured draw cannot take the
 * generator's (seed, offset) as kernel arguments - each replay would repeat the numbers - so it reads
 * them from `replay_state` (device memory the graph writes before each replay) and adds the groups
 * drawn since `start_offset`, the generator's offset when the capture began. */
typedef struct {
    unsigned long long capture_id; /* the CUDA capture's id; 0: no lab.Graph captures on the device */
    uint64_t *replay_state;        /* (seed, offset) on the device */
    uint64_t start_offset;
} lab_random_capture;

typedef struct {
    PyObject *CudaError;        /* lab.CudaError, created by the module's exec slot */
    PyObject *OutOfMemoryError; /* lab.OutOfMemoryError, its subclass for cudaErrorMemoryAllocation */
    int order_streams;          /* 0 when LAB_CUDA_ARRAY_INTERFACE_SYNC=0: no events between streams */
    void *order_events[LAB_MAX_DEVICES];           /* cudaEvent_t per device, made on first need (stream.c) */
    uintptr_t device_pages[LAB_DEVICE_PAGE_SLOTS]; /* (2 MiB page << 8) | (device + 1); see device.c */
    lab_random_generator generators[LAB_MAX_DEVICES]; /* every seed LAB_DEFAULT_SEED at import */
    lab_random_capture random_captures[LAB_MAX_DEVICES];
    uint64_t
        launch_scopes; /* calls that got as far as a launch scope: the fuzz checks a refused call never did */
} lab_dispatch_state;

#endif
