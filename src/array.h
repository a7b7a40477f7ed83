/* array.h - one struct for any CUDA array, whoever produced it.
 *
 * lab_read_array() is the only place that speaks the array protocols: it fills a lab_array from a
 * type's DLPack C exchange API (torch: tens of nanoseconds, bfloat16 and the stream unambiguous) or
 * from __cuda_array_interface__ v0-v3 (CuPy, Numba, JAX, anything else); lab's own lab.Array is
 * read straight from its C struct. Everything after it sees only the struct. */
#ifndef LAB_ARRAY_H
#define LAB_ARRAY_H

#include <stdint.h>

#include "module_state.h"
#include "kernels/launch.h"


typedef enum { LAB_SOURCE_DLPACK_EXCHANGE, LAB_SOURCE_CAI, LAB_SOURCE_LAB_ARRAY } lab_array_source;

typedef struct {
    char *data;                      /* first element (DLPack byte_offset already applied) */
    lab_dtype dtype;
    int ndim;
    int64_t shape[LAB_MAX_DIMS];
    int64_t strides[LAB_MAX_DIMS];   /* in elements, always filled (C-contiguous when the producer said none) */
    int64_t numel;
    int readonly;
    int device;                      /* CUDA ordinal, or -1 where the protocol does not say (CAI) */
    lab_array_source source;
    const DLPackExchangeAPI *exchange_api; /* set for LAB_SOURCE_DLPACK_EXCHANGE: asked for the stream */
    int has_stream;                  /* a stream is declared: CAI v3 'stream' (not None), a lab.Array's */
    uintptr_t stream;                /* that stream: 0/1 legacy default, 2 per-thread default, else a handle */
    PyObject *lab_array;             /* LAB_SOURCE_LAB_ARRAY: the lab.Array (borrowed), to note its last stream */
    PyObject *stream_owner;          /* LAB_SOURCE_LAB_ARRAY: the object keeping `stream` alive, or NULL */
} lab_array;

/* Reads `obj` (the argument called `argname` of function `func`) into *array.
 * Returns 0, or -1 with TypeError/ValueError/OverflowError set naming the argument. No CUDA call. */
int lab_read_array(lab_state *state, PyObject *obj, const char *func, const char *argname, lab_array *array);

/* Whether obj offers an array protocol lab reads (used where an argument may be a number instead). */
int lab_has_array_protocol(lab_state *state, PyObject *obj);

/* 1 if the array is C-contiguous (size-1 dimensions may carry any stride), else 0. */
int lab_array_is_contiguous(const lab_array *array);

#endif
