/* lesson5_streams.c - lesson 5: streams and events. add(a, b, out, *, stream=None).
 *
 * A GPU runs work queued on streams; two streams run independently unless an event orders them.
 * Each array's producer says on which stream its memory is being written or read (CAI v3's 'stream':
 * a handle, 1 for the legacy default stream, 2 for the per-thread default). The launch goes on one
 * stream - the `stream=` argument, else out's producer's - and must not overtake work the producers
 * queued elsewhere, nor be overtaken by what they queue next. So around the launch:
 *   before: for each other producer stream, record an event there, make the launch stream wait on it;
 *   after:  record an event on the launch stream, make each other producer stream wait on it.
 * No host synchronization: the ordering is on the device, and the call returns at once.
 *
 * `stream=` takes an int (a cudaStream_t) or any object with __cuda_stream__, the stream protocol
 * that returns (version, handle) - lab.Stream has it, as do CuPy's and cuda.core's streams. It is
 * read before the arrays, and checked on any machine (stream_of shows what it read).
 *
 * lab does this in src/dispatch/stream.c (which stream, the protocols) and
 * src/dispatch/launch_scope.c (the events around every op's launch: one event per device, made at the
 * first launch that needs it and reused by every later one - never created per call). */
#include <cuda_runtime_api.h>

#include "lessons.h"

enum { A, B, OUT, STREAM, N_PARAMS };
static PyObject *names[N_PARAMS]; /* lesson 2 says where these belong; kept short here */

/* stream=: None (NULL), an int, or an object whose __cuda_stream__() returns (0, handle). */
static int read_stream_argument(PyObject *obj, void **stream, int *given) {
    *given = obj && obj != Py_None;
    if (!*given) return 0;
    if (PyLong_Check(obj)) return read_stream(obj, "add", stream);
    PyObject *method = PyObject_GetAttrString(obj, "__cuda_stream__");
    if (!method) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "add(): 'stream' must be None, an int or an object with __cuda_stream__, got %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *pair = PyObject_CallNoArgs(method);
    Py_DECREF(method);
    if (!pair) return -1;
    int rc = -1;
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyLong_Check(PyTuple_GET_ITEM(pair, 0)) ||
        !PyLong_Check(PyTuple_GET_ITEM(pair, 1))) {
        PyErr_Format(PyExc_TypeError,
                     "add(): 'stream'.__cuda_stream__() must return (version, handle), got %R", pair);
    } else if (PyLong_AsLong(PyTuple_GET_ITEM(pair, 0)) != 0) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError,
                         "add(): 'stream'.__cuda_stream__() has version %R; this reads version 0",
                         PyTuple_GET_ITEM(pair, 0));
        }
    } else {
        *stream = PyLong_AsVoidPtr(PyTuple_GET_ITEM(pair, 1));
        rc = PyErr_Occurred() ? -1 : 0;
    }
    Py_DECREF(pair); /* the pair was ours; the handle is a number, copied out */
    return rc;
}

/* `waiter` waits for what is queued on `signaller` so far; nothing when they are the same stream. */
static cudaError_t order(cudaStream_t waiter, cudaStream_t signaller) {
    if (waiter == signaller) return cudaSuccess;
    cudaEvent_t event = NULL;
    cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (err == cudaSuccess) err = cudaEventRecord(event, signaller);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(waiter, event, 0);
    if (event) cudaEventDestroy(event); /* safe while pending: destroyed once it has completed */
    return err;
}

static PyObject *add(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *slots[N_PARAMS];
    if (parse_args("add", names, 3, 3, N_PARAMS, args, nargs, kwnames, slots) < 0) return NULL;
    void *given = NULL;
    int has_stream = 0;
    if (read_stream_argument(slots[STREAM], &given, &has_stream) < 0) return NULL;
    vector a, b, out;
    if (read_add_operands(slots, "add", &a, &b, &out) < 0) return NULL;
    const cudaStream_t launch = (cudaStream_t)launch_stream(has_stream ? given : out.stream);
    const cudaStream_t producers[3] = {(cudaStream_t)launch_stream(a.stream),
                                       (cudaStream_t)launch_stream(b.stream),
                                       (cudaStream_t)launch_stream(out.stream)};
    cudaError_t err = cudaSuccess;
    for (int i = 0; i < 3 && err == cudaSuccess; i++) err = order(launch, producers[i]);
    const char *error = NULL;
    if (err == cudaSuccess) {
        err = (cudaError_t)lessons_launch_add_strided(out.is_double, out.data, a.data, b.data, out.n,
                                                      out.stride, a.stride, b.stride, launch, &error);
    }
    for (int i = 0; i < 3 && err == cudaSuccess; i++) err = order(producers[i], launch);
    if (err != cudaSuccess)
        return PyErr_Format(PyExc_RuntimeError, "add(): CUDA error: %s", cudaGetErrorString(err));
    return Py_NewRef(slots[OUT]);
}

static PyObject *stream_of(PyObject *module, PyObject *obj) {
    void *stream = NULL;
    int given = 0;
    if (read_stream_argument(obj, &stream, &given) < 0) return NULL;
    return given ? PyLong_FromVoidPtr(stream) : Py_NewRef(Py_None);
}

static PyMethodDef methods[] = {
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL | METH_KEYWORDS,
     "add(a, b, out, *, stream=None)\n--\n\nout = a + b on `stream` (else out's producer's), ordered after "
     "and "
     "before the producers' streams with events; returns out."},
    {"stream_of", stream_of, METH_O,
     "stream_of(stream, /)\n--\n\nThe handle add would launch on for this `stream=` (None: out's "
     "producer's)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "lesson5_streams",
                                    .m_doc = "Lesson 5: streams and events.", .m_methods = methods};

PyMODINIT_FUNC PyInit_lesson5_streams(void) {
    static const char *texts[N_PARAMS] = {"a", "b", "out", "stream"};
    for (int i = 0; i < N_PARAMS; i++) {
        if (!names[i] && !(names[i] = PyUnicode_InternFromString(texts[i]))) return NULL;
    }
    return PyModuleDef_Init(&module);
}
