/* array_type.c - lab.Array: a device buffer lab owns, and the producer side of the protocols.
 *
 * Memory is stream-ordered: cudaMallocAsync on the device's default pool, on the stream the array is
 * made on, and cudaFreeAsync on the stream it was last used on, so neither call waits for the GPU
 * and both are legal inside graph capture. The array exports __cuda_array_interface__ v3 (with that
 * stream) and __dlpack__ / __dlpack_device__ (array_export.c), so torch, CuPy and Numba wrap it
 * without a copy. C-contiguous, any lab dtype, up to LAB_MAX_DIMS dimensions. */
#include <stdio.h>
#include <string.h>

#include "binding/args.h"
#include "binding/errors.h"
#include "binding/runtime_types.h"
#include "dispatch/capture.h"
#include "dispatch/device.h"
#include "dispatch/dtype.h"
#include "dispatch/memory.h"
#include "dispatch/stream.h"

static lab_state *state_of(PyObject *self) { return (lab_state *)PyType_GetModuleState(Py_TYPE(self)); }

static int64_t nbytes_of(const lab_array_object *self) {
    return self->numel * lab_dtype_itemsize[self->dtype];
}

void lab_array_object_describe(const lab_array_object *self, lab_array *array) {
    array->data = self->data;
    array->dtype = self->dtype;
    array->ndim = self->ndim;
    for (int d = 0; d < self->ndim; d++) array->shape[d] = self->shape[d];
    lab_fill_contiguous_strides(array);
    array->numel = self->numel;
    array->readonly = 0;
    array->device = self->device;
    array->source = LAB_SOURCE_LAB_ARRAY;
    array->exchange_api = NULL;
    array->has_stream = 1;
    array->stream = (uintptr_t)self->last_use.stream;
    array->stream_owner = self->last_use.owner;
    array->last_use = (lab_last_use *)&self->last_use; /* the launch scope updates it after each launch */
}

/* ---- arguments: dtype, shape, device, stream ---- */

/* A dtype from lab's names ("float32", "bfloat16") or anything numpy.dtype() accepts: its
 * spellings ("f4", "<f4", "single", "float"), its types (np.float32) and dtype objects. */
static int parse_dtype(lab_state *state, PyObject *obj, const char *func, lab_dtype *dtype) {
    if (PyUnicode_Check(obj)) { /* lab's own names first: NumPy has no bfloat16 */
        for (int d = 0; d < LAB_NUM_DTYPES; d++) {
            if (PyUnicode_CompareWithASCIIString(obj, lab_dtype_names[d]) == 0) {
                *dtype = (lab_dtype)d;
                return 0;
            }
        }
    }
    if (!state->numpy && !(state->numpy = PyImport_ImportModule("numpy"))) return -1;
    PyObject *np_dtype = PyObject_CallMethod(state->numpy, "dtype", "O", obj);
    if (!np_dtype) {
        PyErr_Clear();
        PyErr_Format(
            PyExc_TypeError,
            "%s(): argument 'dtype' must be a dtype name such as 'float32' or 'bfloat16', a NumPy spelling "
            "such as 'f4', or a NumPy dtype, got %R",
            func, obj);
        return -1;
    }
    PyObject *name = PyObject_GetAttrString(np_dtype, "name");
    Py_DECREF(np_dtype);
    if (!name) return -1;
    for (int d = 0; d < LAB_NUM_DTYPES; d++) {
        if (PyUnicode_CompareWithASCIIString(name, lab_dtype_names[d]) == 0) {
            *dtype = (lab_dtype)d;
            Py_DECREF(name);
            return 0;
        }
    }
    PyErr_Format(PyExc_TypeError, "%s(): argument 'dtype' = %R is not supported; lab supports %s", func, name,
                 lab_supported_dtypes_text(1));
    Py_DECREF(name);
    return -1;
}

