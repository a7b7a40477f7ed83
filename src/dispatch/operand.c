/* operand.c - facts about one array (see operand.h). */
#include "dispatch/operand.h"

#include "dispatch/dtype.h"

int lab_array_is_contiguous(const lab_array *array) {
    if (array->numel == 0) return 1;
    int64_t expected = 1;
    for (int d = array->ndim - 1; d >= 0; d--) {
        if (array->shape[d] != 1 && array->strides[d] != expected) return 0;
        expected *= array->shape[d];
    }
    return 1;
}

void lab_fill_contiguous_strides(lab_array *array) {
    int64_t stride = 1;
    for (int d = array->ndim - 1; d >= 0; d--) {
        array->strides[d] = stride;
        stride *= array->shape[d] > 0 ? array->shape[d] : 1;
    }
}

lab_array lab_contiguous_like(const lab_array *a) {
    lab_array t = *a;
    lab_fill_contiguous_strides(&t);
    t.data = NULL;
    t.readonly = 0;
    t.source = LAB_SOURCE_CAI;
    t.exchange_api = NULL;
    t.has_stream = 0;
    t.stream = 0;
    t.stream_owner = NULL;
    t.last_use = NULL;
    return t;
}

int lab_check_writable(const lab_array *array, const char *func, const char *name) {
    if (!array->readonly) return 0;
    lab_fail(LAB_FAILURE_VALUE,
             "%s(): argument '%s' is read-only (its producer exported it with readonly=True)", func, name);
    return -1;
}

void lab_indexed_name(char *buf, size_t size, const char *name, int index) {
    size_t n = 0;
    while (name[n] && n + 1 < size) {
        buf[n] = name[n];
        n++;
    }
    if (index >= 0) {
        char digits[12];
        int d = 0;
        unsigned value = (unsigned)index;
        do {
            digits[d++] = (char)('0' + value % 10);
            value /= 10;
        } while (value);
        if (n + 1 < size) buf[n++] = '[';
        while (d > 0 && n + 1 < size) buf[n++] = digits[--d];
        if (n + 1 < size) buf[n++] = ']';
    }
    buf[n] = '\0';
}

int lab_scalar_for_dtype(const lab_scalar_arg *scalar, lab_dtype compute, const char *func, double *as_float,
                         int64_t *as_int) {
    *as_float = scalar->as_float;
    *as_int = scalar->as_int;
    if (!lab_dtype_is_integer(compute)) return 0;
    if (!scalar->is_integer) {
        lab_fail(LAB_FAILURE_TYPE, "%s(): argument '%s' must be an int for integer dtype %s, got %s", func,
                 scalar->name, lab_dtype_names[compute], scalar->type_name);
        return -1;
    }
    if (!scalar->fits_int64) {
        lab_fail(LAB_FAILURE_OVERFLOW, "%s(): argument '%s' does not fit in int64", func, scalar->name);
        return -1;
    }
    *as_float = (double)scalar->as_int;
    return 0;
}

int lab_has_shape(const lab_array *a, const int64_t *shape, int ndim) {
    if (a->ndim != ndim) return 0;
    for (int d = 0; d < ndim; d++) {
        if (a->shape[d] != shape[d]) return 0;
    }
    return 1;
}

int lab_fail_shape(const char *func, const char *name, const lab_array *a, const int64_t *want, int want_ndim,
                   const char *what) {
    char got[256], expected[256];
    lab_shape_text(got, sizeof got, a->shape, a->ndim);
    lab_shape_text(expected, sizeof expected, want, want_ndim);
    lab_fail(LAB_FAILURE_VALUE, "%s(): argument '%s' has shape %s; it must have shape %s (%s)", func, name,
             got, expected, what);
    return -1;
}

int lab_fail_dtype(const char *func, const char *name, lab_dtype got, const char *what) {
    return lab_fail(LAB_FAILURE_TYPE, "%s(): argument '%s' has dtype %s; %s", func, name,
                    lab_dtype_names[got], what);
}
