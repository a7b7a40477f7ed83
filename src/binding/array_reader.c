/* array_reader.c - reading a Python object into a lab_array (see array_reader.h).
 *
 * Two protocols, tried in this order:
 *  1. DLPack C exchange API: `type(obj).__dlpack_c_exchange_api__` is a PyCapsule named
 *     "dlpack_exchange_api" (or an int address) of a DLPackExchangeAPI. Looked up once per type and
 *     cached in the module state, negative answers too (a failed getattr costs an exception).
 *  2. __cuda_array_interface__ (Numba's spec, v0-v3): a dict with shape, typestr, data=(ptr,
 *     readonly), version, and optional strides (bytes), mask (must be None), stream (v3).
 * Every malformed input becomes a TypeError/ValueError that names the argument. */
#include "binding/array_reader.h"

#include <string.h>

#include "binding/protocol_dtypes.h"
#include "binding/runtime_types.h"

/* ---- the per-type exchange-API cache ---- */

static int api_from_attribute(PyObject *attr, const DLPackExchangeAPI **api) {
    void *pointer = NULL;
    if (PyCapsule_CheckExact(attr)) {
        pointer = PyCapsule_GetPointer(attr, "dlpack_exchange_api");
        if (!pointer) return -1;
    } else if (PyLong_Check(attr)) {
        pointer = PyLong_AsVoidPtr(attr);
        if (!pointer && PyErr_Occurred()) return -1;
    }
    const DLPackExchangeAPI *candidate = (const DLPackExchangeAPI *)pointer;
    /* Walk to a version lab understands (major 1); newer majors may chain older tables. */
    while (candidate && candidate->header.version.major != 1) {
        candidate = (const DLPackExchangeAPI *)candidate->header.prev_api;
    }
    if (candidate && (!candidate->dltensor_from_py_object_no_sync || !candidate->current_work_stream)) {
        candidate = NULL;
    }
    *api = candidate;
    return 0;
}

/* The exchange API of obj's type, or NULL. Returns -1 only on an unexpected error. */
static int lookup_exchange_api(lab_state *state, PyObject *obj, const DLPackExchangeAPI **api) {
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
    } else {
        int rc = api_from_attribute(attr, api);
        Py_DECREF(attr);
        if (rc < 0) return -1;
    }
    if (state->exchange_cache_len < LAB_EXCHANGE_CACHE_SIZE) {
        lab_exchange_cache_entry *entry = &state->exchange_cache[state->exchange_cache_len++];
        Py_INCREF(type);
        entry->type = type;
        entry->api = *api;
    }
    return 0;
}

