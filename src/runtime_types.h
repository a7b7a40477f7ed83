/* runtime_types.h - lab's own CUDA runtime objects, written as C types: lab.Stream, lab.Event and
 * lab.Array (a device buffer lab owns). Each .c file defines a PyType_Spec that module.c turns
 * into a heap type in the exec slot, plus module functions that belong with it. */
#ifndef LAB_RUNTIME_TYPES_H
#define LAB_RUNTIME_TYPES_H

#include <cuda_runtime_api.h>

#include "array.h"
#include "module_state.h"

typedef struct {
    PyObject_HEAD
    cudaStream_t handle;
    int device;
    int priority;
} lab_stream_object;

typedef struct {
    PyObject_HEAD
    cudaEvent_t handle;
    int device;
    int timing;
} lab_event_object;

/* A C-contiguous device buffer. `stream` is where it was last used (allocated, copied, written or
 * read by a lab op): consumers order themselves after it, and it is freed there (cudaFreeAsync).
 * `stream_owner` is the object that stream came from (a lab.Stream, a torch stream, ...), held so
 * the stream outlives the array's last use of it; NULL for streams a producer manages (torch's
 * current stream, a CAI handle) and for the legacy default stream. */
typedef struct {
    PyObject_HEAD
    char *data;
    lab_dtype dtype;
    int ndim;
    int64_t shape[LAB_MAX_DIMS];
    int64_t numel;
    int device;
    cudaStream_t stream;
    PyObject *stream_owner;
} lab_array_object;

extern PyType_Spec lab_stream_spec, lab_event_spec, lab_array_spec;
extern PyMethodDef lab_stream_functions[], lab_array_functions[];

/* lab.stream(s) sets a thread-local current stream; 1 and *stream set when one is active, and
 * *owner (if not NULL) to the object given to lab.stream() (borrowed). */
int lab_thread_current_stream(cudaStream_t *stream, PyObject **owner);

/* Notes that the array was just used on `stream`, which `owner` (may be NULL) keeps alive. */
void lab_array_object_set_stream(lab_array_object *self, cudaStream_t stream, PyObject *owner);

/* Reads a lab.Array into a lab_array without building a protocol dict (array.c calls this). */
void lab_array_object_describe(const lab_array_object *self, lab_array *array);

#endif
