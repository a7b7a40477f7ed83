/* operand.h - one struct for any CUDA array, whoever produced it (level 3's view of an argument).
 *
 * binding/array_reader.c fills a lab_array from a type's DLPack C exchange API, from
 * __cuda_array_interface__, or from lab.Array's C struct; everything at this level and below sees
 * only the struct. The helpers here are the facts about one array that every plan asks: is it
 * contiguous, may it be written, what its contiguous twin looks like. */
#ifndef LAB_DISPATCH_OPERAND_H
#define LAB_DISPATCH_OPERAND_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "dispatch/dlpack_exchange.h"
#include "dispatch/failure.h"
#include "kernels/launch.h"

/* The most array arguments (single arrays or lists) one op takes. */
#define LAB_MAX_GROUPS 16 /* a lab.ElementwiseKernel call: one per array argument */

typedef enum { LAB_SOURCE_DLPACK_EXCHANGE, LAB_SOURCE_CAI, LAB_SOURCE_LAB_ARRAY } lab_array_source;

/* Where a lab.Array remembers the stream it was last used on, and the object keeping that stream
 * alive (NULL for streams a producer manages, and for the legacy default stream). The launch scope
 * updates it after every launch, so the array's next reader orders itself after lab's work. */
typedef struct {
    cudaStream_t stream;
    PyObject *owner;
} lab_last_use;

typedef struct {
    char *data; /* first element (DLPack byte_offset already applied) */
    lab_dtype dtype;
    int ndim;
    int64_t shape[LAB_MAX_DIMS];
    int64_t strides[LAB_MAX_DIMS]; /* in elements, always filled (C-contiguous when the producer said none) */
    int64_t numel;
    int readonly;
    int device; /* CUDA ordinal, or -1 where the protocol does not say (CAI) */
    lab_array_source source;
    const DLPackExchangeAPI *exchange_api; /* set for LAB_SOURCE_DLPACK_EXCHANGE: asked for the stream */
    int has_stream;         /* a stream is declared: CAI v3 'stream' (not None), a lab.Array's */
    uintptr_t stream;       /* that stream: 0/1 legacy default, 2 per-thread default, else a handle */
    PyObject *stream_owner; /* LAB_SOURCE_LAB_ARRAY: the object keeping `stream` alive, or NULL */
    lab_last_use *last_use; /* LAB_SOURCE_LAB_ARRAY: the lab.Array's record (borrowed), else NULL */
} lab_array;

/* A Python number given as an op's scalar (alpha, a scale), read by the binding before the op's
 * dtype is known; lab_scalar_for_dtype checks it against the type the op computes in. */
typedef struct {
    const char *name;      /* the argument's name, for messages */
    const char *type_name; /* its Python type's name */
    int is_integer;        /* an int (or an object with __index__) */
    int fits_int64;        /* is_integer and as_int holds it exactly */
    int64_t as_int;
    double as_float;
} lab_scalar_arg;

/* The scalar in the op's compute type: integer ops need an int that fits int64 (TypeError,
 * OverflowError otherwise), float ops take any real number. Fills both halves; returns 0 or -1. */
int lab_scalar_for_dtype(const lab_scalar_arg *scalar, lab_dtype compute, const char *func, double *as_float,
                         int64_t *as_int);

/* One array argument of an op: a single array ("out") or a list of them ("xs"). */
typedef struct {
    const char *name;
    lab_array *arrays;
    int count;   /* 1 for a single array; a list's length (may be 0) */
    int is_list; /* messages name its arrays "xs[3]" */
    int written; /* the op writes it: its stream decides first */
} lab_operand_group;

/* 1 if the array is C-contiguous (size-1 dimensions may carry any stride), else 0. */
int lab_array_is_contiguous(const lab_array *array);

/* C-contiguous strides (in elements) for array->shape. */
void lab_fill_contiguous_strides(lab_array *array);

/* A C-contiguous array of a's shape and dtype with no memory yet (data NULL), declaring no stream. */
lab_array lab_contiguous_like(const lab_array *a);

/* ValueError "func(): argument 'name' is read-only ..." when a written array is read-only. 0 or -1. */
int lab_check_writable(const lab_array *array, const char *func, const char *name);

/* 1 if a has exactly this shape. */
int lab_has_shape(const lab_array *a, const int64_t *shape, int ndim);

/* ValueError "func(): argument 'name' has shape (..); it must have shape (..) (what)"; returns -1. */
int lab_fail_shape(const char *func, const char *name, const lab_array *a, const int64_t *want, int want_ndim,
                   const char *what);

/* TypeError "func(): argument 'name' has dtype <got>; <what>"; returns -1. */
int lab_fail_dtype(const char *func, const char *name, lab_dtype got, const char *what);

/* "name[index]" into buf (truncated to fit); index < 0 gives just "name". Hand-rolled rather than
 * snprintf: list ops name arrays of every list up front, hundreds per call. */
void lab_indexed_name(char *buf, size_t size, const char *name, int index);

#endif
