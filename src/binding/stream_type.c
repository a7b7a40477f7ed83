/* stream_type.c - lab.Stream (a CUDA stream lab creates and owns) and lab's thread-local current
 * stream, which `with lab.stream(s):` sets and every launch without stream= uses. */
#include <limits.h>

#include "binding/args.h"
#include "binding/errors.h"
#include "binding/runtime_types.h"
#include "dispatch/device.h"
#include "dispatch/stream.h"

/* ---- the thread-local current stream (kept by dispatch/stream.c, which every launch asks) ---- */

/* _swap_current_stream(s) -> previous: makes s (None: none) current for this thread. lab.stream's
 * __enter__ and __exit__ call it; the stream argument is validated like stream=. */
static PyObject *py_swap_current_stream(PyObject *module, PyObject *stream_obj) {
    lab_stream_arg arg;
    if (lab_parse_stream_arg(lab_get_state(module), stream_obj, "stream", &arg) < 0) return NULL;
    return lab_swap_thread_stream(arg.given ? stream_obj : NULL, arg.handle);
}

static PyObject *py_current_stream(PyObject *module, PyObject *unused) {
    cudaStream_t handle;
    PyObject *owner = NULL;
    return Py_NewRef(lab_thread_current_stream(&handle, &owner) ? owner : Py_None);
}

PyMethodDef lab_stream_functions[] = {
    {"_swap_current_stream", py_swap_current_stream, METH_O,
     "_swap_current_stream(stream, /)\n--\n\nPrivate: make `stream` (None: none) this thread's current lab "
     "stream; "
     "returns the previous one. Use `with lab.stream(s):`."},
    {"current_stream", py_current_stream, METH_NOARGS,
     "current_stream()\n--\n\nThe stream object this thread's innermost `with lab.stream(s):` set, or None."},
    {NULL, NULL, 0, NULL},
};

const lab_signed_function lab_stream_signatures[] = {{"current_stream", &LAB_NO_PARAMETERS}, {NULL, NULL}};

/* ---- lab.Stream ---- */

static lab_state *state_of(PyObject *self) { return (lab_state *)PyType_GetModuleState(Py_TYPE(self)); }

typedef struct {
    cudaStream_t *handle;
    int priority;
} create_args;

static cudaError_t create_stream(void *context) {
    create_args *args = context;
    return cudaStreamCreateWithPriority(args->handle, cudaStreamNonBlocking, args->priority);
}

static PyObject *stream_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"device", "priority", NULL};
    PyObject *device_obj = Py_None, *priority_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:Stream", keywords, &device_obj, &priority_obj)) {
        return NULL;
    }
    int device = -1;
    if (device_obj != Py_None && lab_read_device(device_obj, "Stream", &device) < 0) return NULL;
    int64_t priority = 0; /* CUDA clamps it to the device's range; it must fit an int to be passed */
    if (priority_obj && lab_read_int64(priority_obj, "Stream", "priority", &priority) < 0) return NULL;
    if (priority < INT_MIN || priority > INT_MAX) {
        return PyErr_Format(PyExc_OverflowError, "Stream(): argument 'priority' = %lld does not fit a C int",
                            (long long)priority);
    }
    lab_state *state = (lab_state *)PyType_GetModuleState(type);
    cudaStream_t handle = 0;
    create_args create = {&handle, (int)priority};
    cudaError_t err = device >= 0 ? lab_with_device(device, create_stream, &create) : create_stream(&create);
    if (err == cudaSuccess && device < 0) err = cudaGetDevice(&device);
    if (err != cudaSuccess) {
        lab_raise_cuda_error(&state->dispatch, err, "Stream", "cudaStreamCreateWithPriority");
        return NULL;
    }
    lab_stream_object *self = (lab_stream_object *)type->tp_alloc(type, 0);
    if (!self) {
        cudaStreamDestroy(handle);
        return NULL;
    }
    self->handle = handle;
    self->device = device;
    cudaStreamGetPriority(handle, &self->priority); /* the clamped priority CUDA actually gave */
    return (PyObject *)self;
}

static void stream_dealloc(PyObject *op) {
    lab_stream_object *self = (lab_stream_object *)op;
    PyTypeObject *type = Py_TYPE(op);
    if (self->handle) cudaStreamDestroy(self->handle); /* work queued on it still completes */
    type->tp_free(op);
    Py_DECREF(type);
}

static PyObject *stream_cuda_stream(PyObject *op, PyObject *unused) {
    return Py_BuildValue("(iK)", 0, (unsigned long long)(uintptr_t)((lab_stream_object *)op)->handle);
}

static PyObject *stream_synchronize(PyObject *op, PyObject *unused) {
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = cudaStreamSynchronize(((lab_stream_object *)op)->handle);
    Py_END_ALLOW_THREADS
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&state_of(op)->dispatch, err, "Stream.synchronize",
                                    "cudaStreamSynchronize");
    }
    Py_RETURN_NONE;
}

static PyObject *stream_query(PyObject *op, PyObject *unused) {
    cudaError_t err = cudaStreamQuery(((lab_stream_object *)op)->handle);
    if (err == cudaSuccess) Py_RETURN_TRUE;
    if (err == cudaErrorNotReady) {
        cudaGetLastError(); /* "not ready" is an answer, not an error to leave behind */
        Py_RETURN_FALSE;
    }
    return lab_raise_cuda_error(&state_of(op)->dispatch, err, "Stream.query", "cudaStreamQuery");
}

