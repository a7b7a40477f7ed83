/* graph_type.c - lab.Graph: lab's calls on a stream recorded once as a CUDA graph, then replayed with
 * one launch (level 2 for CUDA's stream capture).
 *
 * capture_begin() puts the stream into capture mode: from then on every launch queued on it - lab's
 * kernels, cuBLASLt's products, copies, the stream-ordered allocations of lab.empty and of lab's
 * scratch - is recorded instead of run, until capture_end() turns the record into an executable
 * graph. replay() launches the whole graph: one host call however many kernels it holds.
 *
 * Three things make a capture replayable, and each is handled here or in the op driver:
 * - Memory: an array allocated during the capture is a node of the graph, at an address the graph
 *   keeps for its lifetime; the graph is instantiated with "auto free on launch", so each replay
 *   reallocates it at that same address and the array stays valid between replays.
 * - Random numbers: a captured draw reads (seed, offset) from device memory that replay() writes
 *   first from the generator, which it then advances, so each replay draws new numbers
 *   (dispatch/random_kind.c, dispatch_state.h's lab_random_capture).
 * - Ordering: a capture is ordered with the outside world at replay, on the replay's stream; the op
 *   driver orders no stream across the capture's boundary (dispatch/stream.c).
 * What cannot be captured - a host sync, a cudaMalloc - lab's launch path never does: cuBLASLt's
 * workspace for the stream is made before the capture begins. */
#include <string.h>

#include "binding/args.h"
#include "binding/array_reader.h"
#include "binding/errors.h"
#include "binding/runtime_types.h"
#include "dispatch/capture.h"
#include "dispatch/cublaslt.h"
#include "dispatch/device.h"
#include "dispatch/stream.h"
#include "kernels/launch.h"

typedef struct {
    PyObject_HEAD cudaGraph_t graph; /* the recorded graph, NULL before a capture ends */
    cudaGraphExec_t exec;            /* its executable form, which replay() launches */
    int device;                      /* the device it was captured on; -1 before the first capture */
    cudaStream_t stream;             /* the stream it was captured on: replay()'s default */
    PyObject *stream_owner;          /* that stream's object, held so the handle stays valid */
    unsigned long long capture_id;   /* CUDA's id of the capture in progress; 0 when none */
    uint64_t *replay_state;          /* (seed, offset) on the device, for captured random draws */
    uint64_t random_groups;          /* Philox groups one replay draws: the generator's advance */
} lab_graph_object;

static lab_state *state_of(PyObject *self) { return (lab_state *)PyType_GetModuleState(Py_TYPE(self)); }

static PyObject *graph_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (!PyArg_ParseTuple(args, ":Graph") || (kwargs && PyDict_GET_SIZE(kwargs) > 0)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Graph() takes no arguments");
        return NULL;
    }
    lab_graph_object *self = (lab_graph_object *)type->tp_alloc(type, 0);
    if (self) self->device = -1;
    return (PyObject *)self;
}

/* The capture in progress, if any, stops being the device's lab capture: the generator goes back to
 * where the capture began (nothing was drawn yet: the draws happen at replay) and the graph keeps
 * how far one replay moves it. */
static void end_random_capture(lab_state *state, lab_graph_object *self) {
    lab_random_capture *capture = &state->dispatch.random_captures[self->device];
    if (self->capture_id == 0 || capture->capture_id != self->capture_id) return;
    lab_random_generator *generator = &state->dispatch.generators[self->device];
    self->random_groups = generator->offset - capture->start_offset;
    generator->offset = capture->start_offset;
    *capture = (lab_random_capture){0, NULL, 0};
}

/* Drops the executable graph and the recorded one. */
static void destroy_graph(lab_graph_object *self) {
    if (self->exec) cudaGraphExecDestroy(self->exec);
    if (self->graph) cudaGraphDestroy(self->graph);
    self->exec = NULL;
    self->graph = NULL;
    self->random_groups = 0;
}

/* Ends a capture whose record is not wanted (reset() during a capture, a failed capture_end, the
 * graph's deallocation): the stream leaves capture mode, whatever it recorded is dropped. */