int lab_has_array_protocol(lab_state *state, PyObject *obj) {
    if (Py_IS_TYPE(obj, state->ArrayType)) return 1;
    const DLPackExchangeAPI *api = NULL;
    if (lookup_exchange_api(state, obj, &api) < 0) {
        PyErr_Clear();
        api = NULL;
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
static int compute_numel(lab_array *array, const char *func, const char *argname) {
    int64_t numel = 1, bytes = 0;
    int empty = 0;
    for (int d = 0; d < array->ndim; d++) empty |= array->shape[d] == 0;
    /* Overflow-checked multiplies, not divisions: this runs for every array of every call (900 per
     * foreach_add over 300 tensors), and a 64-bit division costs tens of cycles. */
    for (int d = 0; !empty && d < array->ndim; d++) {
        if (__builtin_mul_overflow(numel, array->shape[d], &numel) ||
            __builtin_mul_overflow(numel, (int64_t)lab_dtype_itemsize[array->dtype], &bytes)) {
            PyErr_Format(PyExc_OverflowError,
                         "%s(): argument '%s' has a shape whose size in bytes overflows int64", func,
                         argname);
            return -1;
        }
    }
    array->numel = empty ? 0 : numel;
    return 0;
}

/* ---- DLPack exchange ---- */

static int read_dlpack_exchange(const DLPackExchangeAPI *api, PyObject *obj, const char *func,
                                const char *argname, lab_array *array) {
    DLTensor tensor;
    memset(&tensor, 0, sizeof tensor);
    if (api->dltensor_from_py_object_no_sync((void *)obj, &tensor) != 0) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument '%s': its DLPack exchange API failed without saying why", func,
                         argname);
        }
        return -1;
    }
    if (tensor.device.device_type != kDLCUDA && tensor.device.device_type != kDLCUDAManaged) {
        PyErr_Format(
            PyExc_TypeError,
            "%s(): argument '%s' must be a CUDA array, got a %s object on %s (DLPack device type %d)", func,
            argname, Py_TYPE(obj)->tp_name,
            tensor.device.device_type == kDLCPU ? "the CPU" : "a non-CUDA device",
            (int)tensor.device.device_type);
        return -1;
    }
    if (lab_dtype_from_dlpack(tensor.dtype, &array->dtype) < 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' has an unsupported dtype (DLPack code %d, %d bits, %d lanes); lab "
                     "supports %s",
                     func, argname, (int)tensor.dtype.code, (int)tensor.dtype.bits, (int)tensor.dtype.lanes,
                     lab_supported_dtypes_text(1));
        return -1;
    }
    if (tensor.ndim < 0 || tensor.ndim > LAB_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' has %d dimensions; lab supports at most %d", func,
                     argname, (int)tensor.ndim, LAB_MAX_DIMS);
        return -1;
    }
    array->ndim = tensor.ndim;
    for (int d = 0; d < tensor.ndim; d++) {
        if (tensor.shape[d] < 0) {
            PyErr_Format(PyExc_ValueError, "%s(): argument '%s' has a negative dimension", func, argname);
            return -1;
        }
        array->shape[d] = tensor.shape[d];
    }
    if (tensor.strides) {
        for (int d = 0; d < tensor.ndim; d++) array->strides[d] = tensor.strides[d];
    } else {
        lab_fill_contiguous_strides(array);
    }
    if (compute_numel(array, func, argname) < 0) return -1;
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

/* ---- __cuda_array_interface__ ---- */

/* A borrowed dict item, or NULL with *missing set; -1 on a real lookup error. */
static int dict_item(PyObject *dict, PyObject *key, PyObject **value) {
    *value = PyDict_GetItemWithError(dict, key);
    return (*value || !PyErr_Occurred()) ? 0 : -1;
}

/* A non-negative int64 from a Python int (bool and other index types are refused as shape items). */
static int read_int64(PyObject *item, int64_t *value) {
    if (!PyLong_Check(item)) return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -2;
    }
    *value = (int64_t)v;
    return 0;
}

static int read_cai_shape(PyObject *shape, const char *func, const char *argname, lab_array *array) {
    if (!PyTuple_Check(shape)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s': __cuda_array_interface__['shape'] must be a tuple of ints, got %s",
                     func, argname, Py_TYPE(shape)->tp_name);
        return -1;
    }
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    if (ndim > LAB_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' has %zd dimensions; lab supports at most %d",
                     func, argname, ndim, LAB_MAX_DIMS);
        return -1;
    }
    array->ndim = (int)ndim;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        PyObject *item = PyTuple_GET_ITEM(shape, d);
        int rc = read_int64(item, &array->shape[d]);
        if (rc == -1) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument '%s': __cuda_array_interface__['shape'][%zd] must be an int, got %s",
                         func, argname, d, Py_TYPE(item)->tp_name);
            return -1;
        }
        if (rc == -2 || array->shape[d] < 0) {
            PyErr_Format(
                PyExc_ValueError,
                "%s(): argument '%s': __cuda_array_interface__['shape'][%zd] = %R is not a valid size", func,
                argname, d, item);
            return -1;
        }
    }
    return 0;
}

