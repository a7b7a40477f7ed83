/* introspect.c - private helpers that show what the binding and the dispatch level decided, for
 * tests and teaching: lab.lab._array_info(obj) returns the lab_array that lab_read_array() filled,
 * lab.lab._plan(out, *inputs) the elementwise kind's launch plan, and lab.lab._iterate(out,
 * *inputs, reduced=()) the iterator's space, as dicts. None of them calls CUDA. */
#include "testing/introspect.h"

#include <limits.h>
#include <stdarg.h>

#include "binding/args.h"
#include "binding/array_reader.h"
#include "binding/errors.h"
#include "dispatch/dtype.h"
#include "dispatch/elementwise_kind.h"
#include "dispatch/iterator.h"

static PyObject *py_array_info(PyObject *module, PyObject *obj) {
    lab_array array;
    if (lab_read_array(lab_get_state(module), obj, "_array_info", "obj", &array) < 0) return NULL;
    PyObject *shape = lab_shape_tuple(array.shape, array.ndim);
    PyObject *strides = lab_shape_tuple(array.strides, array.ndim);
    PyObject *stream = array.has_stream ? PyLong_FromSize_t((size_t)array.stream) : Py_NewRef(Py_None);
    PyObject *info = NULL;
    if (shape && strides && stream) {
        info =
            Py_BuildValue("{s:s, s:s, s:O, s:O, s:L, s:K, s:O, s:i, s:O, s:O}", "source",
                          array.source == LAB_SOURCE_CAI ? "cuda_array_interface" : "dlpack_exchange",
                          "dtype", lab_dtype_names[array.dtype], "shape", shape, "strides", strides, "numel",
                          (long long)array.numel, "data", (unsigned long long)(uintptr_t)array.data,
                          "readonly", array.readonly ? Py_True : Py_False, "device", array.device, "stream",
                          stream, "contiguous", lab_array_is_contiguous(&array) ? Py_True : Py_False);
    }
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(stream);
    return info;
}