static void abandon_capture(lab_state *state, lab_graph_object *self) {
    if (self->capture_id == 0) return;
    end_random_capture(state, self);
    cudaGraph_t recorded = NULL;
    if (cudaStreamEndCapture(self->stream, &recorded) == cudaSuccess && recorded) cudaGraphDestroy(recorded);
    cudaGetLastError(); /* an invalidated capture's error belongs to the capture just dropped */
    self->capture_id = 0;
}

/* 0 when `stream` is not being captured; else -1 with RuntimeError ("<func>(): the stream <why>"),
 * or lab.CudaError where CUDA could not say. */
static int refuse_a_capturing_stream(lab_state *state, cudaStream_t stream, const char *func,
                                     const char *why) {
    unsigned long long capture = 0;
    cudaError_t err = lab_stream_capture_id(stream, &capture);
    if (err != cudaSuccess) {
        lab_raise_cuda_error(&state->dispatch, err, func, "cudaStreamGetCaptureInfo");
        return -1;
    }
    if (capture != 0) {
        PyErr_Format(PyExc_RuntimeError, "%s(): the stream %s", func, why);
        return -1;
    }
    return 0;
}

/* capture_begin(stream=None, *, mode='thread_local') */
static PyObject *graph_capture_begin(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames) {
    static const lab_signature signature = {
        0, 1, 2, {LAB_PARAM(stream, STREAM | LAB_OR_NONE), LAB_PARAM(mode, CHOICE | LAB_OR_NONE)}};
    static const char *const mode_names[] = {"global", "thread_local", "relaxed"};
    static const enum cudaStreamCaptureMode modes[] = {
        cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed};
    const char *func = "Graph.capture_begin";
    lab_graph_object *self = (lab_graph_object *)op;
    lab_state *state = state_of(op);
    PyObject *slots[2] = {NULL, NULL};
    if (lab_parse_args(state, func, &signature, args, nargs, kwnames, slots) < 0) return NULL;
    int mode = 1;
    if (slots[1]) {
        const char *name = PyUnicode_Check(slots[1]) ? PyUnicode_AsUTF8(slots[1]) : NULL;
        for (mode = 0; name && mode < 3 && strcmp(name, mode_names[mode]) != 0; mode++) {}
        if (!name || mode == 3) {
            PyErr_Clear();
            return PyErr_Format(PyExc_ValueError,
                                "%s(): argument 'mode' must be 'global', 'thread_local' or 'relaxed', got %R",
                                func, slots[1]);
        }
    }
    /* the stream before the graph's state: reading it may run Python (__cuda_stream__), which may use
     * this graph */
    lab_stream_arg stream;
    if (lab_parse_stream_arg(state, slots[0], func, &stream) < 0) return NULL;
    if (self->capture_id != 0) {
        return PyErr_Format(PyExc_RuntimeError, "%s(): this graph is capturing already", func);
    }
    if (self->exec) {
        return PyErr_Format(PyExc_RuntimeError, "%s(): this graph holds a capture already; reset() it first",
                            func);
    }
    if (!stream.given && !lab_thread_current_stream(&stream.handle, &stream.owner)) {
        return PyErr_Format(PyExc_ValueError,
                            "%s(): needs a stream to capture on: pass stream=, or call it inside `with "
                            "lab.stream(s):` (lab.graph(g) makes a stream when given none)",
                            func);
    }
    if (stream.handle == 0 || stream.handle == cudaStreamLegacy) {
        return PyErr_Format(PyExc_ValueError,
                            "%s(): argument 'stream' is the legacy default stream, which CUDA cannot "
                            "capture; capture on a lab.Stream (or any other stream)",
                            func);
    }
    if (refuse_a_capturing_stream(state, stream.handle, func,
                                  "is being captured already (by another framework's graph, or another "
                                  "lab.Graph): lab's calls on it are recorded into that capture; run them "
                                  "without lab.graph") < 0) {
        return NULL;
    }
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return lab_raise_cuda_error(&state->dispatch, err, func, "cudaGetDevice");
    if (device >= LAB_MAX_DEVICES) {
        return PyErr_Format(PyExc_ValueError, "%s(): device %d is beyond the %d devices lab keeps state for",
                            func, device, LAB_MAX_DEVICES);
    }
    if (state->dispatch.random_captures[device].capture_id != 0) {
        return PyErr_Format(PyExc_RuntimeError,
                            "%s(): another lab.Graph is capturing on device %d; one capture a device at a "
                            "time",
                            func, device);
    }
    /* what a capture may not do, done before it begins */
    if (self->replay_state && self->device != device) {
        cudaFree(self->replay_state);
        self->replay_state = NULL;
    }
    if (!self->replay_state) {
        err = cudaMalloc((void **)&self->replay_state, 2 * sizeof(uint64_t));
        if (err != cudaSuccess) {
            self->replay_state = NULL;
            return lab_raise_cuda_error(&state->dispatch, err, func, "cudaMalloc of the replay state");
        }
    }
    if (lab_cublaslt.create) { /* products captured on the stream use the workspace they use outside */
        void *workspace;
        size_t bytes;
        err = lab_cublaslt_workspace(device, stream.handle, &workspace, &bytes);
        if (err != cudaSuccess) {
            return lab_raise_cuda_error(&state->dispatch, err, func, "cuBLASLt's workspace");
        }
    }
    err = cudaStreamBeginCapture(stream.handle, modes[mode]);
    if (err == cudaSuccess) err = lab_stream_capture_id(stream.handle, &self->capture_id);
    if (err != cudaSuccess) {
        self->stream = stream.handle;
        self->device = device;
        abandon_capture(state, self);
        return lab_raise_cuda_error(&state->dispatch, err, func, "cudaStreamBeginCapture");
    }
    self->device = device;
    self->stream = stream.handle;
    Py_XINCREF(stream.owner);
    Py_XSETREF(self->stream_owner, stream.owner);
    state->dispatch.random_captures[device] =
        (lab_random_capture){self->capture_id, self->replay_state, state->dispatch.generators[device].offset};
    Py_RETURN_NONE;
}

