/* stream.c - the stream policy of stream.h. */
#include "stream.h"

#include "runtime_types.h"

/* A stream handle from a Python int: 0 is the legacy default stream when given as `stream=`. */
static int handle_from_int(PyObject *value, const char *func, const char *what, cudaStream_t *stream) {
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be an int stream handle, got %s", func, what, Py_TYPE(value)->tp_name);
        return -1;
    }
    unsigned long long handle = PyLong_AsUnsignedLongLong(value);
    if (handle == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s(): %s %R is not a valid stream handle (expected a non-negative int that fits "
                     "a pointer)", func, what, value);
        return -1;
    }
    *stream = (cudaStream_t)(uintptr_t)handle;
    return 0;
}

/* Gets an optional attribute: 1 found, 0 absent, -1 error. */
static int optional_attr(PyObject *obj, PyObject *name, PyObject **value) {
    *value = PyObject_GetAttr(obj, name);
    if (*value) return 1;
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 0;
}

int lab_parse_stream_arg(lab_state *state, PyObject *obj, const char *func, int *given, cudaStream_t *stream) {
    *given = 0;
    *stream = 0;
    if (!obj || obj == Py_None) return 0;
    *given = 1;
    if (PyLong_Check(obj)) {
        if (PyBool_Check(obj)) {
            PyErr_Format(PyExc_TypeError, "%s(): stream must be an int handle or a stream object, got bool", func);
            return -1;
        }
        return handle_from_int(obj, func, "stream", stream);
    }

    PyObject *attr = NULL;
    int found = optional_attr(obj, LAB_NAME_OBJ(state, cuda_stream_protocol), &attr);
    if (found < 0) return -1;
    if (found) {
        PyObject *result = PyObject_CallNoArgs(attr);
        Py_DECREF(attr);
        if (!result) return -1;
        int rc = -1;
        if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
            PyErr_Format(PyExc_TypeError, "%s(): stream.__cuda_stream__() must return a tuple (version, handle), got %R",
                         func, result);
        } else {
            rc = handle_from_int(PyTuple_GET_ITEM(result, 1), func, "stream.__cuda_stream__()[1]", stream);
        }
        Py_DECREF(result);
        return rc;
    }
    const lab_name fallbacks[2] = {LAB_NAME_cuda_stream, LAB_NAME_ptr};
    for (int i = 0; i < 2; i++) {
        found = optional_attr(obj, state->names[fallbacks[i]], &attr);
        if (found < 0) return -1;
        if (found) {
            int rc = handle_from_int(attr, func, i == 0 ? "stream.cuda_stream" : "stream.ptr", stream);
            Py_DECREF(attr);
            return rc;
        }
    }
    PyErr_Format(PyExc_TypeError, "%s(): stream must be None, an int handle, or an object with __cuda_stream__() "
                 "(or .cuda_stream / .ptr), got %s", func, Py_TYPE(obj)->tp_name);
    return -1;
}

/* 0 and 1 both name the legacy default stream. */
static cudaStream_t canonical(cudaStream_t stream) { return stream == cudaStreamLegacy ? (cudaStream_t)0 : stream; }

/* The stream array `a` declares, if any: 1 and *stream set, 0 if none, -1 on a producer error. */
static int declared_stream(const lab_array *a, cudaStream_t *stream) {
    if (a->source == LAB_SOURCE_DLPACK_EXCHANGE) {
        void *current = NULL;
        if (a->exchange_api->current_work_stream(kDLCUDA, a->device, &current) != 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "a producer's current_work_stream failed without saying why");
            return -1;
        }
        *stream = canonical((cudaStream_t)current);
        return 1;
    }
    if (a->has_stream) {
        *stream = canonical((cudaStream_t)a->stream); /* 2 is cudaStreamPerThread */
        return 1;
    }
    return 0;
}

int lab_plan_streams(lab_state *state, const lab_array *arrays, int n, PyObject *given_owner, int stream_given,
                     cudaStream_t given, lab_stream_plan *plan) {
    cudaStream_t declared[LAB_MAX_OPERANDS];
    PyObject *declared_owner[LAB_MAX_OPERANDS];
    int n_declared = 0;
    const DLPackExchangeAPI *asked_api = NULL; /* all tensors of one producer share its current stream: ask once */
    int asked_device = -1;
    for (int i = 0; i < n; i++) {
        const lab_array *a = &arrays[i];
        if (a->source == LAB_SOURCE_DLPACK_EXCHANGE && a->exchange_api == asked_api && a->device == asked_device) continue;
        cudaStream_t stream;
        int found = declared_stream(a, &stream);
        if (found < 0) return -1;
        if (!found) continue;
        if (a->source == LAB_SOURCE_DLPACK_EXCHANGE) {
            asked_api = a->exchange_api;
            asked_device = a->device;
        }
        int seen = 0;
        for (int j = 0; j < n_declared; j++) seen |= declared[j] == stream;
        if (!seen) {
            declared_owner[n_declared] = a->stream_owner;
            declared[n_declared++] = stream;
        }
    }
    cudaStream_t thread_stream;
    PyObject *thread_owner = NULL;
    if (stream_given) {
        plan->launch = canonical(given);
        plan->launch_owner = given_owner;
    } else if (lab_thread_current_stream(&thread_stream, &thread_owner)) {
        plan->launch = canonical(thread_stream);
        plan->launch_owner = thread_owner;
    } else {
        plan->launch = n_declared ? declared[0] : (cudaStream_t)0;
        plan->launch_owner = n_declared ? declared_owner[0] : NULL;
    }

    plan->n_foreign = 0;
    if (!state->order_streams) return 0;
    for (int j = 0; j < n_declared; j++)
        if (declared[j] != plan->launch) plan->foreign[plan->n_foreign++] = declared[j];
    return 0;
}

static cudaError_t ordering_event(lab_state *state, int device, cudaEvent_t *event) {
    if (device < 0 || device >= LAB_MAX_DEVICES) return cudaErrorInvalidDevice;
    if (!state->order_events[device]) {
        cudaEvent_t created;
        cudaError_t err = cudaEventCreateWithFlags(&created, cudaEventDisableTiming);
        if (err != cudaSuccess) return err;
        state->order_events[device] = created;
    }
    *event = (cudaEvent_t)state->order_events[device];
    return cudaSuccess;
}

/* One event per device is enough: a wait binds to the record before it, so the event can be
 * recorded again as soon as the wait is queued. The GIL serialises the record/wait pairs. */
cudaError_t lab_stream_wait_stream(lab_state *state, cudaStream_t waiter, cudaStream_t waited, int device) {
    cudaEvent_t event;
    cudaError_t err = ordering_event(state, device, &event);
    if (err == cudaSuccess) err = cudaEventRecord(event, waited);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(waiter, event, 0);
    return err;
}

cudaError_t lab_order_before_launch(lab_state *state, const lab_stream_plan *plan, int device) {
    for (int j = 0; j < plan->n_foreign; j++) {
        cudaError_t err = lab_stream_wait_stream(state, plan->launch, plan->foreign[j], device);
        if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

cudaError_t lab_order_after_launch(lab_state *state, const lab_stream_plan *plan, int device) {
    if (plan->n_foreign == 0) return cudaSuccess;
    cudaEvent_t event;
    cudaError_t err = ordering_event(state, device, &event);
    if (err == cudaSuccess) err = cudaEventRecord(event, plan->launch);
    for (int j = 0; err == cudaSuccess && j < plan->n_foreign; j++) err = cudaStreamWaitEvent(plan->foreign[j], event, 0);
    return err;
}