static PyObject *stream_wait_event(PyObject *op, PyObject *event) {
    lab_state *state = state_of(op);
    if (!PyObject_TypeCheck(event, state->EventType)) {
        return PyErr_Format(PyExc_TypeError, "Stream.wait_event(): expected a lab.Event, got %s",
                            Py_TYPE(event)->tp_name);
    }
    cudaError_t err =
        cudaStreamWaitEvent(((lab_stream_object *)op)->handle, ((lab_event_object *)event)->handle, 0);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&state->dispatch, err, "Stream.wait_event", "cudaStreamWaitEvent");
    }
    Py_RETURN_NONE;
}

static PyObject *stream_wait_stream(PyObject *op, PyObject *other) {
    lab_state *state = state_of(op);
    lab_stream_arg arg;
    if (lab_parse_stream_arg(state, other, "Stream.wait_stream", &arg) < 0) return NULL;
    const cudaStream_t other_handle = arg.handle;
    if (!arg.given) return PyErr_Format(PyExc_TypeError, "Stream.wait_stream(): expected a stream, got None");
    cudaError_t err = lab_stream_wait_stream(&state->dispatch, ((lab_stream_object *)op)->handle,
                                             other_handle, ((lab_stream_object *)op)->device);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&state->dispatch, err, "Stream.wait_stream", "event record/wait");
    }
    Py_RETURN_NONE;
}

/* record_event(event=None) -> the event, recorded on this stream (a new lab.Event when None), as
 * torch.cuda.Stream.record_event. */
static PyObject *stream_record_event(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames) {
    lab_state *state = state_of(op);
    static const lab_signature signature = {0, 1, 1, {LAB_PARAM(event, EVENT | LAB_OR_NONE)}};
    PyObject *event;
    if (lab_parse_args(state, "Stream.record_event", &signature, args, nargs, kwnames, &event) < 0) {
        return NULL;
    }
    if (!event) { /* left out, or None */
        event = PyObject_CallNoArgs((PyObject *)state->EventType);
        if (!event) return NULL;
    } else if (!PyObject_TypeCheck(event, state->EventType)) {
        return PyErr_Format(PyExc_TypeError,
                            "Stream.record_event(): argument 'event' must be a lab.Event or None, got %s",
                            Py_TYPE(event)->tp_name);
    } else {
        Py_INCREF(event);
    }
    cudaError_t err = cudaEventRecord(((lab_event_object *)event)->handle, ((lab_stream_object *)op)->handle);
    if (err != cudaSuccess) {
        Py_DECREF(event);
        return lab_raise_cuda_error(&state->dispatch, err, "Stream.record_event", "cudaEventRecord");
    }
    return event;
}

static PyObject *stream_repr(PyObject *op) {
    lab_stream_object *self = (lab_stream_object *)op;
    return PyUnicode_FromFormat("<lab.Stream handle=0x%llx device=%d priority=%d>",
                                (unsigned long long)(uintptr_t)self->handle, self->device, self->priority);
}

static PyObject *stream_get_handle(PyObject *op, void *closure) {
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)((lab_stream_object *)op)->handle);
}
static PyObject *stream_get_device(PyObject *op, void *closure) {
    return PyLong_FromLong(((lab_stream_object *)op)->device);
}
static PyObject *stream_get_priority(PyObject *op, void *closure) {
    return PyLong_FromLong(((lab_stream_object *)op)->priority);
}

static PyMethodDef stream_methods[] = {
    {"__cuda_stream__", stream_cuda_stream, METH_NOARGS,
     "__cuda_stream__($self, /)\n--\n\n(0, handle): the CUDA stream protocol."},
    {"synchronize", stream_synchronize, METH_NOARGS,
     "synchronize($self, /)\n--\n\nWait until all work queued on the stream has finished (releases the "
     "GIL)."},
    {"query", stream_query, METH_NOARGS,
     "query($self, /)\n--\n\nTrue if all work queued on the stream has finished."},
    {"wait_event", stream_wait_event, METH_O,
     "wait_event($self, event, /)\n--\n\nWork queued on this stream after this call waits for `event` (no "
     "host "
     "wait)."},
    {"record_event", (PyCFunction)(void (*)(void))stream_record_event, METH_FASTCALL | METH_KEYWORDS,
     "record_event($self, /, event=None)\n--\n\nRecord `event` (a new lab.Event when None) on this stream "
     "and return "
     "it, as torch.cuda.Stream.record_event."},
    {"wait_stream", stream_wait_stream, METH_O,
     "wait_stream($self, stream, /)\n--\n\nWork queued on this stream after this call waits for all work "
     "queued on "
     "`stream` "
     "so far (any stream object or handle; no host wait)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stream_getset[] = {
    {"handle", stream_get_handle, NULL, "The cudaStream_t, as an int.", NULL},
    {"cuda_stream", stream_get_handle, NULL, "The cudaStream_t, as an int (torch.cuda.Stream's name).", NULL},
    {"ptr", stream_get_handle, NULL, "The cudaStream_t, as an int (cupy.cuda.Stream's name).", NULL},
    {"device", stream_get_device, NULL, "The device the stream belongs to.", NULL},
    {"priority", stream_get_priority, NULL, "The stream's priority (lower numbers run first).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot stream_slots[] = {
    {Py_tp_new, stream_new},
    {Py_tp_dealloc, stream_dealloc},
    {Py_tp_repr, stream_repr},
    {Py_tp_methods, stream_methods},
    {Py_tp_getset, stream_getset},
    {Py_tp_doc,
     "Stream(device=None, priority=0)\n--\n\nA CUDA stream owned by lab (non-blocking: it does not "
     "wait for the legacy default stream). Pass it as stream=, or make it current with "
     "`with lab.stream(s):`. torch, CuPy and Numba accept it through __cuda_stream__ or .handle."},
    {0, NULL},
};

PyType_Spec lab_stream_spec = {
    .name = "lab.Stream",
    .basicsize = sizeof(lab_stream_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = stream_slots,
};