static PyObject *graph_capture_end(PyObject *op, PyObject *unused) {
    const char *func = "Graph.capture_end";
    lab_graph_object *self = (lab_graph_object *)op;
    lab_state *state = state_of(op);
    if (self->capture_id == 0) {
        return PyErr_Format(PyExc_RuntimeError,
                            "%s(): this graph is not capturing; call capture_begin() first", func);
    }
    end_random_capture(state, self);
    self->capture_id = 0;
    cudaGraph_t recorded = NULL;
    cudaError_t err = cudaStreamEndCapture(self->stream, &recorded);
    if (err != cudaSuccess) {
        if (recorded) cudaGraphDestroy(recorded);
        self->random_groups = 0;
        return lab_raise_cuda_error(&state->dispatch, err, func,
                                    "cudaStreamEndCapture (something in the capture was not capturable, "
                                    "such as a host sync)");
    }
    self->graph = recorded;
    err = cudaGraphInstantiate(&self->exec, recorded, cudaGraphInstantiateFlagAutoFreeOnLaunch);
    if (err == cudaSuccess) err = cudaGraphUpload(self->exec, self->stream); /* the first replay's setup */
    if (err != cudaSuccess) {
        self->exec = NULL;
        destroy_graph(self);
        return lab_raise_cuda_error(&state->dispatch, err, func, "cudaGraphInstantiate");
    }
    Py_RETURN_NONE;
}

typedef struct {
    lab_graph_object *graph;
    lab_dispatch_state *dispatch;
    cudaStream_t stream; /* the replay's */
    int by_default;      /* no stream given or current: the replay stands in for a legacy-stream call */
    const char *step;
} replay_args;

/* The arrays the capture used carry its stream as their last use, so whoever orders itself after
 * them waits for that stream: a replay elsewhere is made visible there. And a replay given no stream
 * behaves as a call on the legacy default stream - after the work queued there, before what follows -
 * which is what code that never names a stream expects. */
