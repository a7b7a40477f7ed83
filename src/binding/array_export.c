/* array_export.c - the producer side of the array protocols, for lab.Array: the
 * __cuda_array_interface__ property and __dlpack__ / __dlpack_device__ (array_reader.c is the
 * consumer side). torch, CuPy and Numba wrap a lab.Array through these without a copy. */
#include "binding/args.h"
#include "binding/errors.h"
#include "binding/protocol_dtypes.h"
#include "binding/runtime_types.h"
#include "dispatch/stream.h"

static lab_state *state_of(PyObject *self) { return (lab_state *)PyType_GetModuleState(Py_TYPE(self)); }

/* ---- __cuda_array_interface__ ---- */

PyObject *lab_array_get_cai(PyObject *op, void *closure) {
    lab_array_object *self = (lab_array_object *)op;
    if (self->dtype == LAB_BFLOAT16) {
        /* CAI cannot name bfloat16; AttributeError makes consumers fall back to __dlpack__. */
        PyErr_SetString(PyExc_AttributeError,
                        "__cuda_array_interface__ cannot express bfloat16; use __dlpack__");
        return NULL;
    }
    PyObject *shape = PyTuple_New(self->ndim);
    if (!shape) return NULL;
    for (int d = 0; d < self->ndim; d++) PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(self->shape[d]));
    const unsigned long long stream =
        self->last_use.stream ? (unsigned long long)(uintptr_t)self->last_use.stream : 1; /* 1: legacy */
    PyObject *cai =
        Py_BuildValue("{s:N, s:s, s:(KO), s:O, s:i, s:K}", "shape", shape, "typestr",
                      lab_dtype_typestr[self->dtype], "data", (unsigned long long)(uintptr_t)self->data,
                      Py_False, "strides", Py_None, "version", 3, "stream", stream);
    return cai;
}

/* ---- __dlpack__ ---- */

typedef struct {
    union {
        DLManagedTensor unversioned;
        DLManagedTensorVersioned versioned;
    } tensor;
    int64_t shape_and_strides[2 * LAB_MAX_DIMS];
} exported_tensor;

static void release_owner(void *owner) {
    PyGILState_STATE gil = PyGILState_Ensure(); /* consumers may call the deleter from any thread */
    Py_DECREF((PyObject *)owner);
    PyGILState_Release(gil);
}
static void delete_unversioned(DLManagedTensor *t) {
    release_owner(t->manager_ctx);
    PyMem_RawFree(t);
}
static void delete_versioned(DLManagedTensorVersioned *t) {
    release_owner(t->manager_ctx);
    PyMem_RawFree(t);
}

/* A capsule nobody consumed still owns its tensor. */
static void capsule_destructor(PyObject *capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        DLManagedTensorVersioned *t = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        t->deleter(t);
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
        DLManagedTensor *t = PyCapsule_GetPointer(capsule, "dltensor");
        t->deleter(t);
    }
}

/* __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) */
PyObject *lab_array_dlpack(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_array_object *self = (lab_array_object *)op;
    lab_state *state = state_of(op);
    /* the DLPack spec's keywords: stream is the consumer's int handle (-1: no ordering), not a stream
     * object */
    static const lab_signature signature = {
        0,
        0,
        4,
        {LAB_PARAM(stream, INT | LAB_OR_NONE), LAB_PARAM(max_version, PAIR | LAB_OR_NONE),
         LAB_PARAM(dl_device, PAIR | LAB_OR_NONE), LAB_PARAM(copy, FLAG | LAB_OR_NONE)}};
    PyObject *slots[4];
    if (lab_parse_args(state, "__dlpack__", &signature, args, nargs, kwnames, slots) < 0) return NULL;
    PyObject *stream_obj = slots[0], *max_version = slots[1], *dl_device = slots[2], *copy = slots[3];

    int copy_requested = 0;
    if (lab_read_flag(copy, "__dlpack__", "copy", &copy_requested) < 0) return NULL;
    if (copy_requested) {
        return PyErr_Format(PyExc_BufferError,
                            "lab.Array.__dlpack__(copy=True): lab exports without copying only");
    }
    if (dl_device) {
        int type = -1, id = -1;
        if (!PyArg_ParseTuple(dl_device, "ii", &type, &id)) return NULL;
        if (type != kDLCUDA || id != self->device) {
            return PyErr_Format(PyExc_BufferError,
                                "lab.Array.__dlpack__: the array is on CUDA device %d; cannot "
                                "export to device (%d, %d)",
                                self->device, type, id);
        }
    }
    int versioned = 0;
    if (max_version) {
        int major = 0, minor = 0;
        if (!PyArg_ParseTuple(max_version, "ii", &major, &minor)) return NULL;
        versioned = major >= 1;
    }
    /* The consumer reads on its stream: make that stream wait for this array's (spec: -1 = no sync). */
    if (stream_obj) {
        long long consumer = PyLong_AsLongLong(stream_obj);
        if (consumer == -1 && PyErr_Occurred()) return NULL;
        if (consumer == 0) {
            return PyErr_Format(PyExc_ValueError,
                                "__dlpack__(stream=0) is ambiguous for CUDA; use 1 (legacy default) "
                                "or 2 (per-thread default)");
        }
        if (consumer != -1 && (cudaStream_t)(uintptr_t)consumer != self->last_use.stream) {
            cudaError_t err = lab_stream_wait_stream(&state->dispatch, (cudaStream_t)(uintptr_t)consumer,
                                                     self->last_use.stream, self->device);
            if (err != cudaSuccess) {
                return lab_raise_cuda_error(&state->dispatch, err, "__dlpack__",
                                            "ordering the consumer's stream");
            }
        }
    }

    exported_tensor *export = PyMem_RawCalloc(1, sizeof(exported_tensor));
    if (!export) return PyErr_NoMemory();
    DLTensor *t = versioned ? &export->tensor.versioned.dl_tensor : &export->tensor.unversioned.dl_tensor;
    int64_t *shape = export->shape_and_strides, *strides = export->shape_and_strides + LAB_MAX_DIMS;
    lab_array described;
    lab_array_object_describe(self, &described);
    for (int d = 0; d < self->ndim; d++) {
        shape[d] = described.shape[d];
        strides[d] = described.strides[d];
    }
    t->data = self->data;
    t->device = (DLDevice){kDLCUDA, self->device};
    t->ndim = self->ndim;
    t->dtype = lab_dtype_dlpack[self->dtype];
    t->shape = shape;
    t->strides = strides;
    t->byte_offset = 0;
    Py_INCREF(op); /* the exported tensor keeps the memory alive until its deleter runs */
    if (versioned) {
        export->tensor.versioned.version = (DLPackVersion){1, 0};
        export->tensor.versioned.manager_ctx = op;
        export->tensor.versioned.deleter = delete_versioned;
        export->tensor.versioned.flags = 0;
    } else {
        export->tensor.unversioned.manager_ctx = op;
        export->tensor.unversioned.deleter = delete_unversioned;
    }
    PyObject *capsule =
        PyCapsule_New(export, versioned ? "dltensor_versioned" : "dltensor", capsule_destructor);
    if (!capsule) {
        Py_DECREF(op);
        PyMem_RawFree(export);
    }
    return capsule;
}

PyObject *lab_array_dlpack_device(PyObject *op, PyObject *unused) {
    return Py_BuildValue("(ii)", kDLCUDA, ((lab_array_object *)op)->device);
}
