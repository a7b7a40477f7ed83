/* plan.c - building an elementwise launch plan (see plan.h). The steps follow PyTorch's
 * TensorIterator (aten/src/ATen/TensorIterator.cpp), reduced to what lab needs. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

#include "dtype.h"

const char *const lab_path_names[] = {"empty", "vectorized", "contiguous", "strided", "strided_vectorized",
                                      "casting"}; /* in lab_path's order */

static PyObject *shape_tuple(const int64_t *shape, int ndim) {
    PyObject *tuple = PyTuple_New(ndim);
    for (int d = 0; tuple && d < ndim; d++) {
        PyObject *item = PyLong_FromLongLong(shape[d]);
        if (!item) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, d, item);
    }
    return tuple;
}

/* "'a' has shape (3, 4), 'b' has shape (5,)" for the broadcast error message. */
static void raise_broadcast_error(const lab_operands *ops, const char *func) {
    PyObject *parts = PyList_New(0);
    for (int i = 1; parts && i < ops->count; i++) {
        PyObject *shape = shape_tuple(ops->arrays[i].shape, ops->arrays[i].ndim);
        PyObject *part = shape ? PyUnicode_FromFormat("'%s' has shape %R", ops->names[i], shape) : NULL;
        Py_XDECREF(shape);
        if (!part || PyList_Append(parts, part) < 0) Py_CLEAR(parts);
        Py_XDECREF(part);
    }
    PyObject *separator = parts ? PyUnicode_FromString(", ") : NULL;
    PyObject *joined = separator ? PyUnicode_Join(separator, parts) : NULL;
    if (joined) PyErr_Format(PyExc_ValueError, "%s(): the inputs cannot be broadcast together: %U", func, joined);
    Py_XDECREF(joined);
    Py_XDECREF(separator);
    Py_XDECREF(parts);
}

/* NumPy broadcasting of the inputs; their broadcast shape must be the output's (or broadcast to it). */
static int check_broadcast(const lab_operands *ops, const char *func) {
    int64_t shape[LAB_MAX_DIMS];
    int result_ndim = 0;
    for (int i = 0; i < ops->count; i++)
        if (ops->arrays[i].ndim > result_ndim) result_ndim = ops->arrays[i].ndim;
    for (int d = 0; d < result_ndim; d++) shape[d] = 1;
    for (int i = 1; i < ops->count; i++) { /* inputs first, so a mismatch among them is named as such */
        const lab_array *a = &ops->arrays[i];
        for (int d = 0; d < a->ndim; d++) {
            int64_t *target = &shape[result_ndim - a->ndim + d];
            if (a->shape[d] == *target || a->shape[d] == 1) continue;
            if (*target != 1) {
                raise_broadcast_error(ops, func);
                return -1;
            }
            *target = a->shape[d];
        }
    }
    /* Inputs may broadcast up to the output (as with NumPy's out=), never the output up to them. */
    const lab_array *out = &ops->arrays[0];
    int fits = out->ndim == result_ndim;
    for (int d = 0; fits && d < result_ndim; d++) fits = out->shape[d] == shape[d] || shape[d] == 1;
    if (!fits) {
        PyObject *out_shape = shape_tuple(out->shape, out->ndim), *bshape = shape_tuple(shape, result_ndim);
        if (out_shape && bshape)
            PyErr_Format(PyExc_ValueError, "%s(): argument '%s' has shape %R but the inputs broadcast to %R; the output "
                         "must have the broadcast shape (it is never broadcast itself)", func, ops->names[0], out_shape, bshape);
        Py_XDECREF(out_shape);
        Py_XDECREF(bshape);
        return -1;
    }
    return 0;
}

typedef struct {
    int64_t size;
    int64_t stride;
} dim_stride;

static int by_stride_magnitude(const void *x, const void *y) {
    const int64_t a = llabs(((const dim_stride *)x)->stride), b = llabs(((const dim_stride *)y)->stride);
    return a < b ? -1 : a > b;
}

/* The output may not write one element twice: no zero strides on dimensions longer than 1, and,
 * taking dimensions from the smallest stride up, each stride must clear the extent of the ones
 * below it (a sufficient test; it refuses only exotic layouts that interleave). */