static cudaError_t replay_on_device(void *context) {
    replay_args *r = context;
    lab_graph_object *self = r->graph;
    lab_random_generator *generator = &r->dispatch->generators[self->device];
    cudaError_t err = cudaSuccess;
    if (r->by_default) {
        r->step = "ordering the replay after the legacy default stream";
        err = lab_stream_wait_stream(r->dispatch, r->stream, 0, self->device);
    }
    if (err == cudaSuccess && self->random_groups > 0) {
        r->step = "writing the generator's state for the replay";
        err =
            lab_launch_random_replay_state(self->replay_state, generator->seed, generator->offset, r->stream);
    }
    if (err != cudaSuccess) return err;
    r->step = "cudaGraphLaunch";
    err = cudaGraphLaunch(self->exec, r->stream);
    if (err != cudaSuccess) return err;
    generator->offset += self->random_groups;
    if (r->stream != self->stream) {
        r->step = "ordering the capture's stream after the replay";
        err = lab_stream_wait_stream(r->dispatch, self->stream, r->stream, self->device);
    }
    if (err == cudaSuccess && r->by_default) {
        r->step = "ordering the legacy default stream after the replay";
        err = lab_stream_wait_stream(r->dispatch, 0, r->stream, self->device);
    }
    return err;
}

/* replay(stream=None): on `stream`, else this thread's lab.stream(), else the capture's stream. */
static PyObject *graph_replay(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    static const lab_signature signature = {0, 1, 1, {LAB_PARAM(stream, STREAM | LAB_OR_NONE)}};
    const char *func = "Graph.replay";
    lab_graph_object *self = (lab_graph_object *)op;
    lab_state *state = state_of(op);
    PyObject *stream_obj = NULL;
    lab_stream_arg stream;
    if (lab_parse_args(state, func, &signature, args, nargs, kwnames, &stream_obj) < 0 ||
        lab_parse_stream_arg(state, stream_obj, func, &stream) < 0) {
        return NULL;
    }
    if (!self->exec) {
        return PyErr_Format(PyExc_RuntimeError, "%s(): nothing to replay: %s", func,
                            self->capture_id ? "the capture has not ended (capture_end())"
                                             : "capture something first (with lab.graph(g): ...)");
    }
    const int by_default = !stream.given && !lab_thread_current_stream(&stream.handle, &stream.owner);
    if (by_default) stream.handle = self->stream;
    if (refuse_a_capturing_stream(state, stream.handle, func,
                                  "is being captured; a lab.Graph is not replayed inside another capture "
                                  "(run the captured calls themselves there, and they are recorded)") < 0) {
        return NULL;
    }
    replay_args replay = {self, &state->dispatch, stream.handle, by_default, NULL};
    cudaError_t err = lab_with_device(self->device, replay_on_device, &replay);
    if (err != cudaSuccess) return lab_raise_cuda_error(&state->dispatch, err, func, replay.step);
    Py_RETURN_NONE;
}

/* reset(): drops the captured graph (and ends a capture in progress), so the object can capture again. */
static PyObject *graph_reset(PyObject *op, PyObject *unused) {
    lab_graph_object *self = (lab_graph_object *)op;
    abandon_capture(state_of(op), self);
    destroy_graph(self);
    Py_RETURN_NONE;
}

/* debug_dot(path): the graph's nodes and edges written as Graphviz DOT (CUDA's own description). */
static PyObject *graph_debug_dot(PyObject *op, PyObject *path_obj) {
    lab_graph_object *self = (lab_graph_object *)op;
    PyObject *path = NULL;
    if (!PyUnicode_FSConverter(path_obj, &path)) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "Graph.debug_dot(): argument 'path' must be a str, bytes or os.PathLike, "
                         "got %.100s",
                         Py_TYPE(path_obj)->tp_name);
        }
        return NULL;
    }
    if (!self->graph) {
        Py_DECREF(path);
        return PyErr_Format(PyExc_RuntimeError, "Graph.debug_dot(): nothing captured yet");
    }
    cudaError_t err = cudaGraphDebugDotPrint(self->graph, PyBytes_AS_STRING(path), 0);
    Py_DECREF(path);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&state_of(op)->dispatch, err, "Graph.debug_dot",
                                    "cudaGraphDebugDotPrint");
    }
    Py_RETURN_NONE;
}

