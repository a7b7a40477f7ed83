/* array_reader.c - reading a Python object into a lab_array (see array_reader.h).
 *
 * lab's own lab.Array is read from its C struct; anything else through one of two protocols, tried
 * in this order:
 *  1. DLPack C exchange API: `type(obj).__dlpack_c_exchange_api__` is a PyCapsule named
 *     "dlpack_exchange_api" of a DLPackExchangeAPI (anything else under that name is a TypeError:
 *     a bare int address could point anywhere). Looked up once per type and cached in the module
 *     state, negative answers too (a failed getattr costs an exception).
 *  2. __cuda_array_interface__, read by cai_reader.c.
 * Every malformed input becomes a TypeError/ValueError that names the argument.
 *
 * Reading runs Python code: a property, a __bool__, a producer's C function. That code may change
 * or free whatever lab looked at before it, so nothing borrowed is used across it, and what a
 * producer's C function hands back is checked before it is used. */
#include "binding/array_reader.h"

#include "binding/args.h"

#include <stdarg.h>
#include <string.h>

#include "binding/protocol_dtypes.h"
#include "binding/protocol_reader.h"
#include "binding/runtime_types.h"

/* ---- naming the argument in messages (protocol_reader.h) ---- */

int lab_raise_arg(PyObject *type, const lab_arg_label *label, const char *format, ...) {
    char name[80];
    lab_indexed_name(name, sizeof name, label->name, label->index);
    va_list vargs;
    va_start(vargs, format);
    PyObject *detail = PyUnicode_FromFormatV(format, vargs);
    va_end(vargs);
    if (detail) {
        PyErr_Format(type, "%s(): argument '%s'%U", label->func, name, detail);
        Py_DECREF(detail);
    }
    return -1;
}

/* ---- the per-type exchange-API cache ---- */

/* A DLPackExchangeAPI table lab can use, from the capsule a type publishes, or NULL. Tables chain
 * to older versions through prev_api; the walk is bounded so a table that points to itself ends. */
static const DLPackExchangeAPI *usable_api(PyObject *capsule) {
    const DLPackExchangeAPI *candidate = PyCapsule_GetPointer(capsule, LAB_EXCHANGE_CAPSULE_NAME);
    for (int hops = 0; candidate && candidate->header.version.major != 1; hops++) {
        candidate = hops < 8 ? (const DLPackExchangeAPI *)candidate->header.prev_api : NULL;
    }
    if (candidate && (!candidate->dltensor_from_py_object_no_sync || !candidate->current_work_stream)) {
        return NULL;
    }
    return candidate;
}

/* The exchange API of obj's type, or NULL: 0, or -1 with TypeError where the type publishes
 * something else under the protocol's name (an int, a capsule of another name: lab never
 * dereferences an address it cannot check). Answers are cached per type, negative ones too; the
 * cache holds the capsule, so the table it points to outlives any reassignment of the attribute. */
static int lookup_exchange_api(lab_state *state, PyObject *obj, const lab_arg_label *label,
                               const DLPackExchangeAPI **api) {
    PyTypeObject *type = Py_TYPE(obj);
    for (int i = 0; i < state->exchange_cache_len; i++) {
        if (state->exchange_cache[i].type == type) {
            *api = state->exchange_cache[i].api;
            return 0;
        }
    }
    *api = NULL;
    PyObject *attr = PyObject_GetAttr((PyObject *)type, LAB_NAME_OBJ(state, dlpack_exchange_api));
    if (!attr) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
    } else if (!PyCapsule_IsValid(attr, LAB_EXCHANGE_CAPSULE_NAME)) {
        if (PyCapsule_CheckExact(attr)) {
            const char *capsule_name = PyCapsule_GetName(attr);
            lab_raise_arg(
                PyExc_TypeError, label,
                ": its type's __dlpack_c_exchange_api__ is a capsule named '%s'; DLPack's C exchange "
                "API is a capsule named '%s'",
                capsule_name ? capsule_name : "(null)", LAB_EXCHANGE_CAPSULE_NAME);
        } else {
            lab_raise_arg(PyExc_TypeError, label,
                          ": its type's __dlpack_c_exchange_api__ must be a capsule named '%s' (DLPack's C "
                          "exchange API), got %s",
                          LAB_EXCHANGE_CAPSULE_NAME, Py_TYPE(attr)->tp_name);
        }
        Py_DECREF(attr);
        return -1;
    } else {
        *api = usable_api(attr);
    }
    if (state->exchange_cache_len < LAB_EXCHANGE_CACHE_SIZE) {
        lab_exchange_cache_entry *entry = &state->exchange_cache[state->exchange_cache_len++];
        entry->type = (PyTypeObject *)Py_NewRef(type);
        entry->capsule = attr; /* the reference taken above, or NULL */
        entry->api = *api;
    } else {
        Py_XDECREF(attr);
    }
    return 0;
}