static int parse_shape(PyObject *obj, const char *func, lab_array_object *self) {
    PyObject *sequence = PyLong_Check(obj) ? PyTuple_Pack(1, obj) : PySequence_Tuple(obj);
    if (!sequence) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): argument 'shape' must be an int or a tuple of ints, got %s",
                     func, Py_TYPE(obj)->tp_name);
        return -1;
    }
    const Py_ssize_t ndim = PyTuple_GET_SIZE(sequence);
    int rc = -1;
    if (ndim > LAB_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s(): argument 'shape' has %zd dimensions; lab supports at most %d",
                     func, ndim, LAB_MAX_DIMS);
        goto done;
    }
    self->ndim = (int)ndim;
    self->numel = 1;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        PyObject *item = PyTuple_GET_ITEM(sequence, d);
        if (!PyLong_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s(): argument 'shape' item %zd must be an int, got %s", func, d,
                         Py_TYPE(item)->tp_name);
            goto done;
        }
        int overflow = 0;
        long long size = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow || size < 0) {
            PyErr_Format(PyExc_ValueError, "%s(): argument 'shape' item %zd = %R is not a valid size", func,
                         d, item);
            goto done;
        }
        self->shape[d] = size;
    }
    for (Py_ssize_t d = 0; d < ndim; d++) {
        if (self->numel != 0 &&
            self->shape[d] > (INT64_MAX / lab_dtype_itemsize[self->dtype]) / self->numel) {
            PyErr_Format(PyExc_OverflowError, "%s(): argument 'shape' = %R is too large", func, sequence);
            goto done;
        }
        self->numel *= self->shape[d];
    }
    rc = 0;
done:
    Py_DECREF(sequence);
    return rc;
}

/* device=None: the current device. Returns the ordinal or -1 (error set). */
static int parse_device(lab_state *state, PyObject *obj, const char *func) {
    if (!obj) { /* left out, or None */
        int device = 0;
        cudaError_t err = cudaGetDevice(&device);
        if (err != cudaSuccess) {
            lab_raise_cuda_error(&state->dispatch, err, func, "cudaGetDevice");
            return -1;
        }
        return device;
    }
    int device;
    return lab_read_device(obj, func, &device) < 0 ? -1 : device;
}

/* stream= given, else this thread's lab.stream(), else the legacy default stream; *owner is the
 * object the stream came from (borrowed; NULL for the default stream). */
static int parse_work_stream(lab_state *state, PyObject *obj, const char *func, cudaStream_t *stream,
                             PyObject **owner) {
    lab_stream_arg arg;
    *owner = NULL;
    if (lab_parse_stream_arg(state, obj, func, &arg) < 0) return -1;
    *stream = arg.handle;
    if (arg.given) {
        *owner = arg.owner;
    } else if (!lab_thread_current_stream(stream, owner)) {
        *stream = 0;
    }
    return 0;
}

/* ---- creation ---- */

typedef struct {
    lab_array_object *array;
    int zero;
} allocate_args;

static cudaError_t allocate(void *context) {
    allocate_args *args = context;
    lab_array_object *a = args->array;
    const size_t nbytes = (size_t)nbytes_of(a);
    if (nbytes == 0) return cudaSuccess;
    unsigned long long capture = 0;
    cudaError_t err = lab_stream_capture_id(a->last_use.stream, &capture);
    if (err != cudaSuccess) return err;
    a->from_capture = capture != 0;
    err = cudaMallocAsync((void **)&a->data, nbytes, a->last_use.stream);
    if (err != cudaSuccess) {
        a->data = NULL;
        return err;
    }
    lab_count_array_memory(a->device, 1);
    if (args->zero) err = cudaMemsetAsync(a->data, 0, nbytes, a->last_use.stream);
    return err;
}

/* empty/zeros(shape, dtype="float32", *, device=None, stream=None) */
static const lab_signature CREATE = {1,
                                     2,
                                     4,
                                     {LAB_PARAM(shape, SHAPE), LAB_PARAM(dtype, DTYPE | LAB_OR_NONE),
                                      LAB_PARAM(device, DEVICE | LAB_OR_NONE),
                                      LAB_PARAM(stream, STREAM | LAB_OR_NONE)}};