/* is_capturing(stream=None): whether `stream` (else this thread's lab.stream(), else the legacy
 * default stream) is being captured into a graph, by lab or anyone else. */
static const lab_signature IS_CAPTURING = {0, 1, 1, {LAB_PARAM(stream, STREAM | LAB_OR_NONE)}};
static PyObject *py_is_capturing(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    PyObject *stream_obj = NULL;
    lab_stream_arg stream;
    if (lab_parse_args(state, "is_capturing", &IS_CAPTURING, args, nargs, kwnames, &stream_obj) < 0 ||
        lab_parse_stream_arg(state, stream_obj, "is_capturing", &stream) < 0) {
        return NULL;
    }
    if (!stream.given && !lab_thread_current_stream(&stream.handle, &stream.owner)) stream.handle = 0;
    unsigned long long capture = 0;
    cudaError_t err = lab_stream_capture_id(stream.handle, &capture);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&state->dispatch, err, "is_capturing", "cudaStreamGetCaptureInfo");
    }
    return PyBool_FromLong(capture != 0);
}

/* _launch_stream(*arrays): the stream lab would launch an op on for these arrays now (the policy of
 * dispatch/stream.h: lab.stream(), else what the producers declare - torch's current stream, a CAI
 * 'stream'), as an int. lab.make_graphed asks it to tell whether its caller is inside a capture. */
static PyObject *py_launch_stream(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    lab_state *state = lab_get_state(module);
    lab_array arrays[LAB_MAX_GROUPS];
    const lab_array *decide[LAB_MAX_GROUPS];
    if (nargs > LAB_MAX_GROUPS) {
        return PyErr_Format(PyExc_TypeError, "_launch_stream(): at most %d arrays, got %zd", LAB_MAX_GROUPS,
                            nargs);
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (lab_read_array(state, args[i], "_launch_stream", "arrays", &arrays[i]) < 0) return NULL;
        decide[i] = &arrays[i];
    }
    const lab_stream_arg none = {0, 0, NULL};
    lab_stream_plan plan;
    if (lab_plan_streams(&state->dispatch, decide, (int)nargs, &none, &plan) < 0) return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)plan.launch);
}

PyMethodDef lab_graph_functions[] = {
    {"_launch_stream", (PyCFunction)(void (*)(void))py_launch_stream, METH_FASTCALL,
     "_launch_stream(*arrays)\n--\n\nPrivate: the stream handle lab would launch on for these arrays now."},
    {"is_capturing", (PyCFunction)(void (*)(void))py_is_capturing, METH_FASTCALL | METH_KEYWORDS,
     "is_capturing(stream=None)\n--\n\nTrue while `stream` (else this thread's lab.stream(), else the legacy "
     "default stream) is being captured into a CUDA graph - by lab.graph, torch.cuda.graph or anyone."},
    {NULL, NULL, 0, NULL},
};

const lab_signed_function lab_graph_signatures[] = {{"is_capturing", &IS_CAPTURING}, {NULL, NULL}};

static void graph_dealloc(PyObject *op) {
    lab_graph_object *self = (lab_graph_object *)op;
    PyTypeObject *type = Py_TYPE(op);
    lab_state *state = state_of(op);
    if (state) abandon_capture(state, self);
    destroy_graph(self);
    if (self->replay_state) cudaFree(self->replay_state); /* may fail at exit: harmless */
    Py_XDECREF(self->stream_owner);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyObject *graph_get_device(PyObject *op, void *closure) {
    return PyLong_FromLong(((lab_graph_object *)op)->device);
}
static PyObject *graph_get_capturing(PyObject *op, void *closure) {
    return PyBool_FromLong(((lab_graph_object *)op)->capture_id != 0);
}
static PyObject *graph_get_captured(PyObject *op, void *closure) {
    return PyBool_FromLong(((lab_graph_object *)op)->exec != NULL);
}
static PyObject *graph_get_stream(PyObject *op, void *closure) {
    lab_graph_object *self = (lab_graph_object *)op;
    if (self->stream_owner) return Py_NewRef(self->stream_owner);
    if (self->device < 0) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)self->stream);
}
static PyObject *graph_get_node_count(PyObject *op, void *closure) {
    lab_graph_object *self = (lab_graph_object *)op;
    size_t count = 0;
    if (self->graph) {
        cudaError_t err = cudaGraphGetNodes(self->graph, NULL, &count);
        if (err != cudaSuccess) {
            return lab_raise_cuda_error(&state_of(op)->dispatch, err, "Graph.node_count",
                                        "cudaGraphGetNodes");
        }
    }
    return PyLong_FromSize_t(count);
}
static PyObject *graph_get_random_groups(PyObject *op, void *closure) {
    return PyLong_FromUnsignedLongLong(((lab_graph_object *)op)->random_groups);
}