static int check_output_does_not_self_overlap(const lab_array *out, const char *name, const char *func) {
    dim_stride dims[LAB_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < out->ndim; d++) {
        if (out->shape[d] <= 1) continue;
        if (out->strides[d] == 0) {
            PyErr_Format(PyExc_ValueError, "%s(): argument '%s' has stride 0 in dimension %d (a broadcast view); the "
                         "output must have one element per position", func, name, d);
            return -1;
        }
        dims[n].size = out->shape[d];
        dims[n].stride = out->strides[d];
        n++;
    }
    qsort(dims, n, sizeof dims[0], by_stride_magnitude);
    int64_t extent = 0; /* elements spanned by the dimensions so far, minus one */
    for (int i = 0; i < n; i++) {
        if (llabs(dims[i].stride) <= extent) {
            PyErr_Format(PyExc_ValueError, "%s(): argument '%s' overlaps itself (its strides map several positions to "
                         "one element); the output must not", func, name);
            return -1;
        }
        extent += (dims[i].size - 1) * llabs(dims[i].stride);
    }
    return 0;
}

/* [first byte, last byte + 1) that an array touches. */
static void byte_extent(const lab_array *a, uintptr_t *lo, uintptr_t *hi) {
    const int64_t itemsize = lab_dtype_itemsize[a->dtype];
    int64_t low = 0, high = 0;
    for (int d = 0; d < a->ndim; d++) {
        const int64_t span = (a->shape[d] - 1) * a->strides[d] * itemsize;
        if (span < 0) low += span;
        else high += span;
    }
    *lo = (uintptr_t)a->data + low;
    *hi = (uintptr_t)a->data + high + itemsize;
}

/* True when input and output name the same element at every position of the broadcast shape:
 * then in-place elementwise is safe, since each thread reads its element before writing it. */
static int is_same_view(const lab_array *in, const lab_array *out) {
    if (in->data != out->data || in->dtype != out->dtype || in->ndim > out->ndim) return 0;
    const int lead = out->ndim - in->ndim;
    for (int d = 0; d < out->ndim; d++) {
        if (out->shape[d] <= 1) continue;
        const int64_t in_stride = d < lead || in->shape[d - lead] == 1 ? 0 : in->strides[d - lead];
        if (in_stride != out->strides[d]) return 0;
    }
    return 1;
}

static int check_inputs_do_not_partially_overlap(const lab_operands *ops, const char *func) {
    const lab_array *out = &ops->arrays[0];
    uintptr_t out_lo, out_hi;
    byte_extent(out, &out_lo, &out_hi);
    for (int i = 1; i < ops->count; i++) {
        const lab_array *in = &ops->arrays[i];
        if (in->numel == 0) continue;
        uintptr_t lo, hi;
        byte_extent(in, &lo, &hi);
        if (hi <= out_lo || lo >= out_hi || is_same_view(in, out)) continue;
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' overlaps '%s' in memory without being the same view of it; "
                     "the result would depend on the order elements are written. Use the identical array for in-place, "
                     "or copy the input first", func, ops->names[i], ops->names[0]);
        return -1;
    }
    return 0;
}

/* The dtype arithmetic happens in: NumPy's promotion over the inputs, halves widened to float32. */
static int choose_compute_dtype(const lab_operands *ops, int integers_allowed, const char *func, lab_dtype *compute) {
    lab_dtype promoted = ops->arrays[ops->count > 1 ? 1 : 0].dtype;
    for (int i = 2; i < ops->count; i++) promoted = lab_promote(promoted, ops->arrays[i].dtype);
    if (lab_dtype_is_integer(promoted) && !integers_allowed) {
        PyErr_Format(PyExc_TypeError, "%s(): the inputs are integers (%s); this op computes on floating-point inputs "
                     "only (%s) - convert first, e.g. lab.copy into a float array", func, lab_dtype_names[promoted],
                     lab_supported_dtypes_text(0));
        return -1;
    }
    *compute = lab_compute_dtype(promoted);
    return 0;
}

/* Whether the innermost dimension can be walked in 16-byte packets: its length a multiple of the
 * packet, and for each operand either contiguous along it (stride = item size, start and outer
 * strides 16-byte aligned) or broadcast along it (stride 0: one element fills the packet). A bias
 * row added to a matrix is the case this is for. */
static int inner_dimension_packs(const lab_elementwise_launch *launch, int n_operands) {
    const int64_t itemsize = lab_dtype_itemsize[launch->dtypes[0]];
    const int inner = launch->ndim - 1;
    if (launch->shape[inner] % (16 / itemsize) != 0 || launch->byte_strides[0][inner] != itemsize) return 0;
    for (int i = 0; i < n_operands; i++) {
        if (launch->byte_strides[i][inner] == 0) continue;
        if (launch->byte_strides[i][inner] != itemsize || ((uintptr_t)launch->data[i] & 15u) != 0) return 0;
        for (int d = 0; d < inner; d++)
            if (launch->byte_strides[i][d] % 16 != 0) return 0;
    }
    return 1;
}

