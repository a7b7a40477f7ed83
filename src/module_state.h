/* module_state.h - what one imported lab module owns (PEP 489 module state): its exception type,
 * its interned names, and the caches that keep the per-call path free of lookups. */
#ifndef LAB_MODULE_STATE_H
#define LAB_MODULE_STATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dlpack_exchange.h"

typedef enum {
#define LAB_NAME(id, text) LAB_NAME_##id,
#include "names.def"
#undef LAB_NAME
    LAB_NUM_NAMES
} lab_name;

/* Types that carry (or are known not to carry) a DLPack C exchange API. A type is looked up once;
 * the strong reference keeps the cached type pointer from being reused by another type. */
#define LAB_EXCHANGE_CACHE_SIZE 16
typedef struct {
    PyTypeObject *type;
    const DLPackExchangeAPI *api; /* NULL: the type offers none */
} lab_exchange_cache_entry;

#define LAB_MAX_DEVICES 64
#define LAB_DEVICE_PAGE_SLOTS 4096 /* pages known to hold device memory (device.c) */

typedef struct {
    PyObject *CudaError;
    PyTypeObject *StreamType; /* lab.Stream, lab.Event, lab.Array: heap types made in the exec slot */
    PyTypeObject *EventType;
    PyTypeObject *ArrayType;
    PyObject *numpy;          /* imported on first use by Array.numpy() */
    PyObject *names[LAB_NUM_NAMES];
    lab_exchange_cache_entry exchange_cache[LAB_EXCHANGE_CACHE_SIZE];
    int exchange_cache_len;
    int order_streams; /* 0 when LAB_CUDA_ARRAY_INTERFACE_SYNC=0: no events between producer streams */
    void *order_events[LAB_MAX_DEVICES]; /* cudaEvent_t per device, made on first need (stream.c) */
    uintptr_t device_pages[LAB_DEVICE_PAGE_SLOTS]; /* (2 MiB page << 8) | (device + 1); see device.c */
} lab_state;

static inline lab_state *lab_get_state(PyObject *module) { return (lab_state *)PyModule_GetState(module); }

#define LAB_NAME_OBJ(state, id) ((state)->names[LAB_NAME_##id])

#endif