static PyObject *create(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                        int zero) {
    lab_state *state = lab_get_state(module);
    const char *func = zero ? "zeros" : "empty";
    PyObject *slots[4];
    if (lab_parse_args(state, func, &CREATE, args, nargs, kwnames, slots) < 0) return NULL;
    PyObject *dtype_obj = slots[1];

    lab_array_object *self = (lab_array_object *)state->ArrayType->tp_alloc(state->ArrayType, 0);
    if (!self) return NULL;
    self->dtype = LAB_FLOAT32;
    PyObject *owner = NULL;
    if ((dtype_obj && parse_dtype(state, dtype_obj, func, &self->dtype) < 0) ||
        parse_shape(slots[0], func, self) < 0 ||
        parse_work_stream(state, slots[3], func, &self->last_use.stream, &owner) < 0 ||
        (self->device = parse_device(state, slots[2], func)) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->last_use.owner = Py_XNewRef(owner);
    allocate_args allocation = {self, zero};
    cudaError_t err = lab_with_device(self->device, allocate, &allocation);
    if (err != cudaSuccess) {
        /* an allocation that succeeded before its memset failed is freed with the array */
        char during[96];
        snprintf(during, sizeof(during), "%s of %lld bytes",
                 self->data ? "cudaMemsetAsync" : "cudaMallocAsync", (long long)nbytes_of(self));
        Py_DECREF(self);
        return lab_raise_cuda_error(&state->dispatch, err, func, during);
    }
    return (PyObject *)self;
}

static PyObject *py_empty(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return create(module, args, nargs, kwnames, 0);
}
static PyObject *py_zeros(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return create(module, args, nargs, kwnames, 1);
}

/* ---- host copies ---- */

typedef struct {
    void *dst;
    const void *src;
    size_t nbytes;
    enum cudaMemcpyKind kind;
    cudaStream_t stream;
} copy_args;

/* Queued on the array's stream, then waited for: the host buffer must not be touched (or freed)
 * before the copy is done. Called with the GIL released. */
static cudaError_t copy_and_wait(void *context) {
    copy_args *args = context;
    if (args->nbytes == 0) return cudaSuccess;
    cudaError_t err = cudaMemcpyAsync(args->dst, args->src, args->nbytes, args->kind, args->stream);
    return err == cudaSuccess ? cudaStreamSynchronize(args->stream) : err;
}

static int check_host_buffer(const Py_buffer *view, const lab_array_object *self, const char *func) {
    if (view->len != nbytes_of(self)) {
        PyErr_Format(PyExc_ValueError, "%s(): host buffer has %zd bytes, the array %lld", func, view->len,
                     (long long)nbytes_of(self));
        return -1;
    }
    return 0;
}

/* _copy_from_host(buffer): fills the array from a C-contiguous host buffer of the same size. */
static PyObject *array_copy_from_host(PyObject *op, PyObject *buffer) {
    lab_array_object *self = (lab_array_object *)op;
    Py_buffer view;
    if (PyObject_GetBuffer(buffer, &view, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (check_host_buffer(&view, self, "Array._copy_from_host") < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    copy_args copy = {self->data, view.buf, (size_t)view.len, cudaMemcpyHostToDevice, self->last_use.stream};
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = lab_with_device(self->device, copy_and_wait, &copy);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&state_of(op)->dispatch, err, "Array._copy_from_host", "cudaMemcpyAsync");
    }
    Py_RETURN_NONE;
}

/* numpy(): a new NumPy array with the contents, after the work queued on the array's stream. */
static PyObject *array_numpy(PyObject *op, PyObject *unused) {
    lab_array_object *self = (lab_array_object *)op;
    lab_state *state = state_of(op);
    if (self->dtype == LAB_BFLOAT16) {
        return PyErr_Format(PyExc_TypeError,
                            "Array.numpy(): NumPy has no bfloat16; lab.copy() into a float32 "
                            "array first");
    }
    if (!state->numpy && !(state->numpy = PyImport_ImportModule("numpy"))) return NULL;
    PyObject *shape = PyTuple_New(self->ndim);
    if (!shape) return NULL;
    for (int d = 0; d < self->ndim; d++) PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(self->shape[d]));
    PyObject *host = PyObject_CallMethod(state->numpy, "empty", "Os", shape, lab_dtype_names[self->dtype]);
    Py_DECREF(shape);
    if (!host) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(host, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        Py_DECREF(host);
        return NULL;
    }
    copy_args copy = {view.buf, self->data, (size_t)view.len, cudaMemcpyDeviceToHost, self->last_use.stream};
    cudaError_t err = cudaSuccess;
    if (check_host_buffer(&view, self, "Array.numpy") == 0) {
        Py_BEGIN_ALLOW_THREADS
        err = lab_with_device(self->device, copy_and_wait, &copy);
        Py_END_ALLOW_THREADS

    } else {
        err = cudaErrorInvalidValue;
    }
    PyBuffer_Release(&view);
    if (err != cudaSuccess) {
        Py_DECREF(host);
        return PyErr_Occurred()
                   ? NULL
                   : lab_raise_cuda_error(&state->dispatch, err, "Array.numpy", "cudaMemcpyAsync");
    }
    return host;
}

/* ---- freeing ---- */

typedef struct {
    void *data;
    cudaStream_t stream;
} free_args;

static cudaError_t free_on_stream(void *context) {
    free_args *args = context;
    return cudaFreeAsync(args->data, args->stream);
}

static void array_dealloc(PyObject *op) {
    lab_array_object *self = (lab_array_object *)op;
    PyTypeObject *type = Py_TYPE(op);
    if (self->data) {
        free_args release = {self->data, self->last_use.stream};
        cudaError_t err = lab_with_device(self->device, free_on_stream, &release);
        if (err == cudaErrorInvalidValue && self->from_capture) {
            /* memory of a graph that never ran (a capture dropped, or never replayed): there was nothing
             * to free, and the refusal is CUDA's answer to that, not an error of the program */
            cudaGetLastError();
            err = cudaSuccess;
        }
        if (err == cudaSuccess) lab_count_array_memory(self->device, 0);
        /* At interpreter exit the runtime may already be unloading: the driver frees everything then. */
        if (err != cudaSuccess && err != cudaErrorCudartUnloading && err != cudaErrorContextIsDestroyed) {
            PyObject *saved_type, *saved_value, *saved_traceback;
            PyErr_Fetch(&saved_type, &saved_value, &saved_traceback);
            lab_raise_cuda_error(&((lab_state *)PyType_GetModuleState(type))->dispatch, err, "Array.__del__",
                                 "cudaFreeAsync");
            PyErr_WriteUnraisable(NULL);
            PyErr_Restore(saved_type, saved_value, saved_traceback);
        }
    }
    Py_CLEAR(self->last_use.owner); /* only now may the stream go: the free above is queued on it */
    type->tp_free(op);
    Py_DECREF(type);
}

/* ---- attributes ---- */

static PyObject *array_get_shape(PyObject *op, void *closure) {
    lab_array_object *self = (lab_array_object *)op;
    PyObject *shape = PyTuple_New(self->ndim);
    for (int d = 0; shape && d < self->ndim; d++) {
        PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(self->shape[d]));
    }
    return shape;
}
static PyObject *array_get_strides(PyObject *op, void *closure) {
    lab_array_object *self = (lab_array_object *)op;
    lab_array described;
    lab_array_object_describe(self, &described);
    PyObject *strides = PyTuple_New(self->ndim);
    for (int d = 0; strides && d < self->ndim; d++) {
        PyObject *bytes = PyLong_FromLongLong(described.strides[d] * lab_dtype_itemsize[self->dtype]);
        if (!bytes) {
            Py_CLEAR(strides);
            break;
        }
        PyTuple_SET_ITEM(strides, d, bytes);
    }
    return strides;
}
static PyObject *array_get_dtype(PyObject *op, void *closure) {
    return PyUnicode_FromString(lab_dtype_names[((lab_array_object *)op)->dtype]);
}
static PyObject *array_get_nbytes(PyObject *op, void *closure) {
    return PyLong_FromLongLong(nbytes_of((lab_array_object *)op));
}
static PyObject *array_get_size(PyObject *op, void *closure) {
    return PyLong_FromLongLong(((lab_array_object *)op)->numel);
}
static PyObject *array_get_ndim(PyObject *op, void *closure) {
    return PyLong_FromLong(((lab_array_object *)op)->ndim);
}
static PyObject *array_get_device(PyObject *op, void *closure) {
    return PyLong_FromLong(((lab_array_object *)op)->device);
}
static PyObject *array_get_data_ptr(PyObject *op, void *closure) {
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)((lab_array_object *)op)->data);
}
static PyObject *array_get_stream(PyObject *op, void *closure) {
    return PyLong_FromUnsignedLongLong(
        (unsigned long long)(uintptr_t)((lab_array_object *)op)->last_use.stream);
}

