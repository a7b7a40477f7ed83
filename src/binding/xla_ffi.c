/* xla_ffi.c - lab's XLA FFI face: reading XLA's call frames and answering XLA, so lab's kernels run
 * inside jax.jit (level 2, beside the Python bindings; xla_ffi_abi.h declares the ABI, xla_ffi_ops.c
 * holds the built-in ops' targets, and the registry here the user kernels lab.jax registers).
 *
 * XLA calls a handler with a call frame: the buffers of the arguments and results (row-major, no
 * strides), the attributes (numbers given at trace time), and an execution context that names the
 * CUDA stream XLA runs on. A handler reads the frame into the same lab_array structs and op
 * descriptions the Python bindings fill, and runs the same op driver - the stream given is XLA's, so
 * the launch is ordered with XLA's own work and nothing synchronizes. The driver reports a bad
 * argument in its failure record (dispatch/failure.h), which the handler hands XLA as an error carrying
 * the message - so the built-in ops run without the GIL: XLA's thread never waits for a Python thread
 * that holds it (a training loop preparing the next step), and pays nothing to take it. Only the users'
 * kernels take the GIL, as their compiled modules are Python objects. lab.jax checks shapes and dtypes
 * at trace time; the checks here are the driver's own, kept for whoever calls a target directly. */
#include "binding/xla_ffi.h"

#include <string.h>

#include "dispatch/dtype.h"

/* The module whose state (the dispatch state: streams, devices) handlers use: set when lab.jax asks
 * for the targets, held for the life of the process (XLA may call a registered target any time). */
static PyObject *ffi_module;

#define MAX_BUFFERS 64 /* arguments and results one call reads */

struct lab_ffi_call {
    lab_xla_ffi_call_frame *frame;
    const char *func;
    cudaStream_t stream;
    lab_array arrays[MAX_BUFFERS];
    int n_arrays;
};
typedef lab_ffi_call ffi_call;

/* Buffer i of a list (arguments or results) as a lab_array: row-major, on the device XLA chose. */
static lab_array *read_buffer(ffi_call *f, const lab_xla_ffi_list *list, int64_t i, const char *name) {
    if (i < 0 || i >= list->size || list->types[i] != 1) {
        lab_fail(LAB_FAILURE_TYPE, "%s: XLA gave no buffer for '%s'", f->func, name);
        return NULL;
    }
    if (f->n_arrays == MAX_BUFFERS) {
        lab_fail(LAB_FAILURE_VALUE, "%s: at most %d arguments and results in one call", f->func, MAX_BUFFERS);
        return NULL;
    }
    const lab_xla_ffi_buffer *b = list->items[i];
    if (b->struct_size < offsetof(lab_xla_ffi_buffer, dims) + sizeof b->dims) {
        lab_fail(LAB_FAILURE_TYPE, "%s: XLA's buffer struct is smaller than lab reads", f->func);
        return NULL;
    }
    static const struct {
        int xla;
        lab_dtype lab;
    } types[] = {{LAB_XLA_F16, LAB_FLOAT16}, {LAB_XLA_BF16, LAB_BFLOAT16}, {LAB_XLA_F32, LAB_FLOAT32},
                 {LAB_XLA_F64, LAB_FLOAT64}, {LAB_XLA_S8, LAB_INT8},       {LAB_XLA_S16, LAB_INT16},
                 {LAB_XLA_S32, LAB_INT32},   {LAB_XLA_S64, LAB_INT64},     {LAB_XLA_U8, LAB_UINT8}};
    int dtype = -1;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        if (types[k].xla == b->dtype) dtype = (int)types[k].lab;
    }
    if (dtype < 0 || b->rank < 0 || b->rank > LAB_MAX_DIMS) {
        lab_fail(LAB_FAILURE_TYPE,
                 "%s: argument '%s' has XLA element type %d and rank %lld; lab takes %s "
                 "and at most %d dimensions",
                 f->func, name, b->dtype, (long long)b->rank, lab_supported_dtypes_text(1), LAB_MAX_DIMS);
        return NULL;
    }
    lab_array *a = &f->arrays[f->n_arrays++];
    memset(a, 0, sizeof *a);
    a->data = b->data;
    a->dtype = (lab_dtype)dtype;
    a->ndim = (int)b->rank;
    a->numel = 1;
    for (int d = a->ndim - 1; d >= 0; d--) {
        if (b->dims[d] < 0) {
            lab_fail(LAB_FAILURE_VALUE, "%s: argument '%s' has a negative dimension", f->func, name);
            return NULL;
        }
        a->shape[d] = b->dims[d];
        a->strides[d] = a->numel;
        a->numel *= b->dims[d] > 0 ? b->dims[d] : 1;
    }
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] == 0) a->numel = 0;
    }
    a->device = -1; /* located from the pointer, as a CUDA array interface's is */
    a->source = LAB_SOURCE_CAI;
    return a;
}