int lab_has_array_protocol(lab_state *state, PyObject *obj) {
    if (Py_IS_TYPE(obj, state->ArrayType)) return 1;
    const DLPackExchangeAPI *api = NULL;
    const lab_arg_label unnamed = {"", "", -1};
    if (lookup_exchange_api(state, obj, &unnamed, &api) < 0) {
        PyErr_Clear();
        return 1; /* it claims the protocol: reading it says what is wrong */
    }
    if (api) return 1;
    /* Producers define __cuda_array_interface__ as a property of their type (CuPy, Numba, JAX):
     * asking the type returns the property without building the dict, which lab_read_array then
     * builds once. Only an attribute set on the instance needs the instance asked. */
    PyObject *name = LAB_NAME_OBJ(state, cai);
    PyObject *found = PyObject_GetAttr((PyObject *)Py_TYPE(obj), name);
    if (!found) {
        PyErr_Clear();
        found = PyObject_GetAttr(obj, name);
    }
    if (!found) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(found);
    return 1;
}

/* numel = prod(shape), refusing sizes whose byte count would not fit in int64. */
int lab_compute_numel(lab_array *array, const lab_arg_label *label) {
    int64_t numel = 1, bytes = 0;
    int empty = 0;
    for (int d = 0; d < array->ndim; d++) empty |= array->shape[d] == 0;
    /* Overflow-checked multiplies, not divisions: this runs for every array of every call (900 per
     * foreach_add over 300 tensors), and a 64-bit division costs tens of cycles. */
    for (int d = 0; !empty && d < array->ndim; d++) {
        if (__builtin_mul_overflow(numel, array->shape[d], &numel) ||
            __builtin_mul_overflow(numel, (int64_t)lab_dtype_itemsize[array->dtype], &bytes)) {
            return lab_raise_arg(PyExc_OverflowError, label,
                                 " has a shape whose size in bytes overflows int64");
        }
    }
    array->numel = empty ? 0 : numel;
    return 0;
}

/* ---- DLPack exchange ---- */

/* The producer's C function fills a borrowed DLTensor; everything in it is checked before use, as
 * a table published by any Python type may hold anything. */
static int read_dlpack_exchange(const DLPackExchangeAPI *api, PyObject *obj, const lab_arg_label *label,
                                lab_array *array) {
    DLTensor tensor;
    memset(&tensor, 0, sizeof tensor);
    if (api->dltensor_from_py_object_no_sync((void *)obj, &tensor) != 0) {
        if (!PyErr_Occurred()) {
            lab_raise_arg(PyExc_TypeError, label, ": its DLPack exchange API failed without saying why");
        }
        return -1;
    }
    if (PyErr_Occurred()) { /* a producer that set an error but reported success */
        return -1;
    }
    if (tensor.device.device_type != kDLCUDA && tensor.device.device_type != kDLCUDAManaged) {
        return lab_raise_arg(
            PyExc_TypeError, label, " must be a CUDA array, got a %s object on %s (DLPack device type %d)",
            Py_TYPE(obj)->tp_name, tensor.device.device_type == kDLCPU ? "the CPU" : "a non-CUDA device",
            (int)tensor.device.device_type);
    }
    if (tensor.device.device_id < 0) {
        return lab_raise_arg(PyExc_ValueError, label, ": its DLPack exchange API reports device %d",
                             (int)tensor.device.device_id);
    }
    if (lab_dtype_from_dlpack(tensor.dtype, &array->dtype) < 0) {
        return lab_raise_arg(PyExc_TypeError, label,
                             " has an unsupported dtype (DLPack code %d, %d bits, %d lanes); lab supports %s",
                             (int)tensor.dtype.code, (int)tensor.dtype.bits, (int)tensor.dtype.lanes,
                             lab_supported_dtypes_text(1));
    }
    if (tensor.ndim < 0 || tensor.ndim > LAB_MAX_DIMS) {
        return lab_raise_arg(PyExc_ValueError, label, " has %d dimensions; lab supports 0 to %d",
                             (int)tensor.ndim, LAB_MAX_DIMS);
    }
    if (tensor.ndim > 0 && !tensor.shape) {
        return lab_raise_arg(PyExc_ValueError, label,
                             ": its DLPack exchange API gave %d dimensions but no shape (a null pointer)",
                             (int)tensor.ndim);
    }
    array->ndim = tensor.ndim;
    for (int d = 0; d < tensor.ndim; d++) {
        if (tensor.shape[d] < 0) return lab_raise_arg(PyExc_ValueError, label, " has a negative dimension");
        array->shape[d] = tensor.shape[d];
    }
    if (tensor.strides) {
        for (int d = 0; d < tensor.ndim; d++) array->strides[d] = tensor.strides[d];
    } else {
        lab_fill_contiguous_strides(array); /* DLPack: null strides mean compact row-major */
    }
    if (lab_compute_numel(array, label) < 0) return -1;
    if (!tensor.data && array->numel > 0) {
        return lab_raise_arg(PyExc_ValueError, label, " has a null data pointer but %lld elements",
                             (long long)array->numel);
    }
    array->data = (char *)tensor.data + tensor.byte_offset;
    array->readonly = 0;
    array->device = tensor.device.device_id;
    array->source = LAB_SOURCE_DLPACK_EXCHANGE;
    array->exchange_api = api;
    array->has_stream = 0;
    array->stream = 0;
    array->stream_owner = NULL;
    array->last_use = NULL;
    return 0;
}

