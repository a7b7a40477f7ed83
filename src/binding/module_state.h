/* module_state.h - what one imported lab module owns (PEP 489 module state): its exception type,
 * its interned names, and the caches that keep the per-call path free of lookups. */
#ifndef LAB_MODULE_STATE_H
#define LAB_MODULE_STATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dispatch/dispatch_state.h"
#include "dispatch/dlpack_exchange.h"

typedef enum {
#define LAB_NAME(id, text) LAB_NAME_##id,
#include "binding/names.def"
#undef LAB_NAME
    LAB_NUM_NAMES
} lab_name;

/* Types that carry (or are known not to carry) a DLPack C exchange API. A type is looked up once;
 * the strong reference keeps the cached type pointer from being reused by another type, and the
 * one to the capsule keeps the table alive if the type's attribute is replaced. */
#define LAB_EXCHANGE_CACHE_SIZE 16
typedef struct {
    PyTypeObject *type;
    PyObject *capsule;            /* the type's __dlpack_c_exchange_api__, or NULL */
    const DLPackExchangeAPI *api; /* NULL: the type offers none lab can use */
} lab_exchange_cache_entry;

/* NumPy scalar types met as RawKernel arguments, with their C type (a struct-module letter): the
 * buffer protocol that tells a scalar's type costs ~1 us a call; its value through __index__ or
 * __float__ a tenth of that once the type is known. Strong references, as above. */
#define LAB_SCALAR_TYPE_CACHE_SIZE 16
typedef struct {
    PyTypeObject *type;
    char letter;
} lab_scalar_type_entry;

typedef struct {
    lab_dispatch_state dispatch; /* level 3's caches and lab.CudaError (dispatch/dispatch_state.h) */
    PyTypeObject *StreamType;    /* lab.Stream, lab.Event, lab.Array: heap types made in the exec slot */
    PyTypeObject *EventType;
    PyTypeObject *ArrayType;
    PyObject *numpy; /* imported on first use by Array.numpy() */
    PyObject *names[LAB_NUM_NAMES];
    lab_exchange_cache_entry exchange_cache[LAB_EXCHANGE_CACHE_SIZE];
    int exchange_cache_len;
    lab_scalar_type_entry scalar_types[LAB_SCALAR_TYPE_CACHE_SIZE];
    int scalar_types_len;
} lab_state;

static inline lab_state *lab_get_state(PyObject *module) { return (lab_state *)PyModule_GetState(module); }

/* The module state of a type's instance: from the first type in the MRO that belongs to lab's
 * module (a Python subclass such as lab.RawKernel has none of its own). NULL with SystemError. */
lab_state *lab_state_of_type(PyTypeObject *type);

/* The tp_dealloc of lab's garbage-collected heap types (the kernel launchers): untrack, `clear`
 * every reference the instance holds, free it, and drop its reference to its type. */
void lab_gc_dealloc(PyObject *self, inquiry clear);

#define LAB_NAME_OBJ(state, id) ((state)->names[LAB_NAME_##id])

#endif