lab_array *lab_ffi_buffer(lab_ffi_call *f, int results, int64_t i, const char *name) {
    return read_buffer(f, results ? &f->frame->rets : &f->frame->args, i, name);
}

const char *lab_ffi_name(const lab_ffi_call *f) { return f->func; }

int64_t lab_ffi_count(const lab_ffi_call *f, int results) {
    return results ? f->frame->rets.size : f->frame->args.size;
}

lab_state *lab_ffi_state(const lab_ffi_call *f) {
    (void)f;
    return lab_get_state(ffi_module);
}

/* The number attribute `name` as a scalar argument (an int32/int64 is_integer, exact in as_int);
 * 0 with *given = 0 where the call has no such attribute, -1 (TypeError) where it is no number. */
static int attr_number(lab_ffi_call *f, const char *name, lab_scalar_arg *number, int *given) {
    const lab_xla_ffi_attrs *attrs = &f->frame->attrs;
    *given = 0;
    for (int64_t i = 0; i < attrs->size; i++) {
        const lab_xla_ffi_bytes *key = attrs->names[i];
        if (key->len != strlen(name) || memcmp(key->ptr, name, key->len) != 0) continue;
        const lab_xla_ffi_scalar *s = attrs->attrs[i];
        const int scalar = attrs->types[i] == LAB_XLA_ATTR_SCALAR;
        const int integer = scalar && (s->dtype == LAB_XLA_S32 || s->dtype == LAB_XLA_S64);
        if (!integer && !(scalar && (s->dtype == LAB_XLA_F32 || s->dtype == LAB_XLA_F64))) {
            lab_fail(LAB_FAILURE_TYPE, "%s: attribute '%s' must be a number (float32/64, int32/64)", f->func,
                     name);
            return -1;
        }
        memset(number, 0, sizeof *number);
        number->name = name;
        number->type_name = integer ? "int" : "float";
        number->is_integer = number->fits_int64 = integer;
        if (integer) {
            number->as_int =
                s->dtype == LAB_XLA_S32 ? *(const int32_t *)s->value : *(const int64_t *)s->value;
            number->as_float = (double)number->as_int;
        } else {
            number->as_float = s->dtype == LAB_XLA_F32 ? *(const float *)s->value : *(const double *)s->value;
        }
        *given = 1;
        return 0;
    }
    return 0;
}

/* A number attribute by name, as a double; `fallback` where it was not given. */
int lab_ffi_attr(lab_ffi_call *f, const char *name, double fallback, double *value) {
    lab_scalar_arg number;
    int given;
    if (attr_number(f, name, &number, &given) < 0) return -1;
    *value = given ? number.as_float : fallback;
    return 0;
}

int lab_ffi_scalar(lab_ffi_call *f, const char *name, lab_scalar_arg *scalar) {
    int given;
    if (attr_number(f, name, scalar, &given) < 0) return -1;
    if (!given) scalar->name = NULL;
    return 0;
}

/* The op driver's call for this frame: XLA's stream is the launch stream. */
lab_op_call lab_ffi_op_call(ffi_call *f, void *description) {
    lab_op_call call = {.func = f->func, .description = description};
    call.stream.given = 1;
    call.stream.handle = f->stream;
    return call;
}

/* ---- users' kernels: what lab.jax.RawKernel and ElementwiseKernel register at trace time ---- */

static lab_ffi_kernel **registered;
static Py_ssize_t n_registered, registered_capacity;

Py_ssize_t lab_ffi_kernel_register(lab_ffi_kernel *kernel) {
    if (n_registered == registered_capacity) {
        const Py_ssize_t capacity = registered_capacity ? 2 * registered_capacity : 16;
        lab_ffi_kernel **grown = PyMem_Realloc(registered, sizeof *grown * (size_t)capacity);
        if (!grown) {
            kernel->release(kernel);
            PyErr_NoMemory();
            return -1;
        }
        registered = grown, registered_capacity = capacity;
    }
    registered[n_registered] = kernel;
    return n_registered++;
}

/* lab_kernel: (the kernel's array inputs) -> (its outputs); attribute kernel, the number
 * lab_ffi_kernel_register gave. */
static int user_kernel(ffi_call *f) {
    double number;
    if (lab_ffi_attr(f, "kernel", -1.0, &number) < 0) return -1;
    if (!(number >= 0 && number < (double)n_registered)) {
        /* a whole number in the message, as lab.jax gave it; anything else shows as -1 */
        lab_fail(LAB_FAILURE_VALUE, "%s: attribute 'kernel' (%lld) is no kernel lab.jax registered", f->func,
                 (long long)(number > -1e18 && number < 1e18 ? number : -1));
        return -1;
    }
    lab_ffi_kernel *kernel = registered[(Py_ssize_t)number];
    f->func = kernel->name;
    return kernel->run(kernel, f);
}

