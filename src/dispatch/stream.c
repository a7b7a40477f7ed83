/* stream.c - the stream policy of stream.h. */
#include "dispatch/stream.h"

#include "dispatch/capture.h"

/* ---- the thread-local current stream ----
 * Each thread has its own: `with lab.stream(s)` in one thread never moves another thread's launches.
 * The object is held (strong reference) so its handle stays valid while it is current. */
static _Thread_local PyObject *current_stream_object = NULL;
static _Thread_local cudaStream_t current_stream_handle = 0;

int lab_thread_current_stream(cudaStream_t *stream, PyObject **owner) {
    if (!current_stream_object) return 0;
    *stream = current_stream_handle;
    if (owner) *owner = current_stream_object;
    return 1;
}

PyObject *lab_swap_thread_stream(PyObject *stream_obj, cudaStream_t handle) {
    PyObject *previous = current_stream_object ? current_stream_object : Py_NewRef(Py_None);
    current_stream_object = stream_obj ? Py_NewRef(stream_obj) : NULL;
    current_stream_handle = handle;
    return previous; /* the reference the thread held is handed to the caller */
}

/* 0 and 1 both name the legacy default stream. */
static cudaStream_t canonical(cudaStream_t stream) {
    return stream == cudaStreamLegacy ? (cudaStream_t)0 : stream;
}

/* The stream array `a` declares, if any: 1 and *stream set, 0 if none, -1 on a producer error. */
static int declared_stream(const lab_array *a, cudaStream_t *stream) {
    if (a->source == LAB_SOURCE_DLPACK_EXCHANGE) {
        void *current = NULL;
        if (a->exchange_api->current_work_stream(kDLCUDA, a->device, &current) != 0) {
            if (PyErr_Occurred()) return lab_fail(LAB_FAILURE_PYTHON, "the producer raised");
            return lab_fail(LAB_FAILURE_RUNTIME,
                            "a producer's current_work_stream failed without saying why");
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

int lab_plan_streams(lab_dispatch_state *state, const lab_array *const *arrays, int n,
                     const lab_stream_arg *given, lab_stream_plan *plan) {
    cudaStream_t declared[LAB_MAX_GROUPS];
    PyObject *declared_owner[LAB_MAX_GROUPS];
    int n_declared = 0;
    const DLPackExchangeAPI *asked_api =
        NULL; /* all tensors of one producer share its current stream: ask once */
    int asked_device = -1;
    if (n > LAB_MAX_GROUPS) n = LAB_MAX_GROUPS;
    for (int i = 0; i < n; i++) {
        const lab_array *a = arrays[i];
        if (a->source == LAB_SOURCE_DLPACK_EXCHANGE && a->exchange_api == asked_api &&
            a->device == asked_device) {
            continue;
        }
        cudaStream_t stream = 0;
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
    if (given->given) {
        plan->launch = canonical(given->handle);
        plan->launch_owner = given->owner;
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

static cudaError_t ordering_event(lab_dispatch_state *state, int device, cudaEvent_t *event) {
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
 * recorded again as soon as the wait is queued. The GIL serialises the record/wait pairs: only the
 * Python face orders streams (XLA's calls name one stream and their buffers none). */
cudaError_t lab_stream_wait_stream(lab_dispatch_state *state, cudaStream_t waiter, cudaStream_t waited,
                                   int device) {
    cudaEvent_t event;
    cudaError_t err = ordering_event(state, device, &event);
    if (err == cudaSuccess) err = cudaEventRecord(event, waited);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(waiter, event, 0);
    return err;
}

/* A graph capture is ordered with the world outside it when it is replayed, not by events: a wait
 * between a capturing stream and one outside the capture would pull the outside stream into the
 * capture (or wait on work no replay repeats). So a stream is ordered with the launch stream only
 * where both are outside any capture or both inside the same one; the others leave the plan. */
static cudaError_t keep_streams_of_the_launch_capture(lab_stream_plan *plan) {
    unsigned long long launch_capture = 0;
    cudaError_t err = lab_stream_capture_id(plan->launch, &launch_capture);
    int kept = 0;
    for (int j = 0; err == cudaSuccess && j < plan->n_foreign; j++) {
        unsigned long long capture = 0;
        err = lab_stream_capture_id(plan->foreign[j], &capture);
        if (capture == launch_capture) plan->foreign[kept++] = plan->foreign[j];
    }
    if (err == cudaSuccess) plan->n_foreign = kept;
    return err;
}

cudaError_t lab_order_before_launch(lab_dispatch_state *state, lab_stream_plan *plan, int device) {
    if (plan->n_foreign == 0) return cudaSuccess;
    cudaError_t err = keep_streams_of_the_launch_capture(plan);
    if (err != cudaSuccess) return err;
    for (int j = 0; j < plan->n_foreign; j++) {
        err = lab_stream_wait_stream(state, plan->launch, plan->foreign[j], device);
        if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

cudaError_t lab_order_after_launch(lab_dispatch_state *state, const lab_stream_plan *plan, int device) {
    if (plan->n_foreign == 0) return cudaSuccess;
    cudaEvent_t event;
    cudaError_t err = ordering_event(state, device, &event);
    if (err == cudaSuccess) err = cudaEventRecord(event, plan->launch);
    for (int j = 0; err == cudaSuccess && j < plan->n_foreign; j++) {
        err = cudaStreamWaitEvent(plan->foreign[j], event, 0);
    }
    return err;
}