static int read_cai_typestr(PyObject *typestr, const char *func, const char *argname, lab_array *array) {
    if (!PyUnicode_Check(typestr)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s': __cuda_array_interface__['typestr'] must be a str, got %s", func,
                     argname, Py_TYPE(typestr)->tp_name);
        return -1;
    }
    Py_ssize_t length;
    const char *text = PyUnicode_AsUTF8AndSize(typestr, &length);
    if (!text) return -1;
    switch (lab_parse_typestr(text, length, &array->dtype)) {
    case LAB_TYPESTR_OK: return 0;
    case LAB_TYPESTR_MALFORMED:
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument '%s': malformed typestr %R in __cuda_array_interface__ "
                     "(expected <byte order><kind><size>, e.g. '<f4')",
                     func, argname, typestr);
        return -1;
    case LAB_TYPESTR_BIG_ENDIAN:
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument '%s' is big-endian (typestr %R); lab needs native (little-endian) data",
                     func, argname, typestr);
        return -1;
    case LAB_TYPESTR_AMBIGUOUS:
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' has typestr %R, which __cuda_array_interface__ uses for bfloat16 "
                     "and for any other 2-byte type alike, so lab will not guess; pass a torch tensor (read "
                     "through its "
                     "DLPack exchange API, which names bfloat16) or another dtype",
                     func, argname, typestr);
        return -1;
    default:
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' has an unsupported dtype (typestr %R); lab supports %s", func,
                     argname, typestr, lab_supported_dtypes_text(1));
        return -1;
    }
}

static int read_cai_data(PyObject *data, int64_t numel, const char *func, const char *argname,
                         lab_array *array) {
    if (!PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2 || !PyLong_Check(PyTuple_GET_ITEM(data, 0))) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s': __cuda_array_interface__['data'] must be a tuple "
                     "(pointer: int, read_only: bool), got %R",
                     func, argname, data);
        return -1;
    }
    PyObject *pointer = PyTuple_GET_ITEM(data, 0);
    unsigned long long address = PyLong_AsUnsignedLongLong(pointer);
    if (address == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s': data pointer %R is not a valid address", func,
                     argname, pointer);
        return -1;
    }
    if (address == 0 && numel > 0) {
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' has a null data pointer but %lld elements", func,
                     argname, (long long)numel);
        return -1;
    }
    int readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
    if (readonly < 0) return -1;
    array->data = (char *)(uintptr_t)address;
    array->readonly = readonly;
    return 0;
}

static int read_cai_strides(PyObject *strides, const char *func, const char *argname, lab_array *array) {
    if (!strides || strides == Py_None) {
        lab_fill_contiguous_strides(array);
        return 0;
    }
    if (!PyTuple_Check(strides) || PyTuple_GET_SIZE(strides) != array->ndim) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument '%s': __cuda_array_interface__['strides'] must be None or a tuple "
                     "of %d ints, got %R",
                     func, argname, array->ndim, strides);
        return -1;
    }
    const int64_t itemsize = lab_dtype_itemsize[array->dtype];
    for (int d = 0; d < array->ndim; d++) {
        PyObject *item = PyTuple_GET_ITEM(strides, d);
        int64_t bytes;
        if (read_int64(item, &bytes) != 0) {
            PyErr_Format(PyExc_ValueError, "%s(): argument '%s': stride %R is not an int64", func, argname,
                         item);
            return -1;
        }
        if (bytes % itemsize != 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): argument '%s': stride of %lld bytes in dimension %d is not a multiple of "
                         "the item size (%lld bytes)",
                         func, argname, (long long)bytes, d, (long long)itemsize);
            return -1;
        }
        array->strides[d] = bytes / itemsize;
    }
    return 0;
}

static int read_cai_stream(PyObject *stream, const char *func, const char *argname, lab_array *array) {
    array->has_stream = 0;
    array->stream = 0;
    if (!stream || stream == Py_None) return 0;
    if (!PyLong_Check(stream)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s': __cuda_array_interface__['stream'] must be None or an int, got %s",
                     func, argname, Py_TYPE(stream)->tp_name);
        return -1;
    }
    unsigned long long handle = PyLong_AsUnsignedLongLong(stream);
    if (handle == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s': stream %R is not a valid handle", func, argname,
                     stream);
        return -1;
    }
    if (handle == 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument '%s': __cuda_array_interface__['stream'] is 0, which the protocol "
                     "forbids (1 means the legacy default stream, 2 the per-thread default stream)",
                     func, argname);
        return -1;
    }
    array->has_stream = 1;
    array->stream = (uintptr_t)handle;
    return 0;
}