/* Every element's address must be representable: data + sum((shape - 1) * stride) over the
 * dimensions, each product and sum checked for overflow (a hand-written dict may say anything). */
static int check_address_range(const lab_array *a, const lab_arg_label *label) {
    if (a->numel == 0) return 0;
    const int64_t itemsize = lab_dtype_itemsize[a->dtype];
    int64_t low = 0, high = 0;
    for (int d = 0; d < a->ndim; d++) {
        int64_t span;
        if (__builtin_mul_overflow(a->shape[d] - 1, a->strides[d], &span) ||
            __builtin_mul_overflow(span, itemsize, &span) ||
            (span < 0 ? __builtin_add_overflow(low, span, &low)
                      : __builtin_add_overflow(high, span, &high))) {
            goto outside;
        }
    }
    const uintptr_t first = (uintptr_t)a->data, below = (uintptr_t)0 - (uintptr_t)low; /* low <= 0 */
    uintptr_t last;
    if (below > first || __builtin_add_overflow(first, (uintptr_t)high + (uintptr_t)(itemsize - 1), &last)) {
        goto outside;
    }
    return 0;
outside:
    return lab_raise_arg(PyExc_ValueError, label,
                         ": its data pointer, shape and strides reach outside the address space");
}

static int read_array(lab_state *state, PyObject *obj, const lab_arg_label *label, lab_array *array) {
    LAB_ASSERT_NO_ERROR();
    if (Py_IS_TYPE(obj, state->ArrayType)) {
        lab_array_object_describe((lab_array_object *)obj, array);
        return 0;
    }
    const DLPackExchangeAPI *api = NULL;
    if (lookup_exchange_api(state, obj, label, &api) < 0) return -1;
    if (api) {
        if (read_dlpack_exchange(api, obj, label, array) < 0) return -1;
        return check_address_range(array, label);
    }

    if (lab_read_cai(state, obj, label, array) < 0) return -1;
    return check_address_range(array, label);
}

/* The float8 types are read only where the caller asks for them: no kernel of lab's takes them. */
static int refuse_float8(const lab_array *array, const lab_arg_label *label) {
    if (!lab_dtype_is_float8(array->dtype)) return 0;
    return lab_raise_arg(PyExc_TypeError, label,
                         " is a %s array; lab reads float8 arrays only as lab.matmul's 'a' and 'b' (with "
                         "scale_a and scale_b) and writes them only as lab.cast_float8's outputs",
                         lab_dtype_names[array->dtype]);
}

int lab_read_array(lab_state *state, PyObject *obj, const char *func, const char *argname, lab_array *array) {
    const lab_arg_label label = {func, argname, -1};
    return read_array(state, obj, &label, array) < 0 ? -1 : refuse_float8(array, &label);
}

int lab_read_array_float8(lab_state *state, PyObject *obj, const char *func, const char *argname,
                          lab_array *array) {
    const lab_arg_label label = {func, argname, -1};
    return read_array(state, obj, &label, array);
}

int lab_read_array_item(lab_state *state, PyObject *obj, const char *func, const char *listname, int index,
                        lab_array *array) {
    const lab_arg_label label = {func, listname, index};
    return read_array(state, obj, &label, array) < 0 ? -1 : refuse_float8(array, &label);
}
