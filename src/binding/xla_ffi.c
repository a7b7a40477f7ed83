/* xla_ffi.c - lab's ops as XLA FFI handlers: the face lab.jax registers with jax.ffi, so lab's kernels
 * run inside jax.jit (level 2, beside the Python bindings; xla_ffi_abi.h declares the ABI).
 *
 * XLA calls a handler with a call frame: the buffers of the arguments and results (row-major, no
 * strides), the attributes (numbers given at trace time), and an execution context that names the
 * CUDA stream XLA runs on. A handler reads the frame into the same lab_array structs and op
 * descriptions the Python bindings fill, and runs the same op driver - the stream given is XLA's, so
 * the launch is ordered with XLA's own work and nothing synchronizes. The driver reports a bad
 * argument as a Python exception, so a handler holds the GIL while it runs (XLA's thread has released
 * it) and turns an exception into an XLA error carrying its message. lab.jax checks shapes and dtypes
 * at trace time; the checks here are the driver's own, kept for whoever calls a target directly. */
#include "binding/xla_ffi.h"

#include <string.h>

#include "binding/module_state.h"
#include "binding/xla_ffi_abi.h"
#include "dispatch/dtype.h"
#include "dispatch/elementwise_kind.h"
#include "dispatch/rope_kind.h"
#include "dispatch/rowwise_kind.h"

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
        PyErr_Format(PyExc_TypeError, "%s: XLA gave no buffer for '%s'", f->func, name);
        return NULL;
    }
    if (f->n_arrays == MAX_BUFFERS) {
        PyErr_Format(PyExc_ValueError, "%s: at most %d arguments and results in one call", f->func,
                     MAX_BUFFERS);
        return NULL;
    }
    const lab_xla_ffi_buffer *b = list->items[i];
    if (b->struct_size < offsetof(lab_xla_ffi_buffer, dims) + sizeof b->dims) {
        PyErr_Format(PyExc_TypeError, "%s: XLA's buffer struct is smaller than lab reads", f->func);
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
        PyErr_Format(PyExc_TypeError,
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
            PyErr_Format(PyExc_ValueError, "%s: argument '%s' has a negative dimension", f->func, name);
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

int64_t lab_ffi_count(const lab_ffi_call *f, int results) {
    return results ? f->frame->rets.size : f->frame->args.size;
}

lab_state *lab_ffi_state(const lab_ffi_call *f) {
    (void)f;
    return lab_get_state(ffi_module);
}

/* A number attribute by name, as a double; `fallback` where it was not given. */
static int read_attr(ffi_call *f, const char *name, double fallback, double *value) {
    const lab_xla_ffi_attrs *attrs = &f->frame->attrs;
    *value = fallback;
    for (int64_t i = 0; i < attrs->size; i++) {
        const lab_xla_ffi_bytes *key = attrs->names[i];
        if (key->len != strlen(name) || memcmp(key->ptr, name, key->len) != 0) continue;
        const lab_xla_ffi_scalar *s = attrs->attrs[i];
        if (attrs->types[i] == LAB_XLA_ATTR_SCALAR) {
            switch (s->dtype) {
            case LAB_XLA_F32: *value = *(const float *)s->value; return 0;
            case LAB_XLA_F64: *value = *(const double *)s->value; return 0;
            case LAB_XLA_S32: *value = *(const int32_t *)s->value; return 0;
            case LAB_XLA_S64: *value = (double)*(const int64_t *)s->value; return 0;
            default: break;
            }
        }
        PyErr_Format(PyExc_TypeError, "%s: attribute '%s' must be a number (float32/64, int32/64)", f->func,
                     name);
        return -1;
    }
    return 0;
}

/* The op driver's call for this frame: XLA's stream is the launch stream. */
lab_op_call lab_ffi_op_call(ffi_call *f, void *description) {
    lab_op_call call = {.func = f->func, .description = description};
    call.stream.given = 1;
    call.stream.handle = f->stream;
    return call;
}

/* Runs a row-wise description (its arrays and names filled) through the op driver. */
static int run_rowwise(ffi_call *f, lab_rowwise_call *d) {
    d->axis = d->rows[LAB_ROW_X]->ndim - 1;
    lab_op_call call = lab_ffi_op_call(f, d);
    lab_rowwise_add_operands(&call, d);
    return lab_run_op(&lab_get_state(ffi_module)->dispatch, &lab_rowwise_kind, &call);
}

/* ---- the ops ---- */

/* lab_rms_norm: (x[, weight]) -> (out, rstd); attribute eps (< 0: the dtype's machine epsilon). */
static int rms_norm(ffi_call *f) {
    const lab_xla_ffi_list *args = &f->frame->args, *rets = &f->frame->rets;
    lab_rowwise_call d = {.op = LAB_ROW_RMS_NORM};
    if (read_attr(f, "eps", -1.0, &d.eps) < 0) return -1;
    if (!(d.rows[LAB_ROW_X] = read_buffer(f, args, 0, "x"))) return -1;
    if (args->size > 1 && !(d.cols[LAB_COL_WEIGHT] = read_buffer(f, args, 1, "weight"))) return -1;
    if (!(d.rows[LAB_ROW_OUT] = read_buffer(f, rets, 0, "out")) ||
        !(d.rows[LAB_ROW_RSTD] = read_buffer(f, rets, 1, "rstd"))) {
        return -1;
    }
    d.row_names[LAB_ROW_X] = "x", d.row_names[LAB_ROW_OUT] = "out", d.row_names[LAB_ROW_RSTD] = "rstd";
    d.col_names[LAB_COL_WEIGHT] = "weight";
    return run_rowwise(f, &d);
}

/* lab_rms_norm_backward: (grad_out, x, rstd[, weight]) -> (grad_x[, grad_weight]). */
static int rms_norm_backward(ffi_call *f) {
    const lab_xla_ffi_list *args = &f->frame->args, *rets = &f->frame->rets;
    lab_rowwise_call d = {.op = LAB_ROW_RMS_NORM_BACKWARD};
    if (!(d.rows[LAB_ROW_GRAD] = read_buffer(f, args, 0, "grad_out")) ||
        !(d.rows[LAB_ROW_X] = read_buffer(f, args, 1, "x")) ||
        !(d.rows[LAB_ROW_RSTD] = read_buffer(f, args, 2, "rstd")) ||
        (args->size > 3 && !(d.cols[LAB_COL_WEIGHT] = read_buffer(f, args, 3, "weight"))) ||
        !(d.rows[LAB_ROW_OUT] = read_buffer(f, rets, 0, "grad_x")) ||
        (rets->size > 1 && !(d.cols[LAB_COL_GRAD_WEIGHT] = read_buffer(f, rets, 1, "grad_weight")))) {
        return -1;
    }
    d.row_names[LAB_ROW_GRAD] = "grad_out", d.row_names[LAB_ROW_X] = "x", d.row_names[LAB_ROW_RSTD] = "rstd";
    d.row_names[LAB_ROW_OUT] = "grad_x", d.col_names[LAB_COL_WEIGHT] = "weight";
    d.col_names[LAB_COL_GRAD_WEIGHT] = "grad_weight";
    return run_rowwise(f, &d);
}

/* lab_layer_norm: (x[, weight[, bias]]) -> (out, mean, rstd); attribute eps. */
static int layer_norm(ffi_call *f) {
    const lab_xla_ffi_list *args = &f->frame->args, *rets = &f->frame->rets;
    lab_rowwise_call d = {.op = LAB_ROW_LAYER_NORM};
    if (read_attr(f, "eps", 1e-5, &d.eps) < 0) return -1;
    if (!(d.rows[LAB_ROW_X] = read_buffer(f, args, 0, "x")) ||
        (args->size > 1 && !(d.cols[LAB_COL_WEIGHT] = read_buffer(f, args, 1, "weight"))) ||
        (args->size > 2 && !(d.cols[LAB_COL_BIAS] = read_buffer(f, args, 2, "bias"))) ||
        !(d.rows[LAB_ROW_OUT] = read_buffer(f, rets, 0, "out")) ||
        !(d.rows[LAB_ROW_MEAN] = read_buffer(f, rets, 1, "mean")) ||
        !(d.rows[LAB_ROW_RSTD] = read_buffer(f, rets, 2, "rstd"))) {
        return -1;
    }
    d.row_names[LAB_ROW_X] = "x", d.row_names[LAB_ROW_OUT] = "out";
    d.row_names[LAB_ROW_MEAN] = "mean", d.row_names[LAB_ROW_RSTD] = "rstd";
    d.col_names[LAB_COL_WEIGHT] = "weight", d.col_names[LAB_COL_BIAS] = "bias";
    return run_rowwise(f, &d);
}

/* lab_layer_norm_backward: (grad_out, x, mean, rstd[, weight]) -> (grad_x[, grad_weight, grad_bias]). */
static int layer_norm_backward(ffi_call *f) {
    const lab_xla_ffi_list *args = &f->frame->args, *rets = &f->frame->rets;
    lab_rowwise_call d = {.op = LAB_ROW_LAYER_NORM_BACKWARD};
    if (!(d.rows[LAB_ROW_GRAD] = read_buffer(f, args, 0, "grad_out")) ||
        !(d.rows[LAB_ROW_X] = read_buffer(f, args, 1, "x")) ||
        !(d.rows[LAB_ROW_MEAN] = read_buffer(f, args, 2, "mean")) ||
        !(d.rows[LAB_ROW_RSTD] = read_buffer(f, args, 3, "rstd")) ||
        (args->size > 4 && !(d.cols[LAB_COL_WEIGHT] = read_buffer(f, args, 4, "weight"))) ||
        !(d.rows[LAB_ROW_OUT] = read_buffer(f, rets, 0, "grad_x")) ||
        (rets->size > 1 && !(d.cols[LAB_COL_GRAD_WEIGHT] = read_buffer(f, rets, 1, "grad_weight"))) ||
        (rets->size > 2 && !(d.cols[LAB_COL_GRAD_BIAS] = read_buffer(f, rets, 2, "grad_bias")))) {
        return -1;
    }
    d.row_names[LAB_ROW_GRAD] = "grad_out", d.row_names[LAB_ROW_X] = "x", d.row_names[LAB_ROW_MEAN] = "mean";
    d.row_names[LAB_ROW_RSTD] = "rstd", d.row_names[LAB_ROW_OUT] = "grad_x",
    d.col_names[LAB_COL_WEIGHT] = "weight";
    d.col_names[LAB_COL_GRAD_WEIGHT] = "grad_weight", d.col_names[LAB_COL_GRAD_BIAS] = "grad_bias";
    return run_rowwise(f, &d);
}

/* lab_softmax: (x) -> (out); attribute log (1: log_softmax). Over the last dimension. */
static int softmax(ffi_call *f) {
    double log;
    if (read_attr(f, "log", 0.0, &log) < 0) return -1;
    lab_rowwise_call d = {.op = log != 0.0 ? LAB_ROW_LOG_SOFTMAX : LAB_ROW_SOFTMAX};
    if (!(d.rows[LAB_ROW_X] = read_buffer(f, &f->frame->args, 0, "x")) ||
        !(d.rows[LAB_ROW_OUT] = read_buffer(f, &f->frame->rets, 0, "out"))) {
        return -1;
    }
    d.row_names[LAB_ROW_X] = "x", d.row_names[LAB_ROW_OUT] = "out";
    return run_rowwise(f, &d);
}

/* lab_softmax_backward: (grad_out, y) -> (grad_x); attribute log. */
static int softmax_backward(ffi_call *f) {
    double log;
    if (read_attr(f, "log", 0.0, &log) < 0) return -1;
    lab_rowwise_call d = {.op = log != 0.0 ? LAB_ROW_LOG_SOFTMAX_BACKWARD : LAB_ROW_SOFTMAX_BACKWARD};
    if (!(d.rows[LAB_ROW_GRAD] = read_buffer(f, &f->frame->args, 0, "grad_out")) ||
        !(d.rows[LAB_ROW_X] = read_buffer(f, &f->frame->args, 1, "y")) ||
        !(d.rows[LAB_ROW_OUT] = read_buffer(f, &f->frame->rets, 0, "grad_x"))) {
        return -1;
    }
    d.row_names[LAB_ROW_GRAD] = "grad_out", d.row_names[LAB_ROW_X] = "y", d.row_names[LAB_ROW_OUT] = "grad_x";
    return run_rowwise(f, &d);
}

/* lab_cross_entropy: (logits, target) -> (loss[, grad]); attributes ignore_index, label_smoothing,
 * reduction (0 none, 1 mean, 2 sum). With grad: d loss / d logits in the same pass. */
static int cross_entropy(ffi_call *f) {
    double ignore_index, smoothing, reduction;
    if (read_attr(f, "ignore_index", -100.0, &ignore_index) < 0 ||
        read_attr(f, "label_smoothing", 0.0, &smoothing) < 0 ||
        read_attr(f, "reduction", 1.0, &reduction) < 0) {
        return -1;
    }
    lab_rowwise_call d = {.op = LAB_ROW_CROSS_ENTROPY,
                          .ignore_index = (int64_t)ignore_index,
                          .label_smoothing = smoothing,
                          .reduction = reduction == 0.0   ? LAB_LOSS_NONE
                                       : reduction == 2.0 ? LAB_LOSS_SUM
                                                          : LAB_LOSS_MEAN};
    const lab_xla_ffi_list *rets = &f->frame->rets;
    if (!(d.rows[LAB_ROW_X] = read_buffer(f, &f->frame->args, 0, "logits")) ||
        !(d.rows[LAB_ROW_TARGET] = read_buffer(f, &f->frame->args, 1, "target")) ||
        !(d.rows[LAB_ROW_LOSS] = read_buffer(f, rets, 0, "loss")) ||
        (rets->size > 1 && !(d.rows[LAB_ROW_OUT] = read_buffer(f, rets, 1, "grad")))) {
        return -1;
    }
    d.row_names[LAB_ROW_X] = "logits", d.row_names[LAB_ROW_TARGET] = "target";
    d.row_names[LAB_ROW_LOSS] = "loss", d.row_names[LAB_ROW_OUT] = "grad";
    return run_rowwise(f, &d);
}

/* lab_glu: (gate, up) -> (out); attribute act (0: silu, SwiGLU; 1: gelu's tanh form, GeGLU). The
 * forward is an elementwise op (lab.swiglu's kind), the backward a row-wise one. */
static int glu(ffi_call *f) {
    double act;
    if (read_attr(f, "act", 0.0, &act) < 0) return -1;
    lab_elementwise_call d;
    memset(&d, 0, sizeof d);
    d.op = act != 0.0 ? LAB_OP_GEGLU : LAB_OP_SWIGLU;
    lab_operands *ops = &d.operands;
    static const char *const names[] = {"out", "gate", "up"};
    for (int i = 0; i < 3; i++) {
        const lab_array *a =
            read_buffer(f, i == 0 ? &f->frame->rets : &f->frame->args, i == 0 ? 0 : i - 1, names[i]);
        if (!a) return -1;
        ops->arrays[i] = *a;
        ops->names[i] = names[i];
    }
    ops->count = 3, ops->n_outputs = 1;
    lab_op_call call = lab_ffi_op_call(f, &d);
    for (int i = 0; i < 3; i++) lab_op_call_add(&call, ops->names[i], &ops->arrays[i], 1, 0, i == 0);
    return lab_run_op(&lab_get_state(ffi_module)->dispatch, &lab_elementwise_kind, &call);
}

/* lab_glu_backward: (grad_out, gate, up) -> (grad_gate, grad_up); attribute act. */
static int glu_backward(ffi_call *f) {
    double act;
    if (read_attr(f, "act", 0.0, &act) < 0) return -1;
    lab_rowwise_call d = {.op = act != 0.0 ? LAB_ROW_GEGLU_BACKWARD : LAB_ROW_SWIGLU_BACKWARD};
    const lab_xla_ffi_list *args = &f->frame->args, *rets = &f->frame->rets;
    if (!(d.rows[LAB_ROW_GRAD] = read_buffer(f, args, 0, "grad_out")) ||
        !(d.rows[LAB_ROW_X] = read_buffer(f, args, 1, "gate")) ||
        !(d.rows[LAB_ROW_UP] = read_buffer(f, args, 2, "up")) ||
        !(d.rows[LAB_ROW_OUT] = read_buffer(f, rets, 0, "grad_gate")) ||
        !(d.rows[LAB_ROW_GRAD_UP] = read_buffer(f, rets, 1, "grad_up"))) {
        return -1;
    }
    d.row_names[LAB_ROW_GRAD] = "grad_out", d.row_names[LAB_ROW_X] = "gate", d.row_names[LAB_ROW_UP] = "up";
    d.row_names[LAB_ROW_OUT] = "grad_gate", d.row_names[LAB_ROW_GRAD_UP] = "grad_up";
    return run_rowwise(f, &d);
}

/* lab_rope: (q, k, cos, sin) -> (q_out, k_out); attributes interleaved, backward, rotary_dim (-1: the
 * tables' width). */
static int rope(ffi_call *f) {
    double interleaved, backward, rotary_dim;
    if (read_attr(f, "interleaved", 0.0, &interleaved) < 0 || read_attr(f, "backward", 0.0, &backward) < 0 ||
        read_attr(f, "rotary_dim", -1.0, &rotary_dim) < 0) {
        return -1;
    }
    lab_rope_call d;
    memset(&d, 0, sizeof d);
    d.interleaved = interleaved != 0.0, d.backward = backward != 0.0, d.rotary_dim = (int64_t)rotary_dim;
    const lab_xla_ffi_list *args = &f->frame->args, *rets = &f->frame->rets;
    if (!(d.x[0] = read_buffer(f, args, 0, "q")) || !(d.x[1] = read_buffer(f, args, 1, "k")) ||
        !(d.cos = read_buffer(f, args, 2, "cos")) || !(d.sin = read_buffer(f, args, 3, "sin")) ||
        !(d.out[0] = read_buffer(f, rets, 0, "q_out")) || !(d.out[1] = read_buffer(f, rets, 1, "k_out"))) {
        return -1;
    }
    d.x_names[0] = "q", d.x_names[1] = "k", d.out_names[0] = "q_out", d.out_names[1] = "k_out";
    lab_op_call call = lab_ffi_op_call(f, &d);
    lab_rope_add_operands(&call, &d);
    return lab_run_op(&lab_get_state(ffi_module)->dispatch, &lab_rope_kind, &call);
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
    if (read_attr(f, "kernel", -1.0, &number) < 0) return -1;
    if (!(number >= 0 && number < (double)n_registered)) {
        /* PyErr_Format has no %f */
        PyErr_Format(PyExc_ValueError, "%s: attribute 'kernel' (%lld) is no kernel lab.jax registered",
                     f->func, (long long)(number > -1e18 && number < 1e18 ? number : -1));
        return -1;
    }
    lab_ffi_kernel *kernel = registered[(Py_ssize_t)number];
    f->func = kernel->name;
    return kernel->run(kernel, f);
}

/* ---- the handler every target shares ---- */

/* Answers XLA's metadata query (the API version lab was written against; no traits: lab's handlers
 * do not declare themselves safe to record into XLA's command buffers). 1 when it was one. */
static int answered_metadata(lab_xla_ffi_call_frame *frame) {
    for (lab_xla_ffi_extension *e = frame->extension_start; e; e = e->next) {
        if (e->type != LAB_XLA_FFI_EXTENSION_METADATA) continue;
        lab_xla_ffi_metadata *m = ((lab_xla_ffi_metadata_extension *)e)->metadata;
        m->api_version.major_version = LAB_XLA_FFI_API_MAJOR;
        m->api_version.minor_version = LAB_XLA_FFI_API_MINOR;
        m->traits = 0;
        return 1;
    }
    return 0;
}

static lab_xla_ffi_error *xla_error(lab_xla_ffi_call_frame *frame, int errc, const char *message) {
    lab_xla_ffi_error_create_args args = {sizeof args, NULL, message, errc};
    return frame->api->error_create(&args);
}

static lab_xla_ffi_error *handle(lab_xla_ffi_call_frame *frame, const char *func, int (*op)(ffi_call *)) {
    if (answered_metadata(frame)) return NULL;
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
    const PyGILState_STATE gil = PyGILState_Ensure();
    if (!ffi_module) {
        error = xla_error(frame, 13, "lab: the lab module is not loaded (import lab.jax first)");
    } else if (op(&f) < 0) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        const char *message = text ? PyUnicode_AsUTF8(text) : NULL;
        const int invalid = type && (PyErr_GivenExceptionMatches(type, PyExc_TypeError) ||
                                     PyErr_GivenExceptionMatches(type, PyExc_ValueError));
        error = xla_error(frame, invalid ? 3 : 13, message ? message : func);
        PyErr_Clear();
        Py_XDECREF(text);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
    }
    PyGILState_Release(gil);
    return error;
}

#define LAB_FFI_TARGET(name)                                                                                 \
    static lab_xla_ffi_error *target_##name(lab_xla_ffi_call_frame *frame) {                                 \
        return handle(frame, "lab_" #name, name);                                                            \
    }
LAB_FFI_TARGET(rms_norm)
LAB_FFI_TARGET(rms_norm_backward)
LAB_FFI_TARGET(layer_norm)
LAB_FFI_TARGET(layer_norm_backward)
LAB_FFI_TARGET(softmax)
LAB_FFI_TARGET(softmax_backward)
LAB_FFI_TARGET(cross_entropy)
LAB_FFI_TARGET(rope)
LAB_FFI_TARGET(glu)
LAB_FFI_TARGET(glu_backward)
#undef LAB_FFI_TARGET

static lab_xla_ffi_error *target_user_kernel(lab_xla_ffi_call_frame *frame) {
    return handle(frame, "lab_kernel", user_kernel);
}

/* lab_kernel on any platform but CUDA: a user's CUDA C++ has no other implementation to fall back on,
 * so running it there is an error saying so (tracing and compiling for it are not). */
static lab_xla_ffi_error *target_user_kernel_elsewhere(lab_xla_ffi_call_frame *frame) {
    if (answered_metadata(frame) || frame->stage != LAB_XLA_STAGE_EXECUTE) return NULL;
    return xla_error(frame, 12, /* UNIMPLEMENTED */
                     "lab.jax: RawKernel and ElementwiseKernel run CUDA C++ and only on CUDA devices; this "
                     "computation was placed on another platform");
}

/* _xla_ffi_targets() -> {name: capsule}: what lab.jax hands to jax.ffi.register_ffi_target for CUDA;
 * lab_kernel's handler for the other platforms is _xla_ffi_elsewhere(). */
static PyObject *py_xla_ffi_targets(PyObject *module, PyObject *unused) {
    static const struct {
        const char *name;
        lab_xla_ffi_error *(*handler)(lab_xla_ffi_call_frame *);
    } targets[] = {{"lab_rms_norm", target_rms_norm},
                   {"lab_rms_norm_backward", target_rms_norm_backward},
                   {"lab_layer_norm", target_layer_norm},
                   {"lab_layer_norm_backward", target_layer_norm_backward},
                   {"lab_softmax", target_softmax},
                   {"lab_softmax_backward", target_softmax_backward},
                   {"lab_cross_entropy", target_cross_entropy},
                   {"lab_rope", target_rope},
                   {"lab_glu", target_glu},
                   {"lab_glu_backward", target_glu_backward},
                   {"lab_kernel", target_user_kernel}};
    if (!ffi_module) ffi_module = Py_NewRef(module);
    PyObject *found = PyDict_New();
    for (size_t i = 0; found && i < sizeof targets / sizeof targets[0]; i++) {
        PyObject *capsule =
            PyCapsule_New((void *)targets[i].handler, NULL, NULL); /* the name jax expects: none */
        if (!capsule || PyDict_SetItemString(found, targets[i].name, capsule) < 0) Py_CLEAR(found);
        Py_XDECREF(capsule);
    }
    return found;
}

static PyObject *py_xla_ffi_elsewhere(PyObject *module, PyObject *unused) {
    return PyCapsule_New((void *)target_user_kernel_elsewhere, NULL, NULL);
}

PyMethodDef lab_xla_ffi_methods[] = {
    {"_xla_ffi_elsewhere", py_xla_ffi_elsewhere, METH_NOARGS,
     "_xla_ffi_elsewhere()\n--\n\nThe handler of lab_kernel for platforms other than CUDA (an error "
     "saying a user's CUDA kernel runs only there), as a capsule."},
    {"_xla_ffi_targets", py_xla_ffi_targets, METH_NOARGS,
     "_xla_ffi_targets()\n--\n\nlab's XLA FFI handlers by target name, as capsules for "
     "jax.ffi.register_ffi_target (lab.jax registers them)."},
    {NULL, NULL, 0, NULL},
};