/* Reads `args` (out, *inputs) into ops. Returns 0 or -1. */
static int read_operands(PyObject *module, PyObject *args, const char *func, lab_operands *ops) {
    const Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 2 || n > LAB_MAX_OPERANDS) {
        PyErr_Format(PyExc_TypeError, "%s(out, *inputs) takes an output and 1 to %d inputs", func,
                     LAB_MAX_OPERANDS - 1);
        return -1;
    }
    static const char *const names[LAB_MAX_OPERANDS] = {"out", "in0", "in1", "in2"};
    ops->count = (int)n;
    ops->n_outputs = 1;
    for (int i = 0; i < ops->count; i++) {
        ops->names[i] = names[i];
        if (lab_read_array(lab_get_state(module), PyTuple_GET_ITEM(args, i), func, names[i],
                           &ops->arrays[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* {"shape": (...), "byte_strides": ((...) per operand), "data": (...)} of an iteration space. */
static PyObject *space_dict(int ndim, const int64_t *shape, const int64_t (*byte_strides)[LAB_MAX_DIMS],
                            char *const *data, int count) {
    PyObject *shape_t = lab_shape_tuple(shape, ndim);
    PyObject *strides = PyTuple_New(count), *pointers = PyTuple_New(count);
    PyObject *result = NULL;
    for (int i = 0; shape_t && strides && pointers && i < count; i++) {
        PyObject *s = lab_shape_tuple(byte_strides[i], ndim);
        PyObject *d = PyLong_FromSize_t((size_t)(uintptr_t)data[i]);
        if (!s || !d) {
            Py_XDECREF(s);
            Py_XDECREF(d);
            Py_CLEAR(strides);
            break;
        }
        PyTuple_SET_ITEM(strides, i, s);
        PyTuple_SET_ITEM(pointers, i, d);
    }
    if (shape_t && strides && pointers) {
        result =
            Py_BuildValue("{s:O, s:O, s:O}", "shape", shape_t, "byte_strides", strides, "data", pointers);
    }
    Py_XDECREF(shape_t);
    Py_XDECREF(strides);
    Py_XDECREF(pointers);
    return result;
}

/* Adds items to a dict and returns it, or NULL (the dict released) on failure. */
static PyObject *with_items(PyObject *dict, const char *format, ...) {
    if (!dict) return NULL;
    va_list va;
    va_start(va, format);
    PyObject *extra = Py_VaBuildValue(format, va);
    va_end(va);
    if (!extra || PyDict_Update(dict, extra) < 0) Py_CLEAR(dict);
    Py_XDECREF(extra);
    return dict;
}

static PyObject *py_plan(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"integers", NULL};
    int integers = 1;
    PyObject *empty = PyTuple_New(0);
    if (!empty) return NULL;
    int ok = PyArg_ParseTupleAndKeywords(empty, kwargs, "|p:_plan", keywords, &integers);
    Py_DECREF(empty);
    if (!ok) return NULL;
    lab_operands ops;
    if (read_operands(module, args, "_plan", &ops) < 0) return NULL;
    lab_elementwise_launch plan;
    /* planning makes no CUDA call: its failures are TypeError/ValueError, no state needed */
    if (lab_plan_elementwise(&ops, integers, "_plan", &plan) < 0) return lab_raise_failure(NULL);
    PyObject *result = space_dict(plan.ndim, plan.shape, plan.byte_strides, plan.data, ops.count);
    return with_items(result, "{s:s, s:s, s:L}", "path", lab_path_names[plan.path], "compute_dtype",
                      lab_dtype_names[plan.compute], "numel", (long long)plan.numel);
}

static PyObject *py_iterate(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"reduced", NULL};
    PyObject *reduced_dims = NULL;
    PyObject *empty = PyTuple_New(0);
    if (!empty) return NULL;
    int ok =
        PyArg_ParseTupleAndKeywords(empty, kwargs, "|O!:_iterate", keywords, &PyTuple_Type, &reduced_dims);
    Py_DECREF(empty);
    if (!ok) return NULL;
    uint32_t reduced = 0;
    for (Py_ssize_t i = 0; reduced_dims && i < PyTuple_GET_SIZE(reduced_dims); i++) {
        const long d = PyLong_AsLong(PyTuple_GET_ITEM(reduced_dims, i));
        if (d == -1 && PyErr_Occurred()) return NULL;
        if (d < 0 || d >= LAB_MAX_DIMS) {
            return PyErr_Format(PyExc_ValueError, "_iterate(): reduced dimension %ld", d);
        }
        reduced |= 1u << d;
    }
    lab_operands ops;
    if (read_operands(module, args, "_iterate", &ops) < 0) return NULL;
    lab_iteration it;
    if (lab_iterate(&ops, reduced, "_iterate", &it) < 0) return lab_raise_failure(NULL);
    PyObject *flags = PyTuple_New(it.ndim);
    for (int d = 0; flags && d < it.ndim; d++) {
        PyTuple_SET_ITEM(flags, d, PyBool_FromLong((it.reduced >> d) & 1));
    }
    if (!flags) return NULL;
    PyObject *result = space_dict(it.ndim, it.shape, it.byte_strides, it.data, ops.count);
    result = with_items(result, "{s:O, s:L}", "reduced", flags, "numel", (long long)it.numel);
    Py_DECREF(flags);
    return result;
}

/* A tuning knob's new value from `arg`: an integer from `lowest` to `highest`, else ValueError with
 * `refusal` (which names the knob and what it takes). Returns -1 with the error set. */
static int read_knob(PyObject *arg, long long lowest, long long highest, const char *refusal,
                     long long *value) {
    *value = PyLong_AsLongLong(arg);
    if (*value == -1 && PyErr_Occurred()) return -1;
    if (*value < lowest || *value > highest) {
        PyErr_SetString(PyExc_ValueError, refusal);
        return -1;
    }
    return 0;
}

/* _rowwise_max_chunks(n): the most 16-byte chunks a lane of a row-wise kernel may hold (1, 2 or 4;
 * 4 is lab's default), for bench/sweep_rowwise.py. Returns the previous setting. */
static PyObject *py_rowwise_max_chunks(PyObject *module, PyObject *arg) {
    static const char refusal[] = "_rowwise_max_chunks(): 1, 2 or 4";
    long long n;
    if (read_knob(arg, 1, 4, refusal, &n) < 0) return NULL;
    if (n == 3) {
        PyErr_SetString(PyExc_ValueError, refusal);
        return NULL;
    }
    return PyLong_FromLong(lab_rowwise_set_max_chunks((int)n));
}

/* _rowwise_staged_min_vectors(n): the fewest 16-byte vectors a row needs for the staged row-wise
 * kernel, for every op (larger than any row turns staging off; 0, the default, leaves each op its own
 * minimum), for bench/sweep_rowwise.py and the tests that cover both layouts. Returns the previous
 * setting. */
static PyObject *py_rowwise_staged_min_vectors(PyObject *module, PyObject *arg) {
    long long n;
    if (read_knob(arg, 0, LLONG_MAX, "_rowwise_staged_min_vectors(): a count >= 0", &n) < 0) return NULL;
    return PyLong_FromLongLong(lab_rowwise_set_staged_min_vectors((int64_t)n));
}

/* _rowwise_staged_vectors_per_thread(n): how many 16-byte vectors of a staged row each thread takes,
 * for every op (1 to 64; 0, the default, leaves each op its own) - more make smaller blocks, so more
 * rows fit a multiprocessor's shared memory - for bench/sweep_rowwise.py and the tests. Returns the
 * previous setting. */
static PyObject *py_rowwise_staged_vectors_per_thread(PyObject *module, PyObject *arg) {
    static const char refusal[] = "_rowwise_staged_vectors_per_thread(): a count from 0 to 64";
    long long n;
    if (read_knob(arg, 0, 64, refusal, &n) < 0) return NULL;
    return PyLong_FromLong(lab_rowwise_set_staged_vectors_per_thread((int)n));
}

/* _rowwise_staged_most_bytes(n): the most bytes a staged row's copies may take past the 47 KB every
 * kernel has without opting in (-1, the default: half of the shared memory a block may opt in to;
 * 48128, 47 KB, or less: no kernel opts in), for bench/sweep_rowwise.py and the tests that cover both
 * layouts. Returns the previous setting. */
static PyObject *py_rowwise_staged_most_bytes(PyObject *module, PyObject *arg) {
    static const char refusal[] = "_rowwise_staged_most_bytes(): -1 (the default) or a count >= 0";
    long long n;
    if (read_knob(arg, -1, LLONG_MAX, refusal, &n) < 0) return NULL;
    return PyLong_FromLongLong(lab_rowwise_set_staged_most_bytes((int64_t)n));
}

/* _rowwise_window_depth(n): the steps of copies a window-rows kernel keeps in flight (-1, the default:
 * six where the SM keeps its blocks, eight for long rows with a gradient on memory under 4 TB/s; 0:
 * window rows off, the streamed walk), for bench/sweep_rowwise.py
 * and the tests that cover both walks. Returns the previous setting. */
static PyObject *py_rowwise_window_depth(PyObject *module, PyObject *arg) {
    static const char refusal[] = "_rowwise_window_depth(): -1 (the default), 0 (off) or 1 to 8";
    long long n;
    if (read_knob(arg, -1, 8, refusal, &n) < 0) return NULL;
    return PyLong_FromLong(lab_rowwise_set_window_depth((int)n));
}

/* _rowwise_cluster_blocks(n): the blocks of a cluster a row of the norms' backward is cut across (-1,
 * the default: the fewest whose slices fit a block, for rows the registers do not hold; 0: never; 2, 4 or
 * 8: that many wherever the row cuts into slices that fit), for bench/sweep_rowwise.py and the tests
 * that cover both layouts. Returns the previous setting. */
static PyObject *py_rowwise_cluster_blocks(PyObject *module, PyObject *arg) {
    static const char refusal[] = "_rowwise_cluster_blocks(): -1 (the default), 0 (never), 2, 4 or 8";
    long long n;
    if (read_knob(arg, -1, 8, refusal, &n) < 0) return NULL;
    if (n == 1 || n == 3 || (n > 4 && n < 8)) {
        PyErr_SetString(PyExc_ValueError, refusal);
        return NULL;
    }
    return PyLong_FromLong(lab_rowwise_set_cluster_blocks((int)n));
}

/* _reduce_slice_waves(n): the waves of blocks a split reduction's first pass is cut into (1 to 64;
 * 4 is lab's default), for bench/sweep_reductions.py. Returns the previous setting. */
static PyObject *py_reduce_slice_waves(PyObject *module, PyObject *arg) {
    long long n;
    if (read_knob(arg, 1, 64, "_reduce_slice_waves(): a count from 1 to 64", &n) < 0) return NULL;
    return PyLong_FromLong(lab_reduce_set_slice_waves((int)n));
}

PyMethodDef lab_introspect_methods[] = {
    {"_reduce_slice_waves", py_reduce_slice_waves, METH_O,
     "_reduce_slice_waves(n, /)\n--\n\nPrivate: the waves of blocks a split reduction's first pass is cut "
     "into (1 to 64; 4 is lab's default). Returns the previous value. For tuning sweeps and tests."},
    {"_rowwise_cluster_blocks", py_rowwise_cluster_blocks, METH_O,
     "_rowwise_cluster_blocks(n, /)\n--\n\nPrivate: the blocks of a thread-block cluster a row of the norms' "
     "backward is cut across: -1 (the default) the fewest whose slices fit a block, for rows the registers "
     "do not hold; 0 never; 2, 4 or 8 that many wherever the row cuts into slices that fit. Returns the "
     "previous "
     "value. For tuning sweeps and tests."},
    {"_rowwise_staged_most_bytes", py_rowwise_staged_most_bytes, METH_O,
     "_rowwise_staged_most_bytes(n, /)\n--\n\nPrivate: the most bytes a staged row's copies may take past "
     "the 47 KB every kernel has: -1 (the default) half of the shared memory a block may opt in to, else "
     "that many (48128 or less: no kernel opts in). Returns the previous value. For tuning sweeps and "
     "tests."},
    {"_rowwise_window_depth", py_rowwise_window_depth, METH_O,
     "_rowwise_window_depth(n, /)\n--\n\nPrivate: the steps of copies the window-rows kernel keeps in "
     "flight: -1 (the default) six where the SM keeps its blocks, eight for long rows with a gradient on "
     "memory under 4 TB/s; 0 turns window rows (and rms_norm's "
     "backward's buffered rows) off, 1 to 8 that depth. Returns the previous value. For tuning sweeps and "
     "tests."},
    {"_rowwise_staged_vectors_per_thread", py_rowwise_staged_vectors_per_thread, METH_O,
     "_rowwise_staged_vectors_per_thread(n, /)\n--\n\nPrivate: the 16-byte vectors of a staged row each "
     "thread takes, for every op (1 to 64; 0, the default, leaves each op its own); blocks have 128 to 1024 "
     "threads. Returns the previous value. "
     "For tuning sweeps and tests."},
    {"_rowwise_staged_min_vectors", py_rowwise_staged_min_vectors, METH_O,
     "_rowwise_staged_min_vectors(n, /)\n--\n\nPrivate: the fewest 16-byte vectors a row needs for the "
     "staged row-wise kernel, for every op; a count larger than any row turns staging off, 0 (the "
     "default) leaves each op its own. Returns the previous value. For tuning sweeps and tests."},
    {"_rowwise_max_chunks", py_rowwise_max_chunks, METH_O,
     "_rowwise_max_chunks(n, /)\n--\n\nPrivate: caps the 16-byte chunks a lane of the row-wise kernels holds "
     "(1, 2 or 4, the default); rows that then do not fit are streamed. Returns the previous cap. For tuning "
     "sweeps."},
    {"_plan", (PyCFunction)(void (*)(void))py_plan, METH_VARARGS | METH_KEYWORDS,
     "_plan(out, *inputs, integers=True)\n--\n\nPrivate: the launch plan lab makes for these operands (path, "
     "compute_dtype, merged shape, byte_strides per operand, data pointers after flipping, numel). No CUDA "
     "call."},
    {"_iterate", (PyCFunction)(void (*)(void))py_iterate, METH_VARARGS | METH_KEYWORDS,
     "_iterate(out, *inputs, reduced=())\n--\n\nPrivate: the iteration space dispatch/iterator.c makes for "
     "these "
     "operands, with `reduced` the output's dimensions a reduction collapses (size 1 in out): merged shape, "
     "byte_strides per operand, data pointers, which dimensions are reduced, numel. No CUDA call."},
    {"_array_info", py_array_info, METH_O,
     "_array_info(obj, /)\n--\n\nPrivate: what lab reads from a CUDA array (source protocol, dtype, shape, "
     "strides in "
     "elements, numel, data pointer, readonly, device or -1, declared stream or None, contiguous). No CUDA "
     "call."},
    {NULL, NULL, 0, NULL},
};
