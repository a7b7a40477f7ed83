/* ffi_holding_gil.c - _call_ffi_holding_gil(target, frame_address, wait_seconds) -> (finished, message):
 * runs an XLA FFI handler (a capsule of _xla_ffi_targets()) on a thread of its own while the calling
 * Python thread keeps the GIL - as XLA's thread runs one while a training loop's Python thread is busy.
 * `finished` says whether the handler returned within the wait, which a handler that takes the GIL
 * cannot; `message` is the XLA error it gave, or None. The frame is copied with an API table whose
 * stream and error functions are these C ones, so nothing but lab's own code could need the
 * interpreter. Afterwards the GIL is released until the handler is done, whatever it waits for. */
#include "testing/ffi_holding_gil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "binding/xla_ffi_abi.h"

static char error_message[1024];

static lab_xla_ffi_error *record_error(lab_xla_ffi_error_create_args *args) {
    snprintf(error_message, sizeof error_message, "%s", args->message);
    return (lab_xla_ffi_error *)error_message; /* any non-null pointer stands for XLA's error object */
}

static lab_xla_ffi_error *default_stream(lab_xla_ffi_stream_get_args *args) {
    args->stream = NULL;
    return NULL;
}

typedef struct {
    lab_xla_ffi_error *(*handler)(lab_xla_ffi_call_frame *frame);
    lab_xla_ffi_call_frame *frame;
    lab_xla_ffi_error *result;
    atomic_int done;
} handler_run;

static void *run_handler(void *arg) {
    handler_run *run = arg;
    run->result = run->handler(run->frame);
    atomic_store(&run->done, 1);
    return NULL;
}

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static PyObject *py_call_ffi_holding_gil(PyObject *module, PyObject *args) {
    PyObject *capsule;
    unsigned long long frame_address;
    double wait_seconds;
    if (!PyArg_ParseTuple(args, "OKd:_call_ffi_holding_gil", &capsule, &frame_address, &wait_seconds)) {
        return NULL;
    }
    void *handler = PyCapsule_GetPointer(capsule, NULL);
    if (!handler) return NULL;
    lab_xla_ffi_call_frame frame = *(const lab_xla_ffi_call_frame *)(uintptr_t)frame_address;
    lab_xla_ffi_api api = *frame.api;
    api.error_create = record_error;
    api.stream_get = default_stream;
    frame.api = &api;
    error_message[0] = '\0';
    handler_run run = {.handler = (lab_xla_ffi_error * (*)(lab_xla_ffi_call_frame *)) handler,
                       .frame = &frame};
    atomic_init(&run.done, 0);
    pthread_t thread;
    if (pthread_create(&thread, NULL, run_handler, &run) != 0) {
        return PyErr_Format(PyExc_RuntimeError, "_call_ffi_holding_gil: no thread could be started");
    }
    const double deadline = seconds_now() + wait_seconds;
    const struct timespec millisecond = {0, 1000000};
    while (!atomic_load(&run.done) && seconds_now() < deadline) nanosleep(&millisecond, NULL); /* GIL held */
    const int finished = atomic_load(&run.done);
    PyThreadState *saved = PyEval_SaveThread(); /* now the handler may take the GIL, if it waits for it */
    pthread_join(thread, NULL);
    PyEval_RestoreThread(saved);
    return Py_BuildValue("(NN)", PyBool_FromLong(finished),
                         run.result ? PyUnicode_FromString(error_message) : Py_NewRef(Py_None));
}

PyMethodDef lab_ffi_holding_gil_methods[] = {
    {"_call_ffi_holding_gil", py_call_ffi_holding_gil, METH_VARARGS,
     "_call_ffi_holding_gil(target, frame_address, wait_seconds) -> (finished, message): for the tests."},
    {NULL, NULL, 0, NULL},
};
