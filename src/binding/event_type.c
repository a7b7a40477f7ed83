/* event_type.c - lab.Event: a CUDA event, to order streams (Stream.wait_event) and to time work. */
#include "binding/args.h"
#include "binding/errors.h"
#include "binding/runtime_types.h"
#include "dispatch/stream.h"

static lab_state *state_of(PyObject *self) { return (lab_state *)PyType_GetModuleState(Py_TYPE(self)); }

static PyObject *event_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"timing", "enable_timing", NULL};
    int timing = 0, enable_timing = -1; /* enable_timing: torch.cuda.Event's name for it */
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p$p:Event", keywords, &timing, &enable_timing)) {
        return NULL;
    }
    if (enable_timing >= 0) {
        if (PyTuple_GET_SIZE(args) > 0 || (kwargs && PyDict_GetItemString(kwargs, "timing"))) {
            PyErr_SetString(
                PyExc_TypeError,
                "Event(): arguments 'timing' and 'enable_timing' say the same: pass one, not both");
            return NULL;
        }
        timing = enable_timing;
    }
    lab_state *state = (lab_state *)PyType_GetModuleState(type);
    cudaEvent_t handle;
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) {
        err = cudaEventCreateWithFlags(&handle, timing ? cudaEventDefault : cudaEventDisableTiming);
    }
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&state->dispatch, err, "Event", "cudaEventCreateWithFlags");
    }
    lab_event_object *self = (lab_event_object *)type->tp_alloc(type, 0);
    if (!self) {
        cudaEventDestroy(handle);
        return NULL;
    }
    self->handle = handle;
    self->device = device;
    self->timing = timing;
    return (PyObject *)self;
}

static void event_dealloc(PyObject *op) {
    PyTypeObject *type = Py_TYPE(op);
    cudaEventDestroy(((lab_event_object *)op)->handle);
    type->tp_free(op);
    Py_DECREF(type);
}

/* The stream of Event.record / Event.wait: `stream` (positional or keyword, as in torch and CuPy),
 * else this thread's lab.stream(), else the legacy default stream. */
static int stream_of_call(lab_state *state, const char *func, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames, cudaStream_t *stream) {
    static const lab_signature signature = {0, 1, 1, {LAB_PARAM(stream, STREAM | LAB_OR_NONE)}};
    PyObject *stream_obj;
    lab_stream_arg arg;
    if (lab_parse_args(state, func, &signature, args, nargs, kwnames, &stream_obj) < 0) return -1;
    if (lab_parse_stream_arg(state, stream_obj, func, &arg) < 0) return -1;
    *stream = arg.handle;
    if (!arg.given && !lab_thread_current_stream(stream, NULL)) *stream = 0;
    return 0;
}

static PyObject *event_record(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = state_of(op);
    cudaStream_t stream;
    if (stream_of_call(state, "Event.record", args, nargs, kwnames, &stream) < 0) return NULL;
    cudaError_t err = cudaEventRecord(((lab_event_object *)op)->handle, stream);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&state->dispatch, err, "Event.record", "cudaEventRecord");
    }
    Py_RETURN_NONE;
}

static PyObject *event_wait(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = state_of(op);
    cudaStream_t stream;
    if (stream_of_call(state, "Event.wait", args, nargs, kwnames, &stream) < 0) return NULL;
    cudaError_t err = cudaStreamWaitEvent(stream, ((lab_event_object *)op)->handle, 0);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&state->dispatch, err, "Event.wait", "cudaStreamWaitEvent");
    }
    Py_RETURN_NONE;
}

static PyObject *event_synchronize(PyObject *op, PyObject *unused) {
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = cudaEventSynchronize(((lab_event_object *)op)->handle);
    Py_END_ALLOW_THREADS
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&state_of(op)->dispatch, err, "Event.synchronize",
                                    "cudaEventSynchronize");
    }
    Py_RETURN_NONE;
}

static PyObject *event_query(PyObject *op, PyObject *unused) {
    cudaError_t err = cudaEventQuery(((lab_event_object *)op)->handle);
    if (err == cudaSuccess) Py_RETURN_TRUE;
    if (err == cudaErrorNotReady) {
        cudaGetLastError(); /* "not ready" is an answer, not an error to leave behind */
        Py_RETURN_FALSE;
    }
    return lab_raise_cuda_error(&state_of(op)->dispatch, err, "Event.query", "cudaEventQuery");
}

static PyObject *event_elapsed_time(PyObject *op, PyObject *end) {
    lab_state *state = state_of(op);
    if (!PyObject_TypeCheck(end, state->EventType)) {
        return PyErr_Format(PyExc_TypeError, "Event.elapsed_time(): expected a lab.Event, got %s",
                            Py_TYPE(end)->tp_name);
    }
    if (!((lab_event_object *)op)->timing || !((lab_event_object *)end)->timing) {
        return PyErr_Format(PyExc_ValueError,
                            "Event.elapsed_time(): both events must be created with Event(timing=True)");
    }
    float ms = 0;
    cudaError_t err =
        cudaEventElapsedTime(&ms, ((lab_event_object *)op)->handle, ((lab_event_object *)end)->handle);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&state->dispatch, err, "Event.elapsed_time", "cudaEventElapsedTime");
    }
    return PyFloat_FromDouble(ms);
}

static PyObject *event_repr(PyObject *op) {
    lab_event_object *self = (lab_event_object *)op;
    return PyUnicode_FromFormat("<lab.Event device=%d timing=%s>", self->device,
                                self->timing ? "True" : "False");
}

static PyObject *event_get_handle(PyObject *op, void *closure) {
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)((lab_event_object *)op)->handle);
}

static PyMethodDef event_methods[] = {
    {"record", (PyCFunction)(void (*)(void))event_record, METH_FASTCALL | METH_KEYWORDS,
     "record($self, /, stream=None)\n--\n\nRecord the event on `stream` (default: this thread's "
     "lab.stream(), else "
     "the legacy default stream)."},
    {"wait", (PyCFunction)(void (*)(void))event_wait, METH_FASTCALL | METH_KEYWORDS,
     "wait($self, /, stream=None)\n--\n\nWork queued on `stream` (default: this thread's lab.stream(), else "
     "the "
     "legacy default stream) after this call waits for the event's last record; no host wait."},
    {"synchronize", event_synchronize, METH_NOARGS,
     "synchronize($self, /)\n--\n\nWait until the work before the event's last record has finished (releases "
     "the "
     "GIL)."},
    {"query", event_query, METH_NOARGS,
     "query($self, /)\n--\n\nTrue if the work before the event's last record has finished."},
    {"elapsed_time", event_elapsed_time, METH_O,
     "elapsed_time($self, end, /)\n--\n\nMilliseconds between this event's record and `end`'s; both need "
     "timing=True."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef event_getset[] = {
    {"handle", event_get_handle, NULL, "The cudaEvent_t, as an int.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot event_slots[] = {
    {Py_tp_new, event_new},
    {Py_tp_dealloc, event_dealloc},
    {Py_tp_repr, event_repr},
    {Py_tp_methods, event_methods},
    {Py_tp_getset, event_getset},
    {Py_tp_doc,
     "Event(timing=False, *, enable_timing=None)\n--\n\nA CUDA event on the current device. Without timing "
     "it is cheaper and serves to order streams (Stream.wait_event, Event.wait); with timing=True (or "
     "torch's spelling, enable_timing=True), elapsed_time() measures between two."},
    {0, NULL},
};

PyType_Spec lab_event_spec = {
    .name = "lab.Event",
    .basicsize = sizeof(lab_event_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = event_slots,
};
