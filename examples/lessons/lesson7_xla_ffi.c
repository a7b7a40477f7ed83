/* lesson7_xla_ffi.c - lesson 7: a C function that XLA calls from inside jax.jit.
 *
 * The six lessons before this one are called by Python: a PyMethodDef entry, arguments as Python
 * objects, arrays found through their protocols. Inside jax.jit there is no Python at run time: XLA
 * compiles the traced program and, where it meets an FFI call, calls a registered C function with a
 * *call frame* - the argument and result buffers (a pointer, an element type, the dimensions; always
 * row-major), the attributes given at trace time, and an execution context that holds the CUDA
 * stream XLA runs on. The handler reads the frame, launches on that stream, and returns NULL (done)
 * or an error object XLA turns into a Python exception. No GIL, no reference counts: this handler
 * touches no Python object at all.
 *
 * The layout of the frame is XLA's C ABI (xla/ffi/api/c_api.h in jaxlib's jax.ffi.include_dir());
 * this lesson uses the declarations lab keeps of it, src/binding/xla_ffi_abi.h. Registering is
 * Python's job: add_target() hands the handler out as a capsule, and
 * jax.ffi.register_ffi_target("lesson7_add", capsule, platform="CUDA") tells XLA its name.
 *
 * lab's handlers (src/binding/xla_ffi.c) do the same for every op, feeding lab's op driver. The
 * driver reports a bad argument or a CUDA failure in a plain C record (src/dispatch/failure.h), not
 * as a Python exception, so the built-in ops' handlers run without the GIL too; only the handler of
 * a user's runtime-compiled kernel takes it (`PyGILState_Ensure`), because that kernel's compiled
 * module is a Python object loaded at its first run. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#include "binding/xla_ffi_abi.h"

int lessons_launch_add_f32(float *out, const float *a, const float *b, long long n, void *stream,
                           const char **error);

/* An error object of XLA's with this message: error_create copies it. 3 is INVALID_ARGUMENT. */
static lab_xla_ffi_error *fail(lab_xla_ffi_call_frame *frame, int code, const char *message) {
    lab_xla_ffi_error_create_args args = {sizeof args, NULL, message, code};
    return frame->api->error_create(&args);
}

/* Buffer i of a list when it is a float32 vector, else NULL. */
static const lab_xla_ffi_buffer *f32_vector(const lab_xla_ffi_list *list, int64_t i) {
    if (i >= list->size || list->types[i] != 1) return NULL; /* 1: a buffer (not a token) */
    const lab_xla_ffi_buffer *b = list->items[i];
    return b->dtype == LAB_XLA_F32 && b->rank == 1 ? b : NULL;
}

/* out = a + b: (a, b) -> (out), three float32 vectors of one length. */
static lab_xla_ffi_error *add_handler(lab_xla_ffi_call_frame *frame) {
    /* XLA first calls each handler once with only a metadata extension, asking which version of the
     * ABI it was written for: answer and return. */
    for (lab_xla_ffi_extension *e = frame->extension_start; e; e = e->next) {
        if (e->type == LAB_XLA_FFI_EXTENSION_METADATA) {
            lab_xla_ffi_metadata *m = ((lab_xla_ffi_metadata_extension *)e)->metadata;
            m->api_version.major_version = LAB_XLA_FFI_API_MAJOR;
            m->api_version.minor_version = LAB_XLA_FFI_API_MINOR;
            m->traits = 0;
            return NULL;
        }
    }
    if (frame->api->api_version.major_version != LAB_XLA_FFI_API_MAJOR) {
        return fail(frame, 13, "lesson7: XLA's FFI has another major version than this handler reads");
    }
    if (frame->stage != LAB_XLA_STAGE_EXECUTE)
        return NULL; /* instantiate, prepare, initialize: nothing to do */
    const lab_xla_ffi_buffer *a = f32_vector(&frame->args, 0), *b = f32_vector(&frame->args, 1);
    const lab_xla_ffi_buffer *out = f32_vector(&frame->rets, 0);
    if (!a || !b || !out || frame->args.size != 2 || frame->rets.size != 1) {
        return fail(frame, 3, "lesson7_add: takes two float32 vectors and returns one");
    }
    if (a->dims[0] != out->dims[0] || b->dims[0] != out->dims[0]) {
        return fail(frame, 3, "lesson7_add: the vectors must have one length");
    }
    lab_xla_ffi_stream_get_args stream = {sizeof stream, NULL, frame->ctx, NULL};
    lab_xla_ffi_error *error = frame->api->stream_get(&stream); /* the stream XLA runs this program on */
    if (error) return error;
    const char *message = NULL;
    if (lessons_launch_add_f32(out->data, a->data, b->data, out->dims[0], stream.stream, &message) != 0) {
        return fail(frame, 13, message); /* a CUDA error, e.g. no GPU: XLA raises it in Python */
    }
    return NULL; /* queued on XLA's stream; XLA orders everything after it */
}

static PyObject *add_target(PyObject *module, PyObject *unused) {
    return PyCapsule_New((void *)add_handler, NULL, NULL); /* the capsule jax.ffi expects: no name */
}

static PyMethodDef methods[] = {
    {"add_target", add_target, METH_NOARGS, "The handler of lesson7_add, as a capsule for jax.ffi."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "lesson7_xla_ffi", NULL, 0, methods};

PyMODINIT_FUNC PyInit_lesson7_xla_ffi(void) { return PyModuleDef_Init(&module); }
