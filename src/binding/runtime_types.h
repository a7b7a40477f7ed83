/* runtime_types.h - lab's own CUDA runtime objects, written as C types: lab.Stream, lab.Event,
 * lab.Array (a device buffer lab owns) and lab.Graph (captured calls, replayed). Each .c file
 * defines a PyType_Spec that module.c turns into a heap type in the exec slot, plus module
 * functions that belong with it. */
#ifndef LAB_RUNTIME_TYPES_H
#define LAB_RUNTIME_TYPES_H

#include <cuda_runtime_api.h>

#include "binding/args.h"
#include "binding/module_state.h"
#include "dispatch/operand.h"

typedef struct {
    PyObject_HEAD cudaStream_t handle;
    int device;
    int priority;
} lab_stream_object;

typedef struct {
    PyObject_HEAD cudaEvent_t handle;
    int device;
    int timing;
} lab_event_object;

/* A C-contiguous device buffer. `last_use.stream` is where it was last used (allocated, copied,
 * written or read by a lab op): consumers order themselves after it, and it is freed there
 * (cudaFreeAsync). `last_use.owner` is the object that stream came from (a lab.Stream, a torch
 * stream, ...), held so the stream outlives the array's last use of it; NULL for streams a producer
 * manages (torch's current stream, a CAI handle) and for the legacy default stream. */
typedef struct {
    PyObject_HEAD char *data;
    lab_dtype dtype;
    int ndim;
    int64_t shape[LAB_MAX_DIMS];
    int64_t numel;
    int device;
    int from_capture; /* allocated while its stream was being captured: a node of that graph's memory */
    lab_last_use last_use;
} lab_array_object;

extern PyType_Spec lab_stream_spec, lab_event_spec, lab_array_spec, lab_graph_spec;
extern PyMethodDef lab_stream_functions[], lab_array_functions[], lab_graph_functions[];
extern const lab_signed_function lab_stream_signatures[], lab_array_signatures[],
    lab_graph_signatures[]; /* end with {NULL, NULL} */

/* lab.Array's protocol exports (array_export.c): the __cuda_array_interface__ getter,
 * __dlpack__(*, stream, max_version, dl_device, copy) and __dlpack_device__(). */
PyObject *lab_array_get_cai(PyObject *op, void *closure);
PyObject *lab_array_dlpack(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *lab_array_dlpack_device(PyObject *op, PyObject *unused);

/* Reads a lab.Array into a lab_array without building a protocol dict (array_reader.c calls this). */
void lab_array_object_describe(const lab_array_object *self, lab_array *array);

#endif