static PyObject *graph_repr(PyObject *op) {
    lab_graph_object *self = (lab_graph_object *)op;
    const char *status = self->capture_id ? "capturing" : self->exec ? "captured" : "empty";
    return PyUnicode_FromFormat("<lab.Graph %s device=%d>", status, self->device);
}

static PyMethodDef graph_methods[] = {
    {"capture_begin", (PyCFunction)(void (*)(void))graph_capture_begin, METH_FASTCALL | METH_KEYWORDS,
     "capture_begin($self, /, stream=None, *, mode='thread_local')\n--\n\nStart recording the launches "
     "queued "
     "on `stream` (else this thread's lab.stream()) instead of running them. `mode` is CUDA's capture "
     "mode: what other threads may do meanwhile ('thread_local': anything; 'global': no unsafe call "
     "such as cudaMalloc in any thread; 'relaxed': no check). Prefer `with lab.graph(g):`."},
    {"capture_end", graph_capture_end, METH_NOARGS,
     "capture_end($self, /)\n--\n\nStop recording and make the record replayable (instantiated and "
     "uploaded to the device)."},
    {"replay", (PyCFunction)(void (*)(void))graph_replay, METH_FASTCALL | METH_KEYWORDS,
     "replay($self, /, stream=None)\n--\n\nLaunch the captured work once, on `stream` (else this thread's "
     "lab.stream()); given neither, on the capture's stream, ordered after the work queued on the "
     "legacy default stream and before the work queued there next, as a call on that stream would be. "
     "Captured random draws take new numbers from the device's generator each replay."},
    {"reset", graph_reset, METH_NOARGS,
     "reset($self, /)\n--\n\nDrop the captured graph (ending a capture in progress) so the object can "
     "capture again. Arrays allocated during the capture stay valid until freed."},
    {"debug_dot", graph_debug_dot, METH_O,
     "debug_dot($self, path, /)\n--\n\nWrite the captured graph's nodes and edges to `path` as Graphviz "
     "DOT."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef graph_getset[] = {
    {"device", graph_get_device, NULL, "The device the graph was captured on (-1 before a capture).", NULL},
    {"capturing", graph_get_capturing, NULL, "True between capture_begin() and capture_end().", NULL},
    {"captured", graph_get_captured, NULL, "True when there is a capture to replay.", NULL},
    {"stream", graph_get_stream, NULL, "The stream it was captured on (replay()'s default), or None.", NULL},
    {"node_count", graph_get_node_count, NULL, "The number of nodes (kernels, copies, ...) captured.", NULL},
    {"random_groups", graph_get_random_groups, NULL,
     "How far one replay moves the generator's offset (Philox groups its random draws take).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot graph_slots[] = {
    {Py_tp_new, graph_new},
    {Py_tp_dealloc, graph_dealloc},
    {Py_tp_repr, graph_repr},
    {Py_tp_methods, graph_methods},
    {Py_tp_getset, graph_getset},
    {Py_tp_doc,
     "Graph()\n--\n\nA CUDA graph of lab's calls: record them once (`with lab.graph(g): ...`), then "
     "g.replay() runs them all with one launch. Works on any producer's arrays; arrays made during the "
     "capture belong to the graph and hold each replay's results."},
    {0, NULL},
};

PyType_Spec lab_graph_spec = {
    .name = "lab.Graph",
    .basicsize = sizeof(lab_graph_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = graph_slots,
};