static int read_cai_dict(lab_state *state, PyObject *cai, const char *func, const char *argname,
                         lab_array *array) {
    if (!PyDict_Check(cai)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s': __cuda_array_interface__ must be a dict, got %s",
                     func, argname, Py_TYPE(cai)->tp_name);
        return -1;
    }
    PyObject *shape, *typestr, *data, *version, *strides, *mask, *stream;
    if (dict_item(cai, LAB_NAME_OBJ(state, shape), &shape) < 0 ||
        dict_item(cai, LAB_NAME_OBJ(state, typestr), &typestr) < 0 ||
        dict_item(cai, LAB_NAME_OBJ(state, data), &data) < 0 ||
        dict_item(cai, LAB_NAME_OBJ(state, version), &version) < 0 ||
        dict_item(cai, LAB_NAME_OBJ(state, strides), &strides) < 0 ||
        dict_item(cai, LAB_NAME_OBJ(state, mask), &mask) < 0 ||
        dict_item(cai, LAB_NAME_OBJ(state, stream), &stream) < 0) {
        return -1;
    }
    const char *missing = !shape     ? "shape"
                          : !typestr ? "typestr"
                          : !data    ? "data"
                          : !version ? "version"
                                     : NULL;
    if (missing) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s': __cuda_array_interface__ has no '%s' key", func,
                     argname, missing);
        return -1;
    }
    if (!PyLong_Check(version) || PyLong_AsLong(version) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s': __cuda_array_interface__['version'] must be a non-negative int, "
                     "got %R",
                     func, argname, version);
        return -1;
    }
    if (mask && mask != Py_None) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument '%s' is a masked array (__cuda_array_interface__['mask'] is not None); "
                     "lab does not support masks",
                     func, argname);
        return -1;
    }
    if (read_cai_shape(shape, func, argname, array) < 0 ||
        read_cai_typestr(typestr, func, argname, array) < 0 || compute_numel(array, func, argname) < 0 ||
        read_cai_data(data, array->numel, func, argname, array) < 0 ||
        read_cai_strides(strides, func, argname, array) < 0 ||
        read_cai_stream(stream, func, argname, array) < 0) {
        return -1;
    }
    array->device = -1;
    array->source = LAB_SOURCE_CAI;
    array->exchange_api = NULL;
    array->stream_owner = NULL;
    array->last_use = NULL;
    return 0;
}

/* Every element's address must be representable: data + sum((shape - 1) * stride) over the
 * dimensions, each product and sum checked for overflow (a hand-written dict may say anything). */
static int check_address_range(const lab_array *a, const char *func, const char *argname) {
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
    PyErr_Format(PyExc_ValueError,
                 "%s(): argument '%s': its data pointer, shape and strides reach outside the address "
                 "space",
                 func, argname);
    return -1;
}

int lab_read_array(lab_state *state, PyObject *obj, const char *func, const char *argname, lab_array *array) {
    if (Py_IS_TYPE(obj, state->ArrayType)) {
        lab_array_object_describe((lab_array_object *)obj, array);
        return 0;
    }
    const DLPackExchangeAPI *api = NULL;
    if (lookup_exchange_api(state, obj, &api) < 0) return -1;
    if (api) {
        if (read_dlpack_exchange(api, obj, func, argname, array) < 0) return -1;
        return check_address_range(array, func, argname);
    }

    PyObject *cai = PyObject_GetAttr(obj, LAB_NAME_OBJ(state, cai));
    if (!cai) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1; /* the producer's own error, e.g. torch's */
        }
        PyErr_Clear();
        if (PyObject_HasAttrString(obj, "__array_interface__")) { /* NumPy and friends: host memory */
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument '%s' is a %s in host memory; lab computes on GPU arrays - copy it "
                         "to the GPU first, e.g. lab.asarray(x) (or torch.as_tensor(x, device='cuda'), "
                         "cupy.asarray(x))",
                         func, argname, Py_TYPE(obj)->tp_name);
            return -1;
        }
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a CUDA array (an object with __cuda_array_interface__ "
                     "or a DLPack C exchange API, e.g. a torch/CuPy/Numba/JAX GPU array), got %s",
                     func, argname, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int rc = read_cai_dict(state, cai, func, argname, array);
    Py_DECREF(cai);
    return rc < 0 ? rc : check_address_range(array, func, argname);
}