/* ---- the handler every target shares ---- */

/* Answers XLA's metadata query: the API version lab was written against, and the handler's traits
 * (LAB_FFI_TRACEABLE: XLA may record its launches into a command buffer). 1 when it was one. */
static int answered_metadata(lab_xla_ffi_call_frame *frame, unsigned flags) {
    for (lab_xla_ffi_extension *e = frame->extension_start; e; e = e->next) {
        if (e->type != LAB_XLA_FFI_EXTENSION_METADATA) continue;
        lab_xla_ffi_metadata *m = ((lab_xla_ffi_metadata_extension *)e)->metadata;
        m->api_version.major_version = LAB_XLA_FFI_API_MAJOR;
        m->api_version.minor_version = LAB_XLA_FFI_API_MINOR;
        m->traits = flags & LAB_FFI_TRACEABLE ? LAB_XLA_FFI_TRAIT_COMMAND_BUFFER_COMPATIBLE : 0;
        return 1;
    }
    return 0;
}

static lab_xla_ffi_error *xla_error(lab_xla_ffi_call_frame *frame, int errc, const char *message) {
    lab_xla_ffi_error_create_args args = {sizeof args, NULL, message, errc};
    return frame->api->error_create(&args);
}

/* Runs `op` on the call; the GIL is taken only where the op says it needs the interpreter. */
static int run_op(ffi_call *f, int (*op)(lab_ffi_call *), int needs_gil) {
    if (!ffi_module) {
        return lab_fail(LAB_FAILURE_RUNTIME, "lab: the lab module is not loaded (import lab.jax first)");
    }
    if (!needs_gil) return op(f);
    const PyGILState_STATE gil = PyGILState_Ensure();
    const int rc = op(f);
    PyGILState_Release(gil);
    return rc;
}

lab_xla_ffi_error *lab_ffi_handle(lab_xla_ffi_call_frame *frame, const char *func, int (*op)(lab_ffi_call *),
                                  unsigned flags) {
    if (answered_metadata(frame, flags)) return NULL;
    const lab_xla_ffi_api *api = frame->api;
    if (api->api_version.major_version != LAB_XLA_FFI_API_MAJOR ||
        api->struct_size < offsetof(lab_xla_ffi_api, stream_get) + sizeof api->stream_get ||
        frame->struct_size < offsetof(lab_xla_ffi_call_frame, attrs) + sizeof frame->attrs) {
        return xla_error(frame, 13,
                         "lab: XLA's FFI API is not the version lab was written against (major 0, "
                         "call frames and API tables at least as large as lab reads)");
    }
    if (frame->stage != LAB_XLA_STAGE_EXECUTE) return NULL; /* nothing to prepare */
    lab_xla_ffi_stream_get_args stream = {sizeof stream, NULL, frame->ctx, NULL};
    lab_xla_ffi_error *error = api->stream_get(&stream);
    if (error) return error;
    ffi_call f = {.frame = frame, .func = func, .stream = (cudaStream_t)stream.stream};
    if (run_op(&f, op, flags & LAB_FFI_NEEDS_GIL) == 0) return NULL;
    const lab_failure *failure = lab_last_failure();
    const int invalid = failure->kind == LAB_FAILURE_TYPE || failure->kind == LAB_FAILURE_VALUE ||
                        failure->kind == LAB_FAILURE_OVERFLOW;
    return xla_error(frame, invalid ? 3 : 13, failure->message); /* INVALID_ARGUMENT, INTERNAL */
}

lab_xla_ffi_error *lab_ffi_user_kernel_target(lab_xla_ffi_call_frame *frame) {
    return lab_ffi_handle(frame, "lab_kernel", user_kernel, LAB_FFI_NEEDS_GIL);
}

/* lab_kernel on any platform but CUDA: a user's CUDA C++ has no other implementation to fall back on,
 * so running it there is an error saying so (tracing and compiling for it are not). */
lab_xla_ffi_error *lab_ffi_user_kernel_elsewhere(lab_xla_ffi_call_frame *frame) {
    if (answered_metadata(frame, 0) || frame->stage != LAB_XLA_STAGE_EXECUTE) return NULL;
    return xla_error(frame, 12, /* UNIMPLEMENTED */
                     "lab.jax: RawKernel and ElementwiseKernel run CUDA C++ and only on CUDA devices; this "
                     "computation was placed on another platform");
}

void lab_ffi_bind_module(PyObject *module) {
    if (!ffi_module) ffi_module = Py_NewRef(module);
}