int lab_plan_elementwise(const lab_operands *ops, int integers_allowed, const char *func,
                         lab_elementwise_launch *launch) {
    const lab_array *out = &ops->arrays[0];
    if (out->readonly) {
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' is read-only (its producer exported it with readonly=True)",
                     func, ops->names[0]);
        return -1;
    }
    if (check_broadcast(ops, func) < 0) return -1;
    const int ndim = out->ndim;
    const int64_t *shape = out->shape;
    if (choose_compute_dtype(ops, integers_allowed, func, &launch->compute) < 0) return -1;

    launch->n_inputs = ops->count - 1;
    int same_dtype = 1;
    for (int i = 0; i < ops->count; i++) {
        launch->dtypes[i] = ops->arrays[i].dtype;
        launch->data[i] = ops->arrays[i].data;
        same_dtype &= ops->arrays[i].dtype == out->dtype;
    }
    launch->numel = out->numel;
    if (out->numel == 0) {
        launch->path = LAB_PATH_EMPTY;
        launch->ndim = 0;
        return 0;
    }
    if (check_output_does_not_self_overlap(out, ops->names[0], func) < 0) return -1;
    if (check_inputs_do_not_partially_overlap(ops, func) < 0) return -1;

    /* Byte strides of every operand over the broadcast shape (0 where an input is broadcast),
     * keeping only dimensions longer than 1. */
    int kept = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        launch->shape[kept] = shape[d];
        for (int i = 0; i < ops->count; i++) {
            const lab_array *a = &ops->arrays[i];
            const int ad = d - (ndim - a->ndim);
            const int64_t stride = ad < 0 || a->shape[ad] == 1 ? 0 : a->strides[ad];
            launch->byte_strides[i][kept] = stride * lab_dtype_itemsize[a->dtype];
        }
        kept++;
    }
    /* Walk every dimension in the direction the output's memory goes (elementwise order is free). */
    for (int d = 0; d < kept; d++) {
        if (launch->byte_strides[0][d] >= 0) continue;
        for (int i = 0; i < ops->count; i++) {
            launch->data[i] += (launch->shape[d] - 1) * launch->byte_strides[i][d];
            launch->byte_strides[i][d] = -launch->byte_strides[i][d];
        }
    }
    /* Outermost first = the output's largest stride first (insertion sort: at most 8 dimensions). */
    for (int d = 1; d < kept; d++) {
        for (int e = d; e > 0 && launch->byte_strides[0][e - 1] < launch->byte_strides[0][e]; e--) {
            int64_t t = launch->shape[e];
            launch->shape[e] = launch->shape[e - 1];
            launch->shape[e - 1] = t;
            for (int i = 0; i < ops->count; i++) {
                t = launch->byte_strides[i][e];
                launch->byte_strides[i][e] = launch->byte_strides[i][e - 1];
                launch->byte_strides[i][e - 1] = t;
            }
        }
    }
    /* Merge an outer dimension into the inner one whenever, for every operand, stepping the outer
     * one is the same as stepping the inner one across its whole length. */
    int merged = 0;
    for (int d = 0; d < kept; d++) {
        if (merged > 0) {
            const int inner = d, outer = merged - 1;
            int can_merge = 1;
            for (int i = 0; i < ops->count && can_merge; i++)
                can_merge = launch->byte_strides[i][outer] == launch->byte_strides[i][inner] * launch->shape[inner];
            if (can_merge) {
                launch->shape[outer] *= launch->shape[inner];
                for (int i = 0; i < ops->count; i++) launch->byte_strides[i][outer] = launch->byte_strides[i][inner];
                continue;
            }
        }
        launch->shape[merged] = launch->shape[d];
        for (int i = 0; i < ops->count; i++) launch->byte_strides[i][merged] = launch->byte_strides[i][d];
        merged++;
    }
    if (merged == 0) { /* a single element */
        launch->shape[0] = 1;
        for (int i = 0; i < ops->count; i++) launch->byte_strides[i][0] = lab_dtype_itemsize[ops->arrays[i].dtype];
        merged = 1;
    }
    launch->ndim = merged;

    if (!same_dtype) {
        launch->path = LAB_PATH_CASTING;
        return 0;
    }
    int contiguous = merged == 1, aligned = 1;
    for (int i = 0; i < ops->count; i++) {
        contiguous &= launch->byte_strides[i][0] == lab_dtype_itemsize[out->dtype];
        aligned &= ((uintptr_t)launch->data[i] & 15u) == 0;
    }
    if (contiguous) launch->path = aligned ? LAB_PATH_VECTORIZED : LAB_PATH_CONTIGUOUS;
    else launch->path = inner_dimension_packs(launch, ops->count) ? LAB_PATH_STRIDED_VECTORIZED : LAB_PATH_STRIDED;
    return 0;
}