static PyObject *array_repr(PyObject *op) {
    lab_array_object *self = (lab_array_object *)op;
    PyObject *shape = array_get_shape(op, NULL);
    if (!shape) return NULL;
    PyObject *text = PyUnicode_FromFormat("lab.Array(shape=%R, dtype=%s, device=%d)", shape,
                                          lab_dtype_names[self->dtype], self->device);
    Py_DECREF(shape);
    return text;
}

static PyMethodDef array_methods[] = {
    {"numpy", array_numpy, METH_NOARGS,
     "numpy($self, /)\n--\n\nA NumPy copy of the contents, taken after the work queued on the array's stream "
     "(releases the "
     "GIL while it waits)."},
    {"_copy_from_host", array_copy_from_host, METH_O,
     "_copy_from_host($self, buffer, /)\n--\n\nPrivate: fill from a C-contiguous host buffer of the same "
     "size "
     "(lab.asarray)."},
    {"__dlpack__", (PyCFunction)(void (*)(void))lab_array_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\nExport as a "
     "DLPack "
     "capsule "
     "(versioned when max_version >= (1, 0)); `stream` (the consumer's) waits for the array's stream."},
    {"__dlpack_device__", lab_array_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n(2, device): kDLCUDA."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef array_getset[] = {
    {"shape", array_get_shape, NULL, "The shape, a tuple.", NULL},
    {"strides", array_get_strides, NULL, "Strides in bytes (C-contiguous).", NULL},
    {"dtype", array_get_dtype, NULL, "The dtype's name, e.g. 'float32'.", NULL},
    {"nbytes", array_get_nbytes, NULL, "Size in bytes.", NULL},
    {"size", array_get_size, NULL, "Number of elements.", NULL},
    {"ndim", array_get_ndim, NULL, "Number of dimensions.", NULL},
    {"device", array_get_device, NULL, "The CUDA device holding the memory.", NULL},
    {"data_ptr", array_get_data_ptr, NULL, "The device address, as an int (0 for an empty array).", NULL},
    {"stream", array_get_stream, NULL, "Handle of the stream the array was last used on (0: legacy default).",
     NULL},
    {"__cuda_array_interface__", lab_array_get_cai, NULL, "The CUDA Array Interface, version 3.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot array_slots[] = {
    {Py_tp_dealloc, array_dealloc},
    {Py_tp_repr, array_repr},
    {Py_tp_methods, array_methods},
    {Py_tp_getset, array_getset},
    {Py_tp_doc,
     "A C-contiguous device array owned by lab; make one with lab.empty, lab.zeros or lab.asarray."},
    {0, NULL},
};

PyType_Spec lab_array_spec = {
    .name = "lab.Array",
    .basicsize = sizeof(lab_array_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = array_slots,
};

const lab_signed_function lab_array_signatures[] = {{"empty", &CREATE}, {"zeros", &CREATE}, {NULL, NULL}};

PyMethodDef lab_array_functions[] = {
    {"empty", (PyCFunction)(void (*)(void))py_empty, METH_FASTCALL | METH_KEYWORDS,
     "empty(shape, dtype='float32', *, device=None, stream=None)\n--\n\nA new lab.Array, uninitialised, "
     "allocated "
     "stream-ordered on `stream` (default: lab.stream(), else the legacy default stream)."},
    {"zeros", (PyCFunction)(void (*)(void))py_zeros, METH_FASTCALL | METH_KEYWORDS,
     "zeros(shape, dtype='float32', *, device=None, stream=None)\n--\n\nA new lab.Array filled with zeros."},
    {NULL, NULL, 0, NULL},
};
