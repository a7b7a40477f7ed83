/* cai_reader.c - reading __cuda_array_interface__ (Numba's spec, v0-v3) into a lab_array: a dict
 * with shape, typestr, data=(ptr, readonly), version, and optional strides (bytes), mask (must be
 * None), stream (v3). Every malformed value becomes a TypeError/ValueError naming the argument.
 *
 * Reading runs Python code that is not lab's - the property that builds the dict, the __bool__ of
 * the read-only flag - and that code may empty the dict lab is reading. So the dict's entries are
 * held as strong references for the whole read (take_entries), never borrowed across a call. */
#include <string.h>

#include "binding/protocol_dtypes.h"
#include "binding/protocol_reader.h"

/* ---- __cuda_array_interface__ ---- */

/* The protocol dict's entries, each a strong reference (NULL where the key is absent). Held for
 * the whole read: converting one entry can run Python (data[1].__bool__) that empties the dict,
 * and an entry borrowed from it would then be freed memory. */
typedef struct {
    PyObject *shape, *typestr, *data, *version, *strides, *mask, *stream;
} cai_entries;

static int take_entries(lab_state *state, PyObject *dict, cai_entries *e) {
    PyObject **slots[] = {&e->shape, &e->typestr, &e->data, &e->version, &e->strides, &e->mask, &e->stream};
    const lab_name keys[] = {LAB_NAME_shape,   LAB_NAME_typestr, LAB_NAME_data,  LAB_NAME_version,
                             LAB_NAME_strides, LAB_NAME_mask,    LAB_NAME_stream};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        /* The lookup itself may run a key's __eq__ (a str subclass in a hand-made dict); CPython
         * copes with the dict changing under it, and the reference is taken before anything else. */
        *slots[i] = Py_XNewRef(PyDict_GetItemWithError(dict, state->names[keys[i]]));
        if (!*slots[i] && PyErr_Occurred()) return -1;
    }
    return 0;
}

static void release_entries(cai_entries *e) {
    Py_XDECREF(e->shape);
    Py_XDECREF(e->typestr);
    Py_XDECREF(e->data);
    Py_XDECREF(e->version);
    Py_XDECREF(e->strides);
    Py_XDECREF(e->mask);
    Py_XDECREF(e->stream);
}

/* An int64 from an exact-or-subclass Python int (no __index__: shape and strides are ints by the
 * protocol). 0; -1 not an int; -2 out of int64's range. Runs no Python code. */
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

static int read_cai_shape(PyObject *shape, const lab_arg_label *label, lab_array *array) {
    if (!PyTuple_Check(shape)) {
        return lab_raise_arg(PyExc_TypeError, label,
                             ": __cuda_array_interface__['shape'] must be a tuple of ints, got %s",
                             Py_TYPE(shape)->tp_name);
    }
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    if (ndim > LAB_MAX_DIMS) {
        return lab_raise_arg(PyExc_ValueError, label, " has %zd dimensions; lab supports at most %d", ndim,
                             LAB_MAX_DIMS);
    }
    array->ndim = (int)ndim;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        PyObject *item = PyTuple_GET_ITEM(shape, d); /* the tuple is held: its items live */
        int rc = read_int64(item, &array->shape[d]);
        if (rc == -1) {
            return lab_raise_arg(PyExc_TypeError, label,
                                 ": __cuda_array_interface__['shape'][%zd] must be an int, got %s", d,
                                 Py_TYPE(item)->tp_name);
        }
        if (rc == -2 || array->shape[d] < 0) {
            return lab_raise_arg(PyExc_ValueError, label,
                                 ": __cuda_array_interface__['shape'][%zd] = %R is not a valid size", d,
                                 item);
        }
    }
    return 0;
}

static int read_cai_typestr(PyObject *typestr, const lab_arg_label *label, lab_array *array) {
    if (!PyUnicode_Check(typestr)) {
        return lab_raise_arg(PyExc_TypeError, label,
                             ": __cuda_array_interface__['typestr'] must be a str, got %s",
                             Py_TYPE(typestr)->tp_name);
    }
    Py_ssize_t length;
    const char *text = PyUnicode_AsUTF8AndSize(typestr, &length);
    if (!text) { /* a lone surrogate: no typestr of the protocol */
        PyErr_Clear();
        return lab_raise_arg(PyExc_ValueError, label,
                             ": malformed typestr %R in __cuda_array_interface__ (not encodable as UTF-8)",
                             typestr);
    }
    switch (lab_parse_typestr(text, length, &array->dtype)) {
    case LAB_TYPESTR_OK: return 0;
    case LAB_TYPESTR_MALFORMED:
        return lab_raise_arg(
            PyExc_ValueError, label,
            ": malformed typestr %R in __cuda_array_interface__ (expected <byte order><kind><size>, "
            "e.g. '<f4')",
            typestr);
    case LAB_TYPESTR_BIG_ENDIAN:
        return lab_raise_arg(PyExc_ValueError, label,
                             " is big-endian (typestr %R); lab needs native (little-endian) data", typestr);
    case LAB_TYPESTR_AMBIGUOUS:
        return lab_raise_arg(
            PyExc_TypeError, label,
            " has typestr %R, which __cuda_array_interface__ uses for bfloat16 and for any other "
            "2-byte type alike, so lab will not guess; pass a torch tensor (read through its DLPack "
            "exchange API, which names bfloat16) or another dtype",
            typestr);
    default:
        return lab_raise_arg(PyExc_TypeError, label,
                             " has an unsupported dtype (typestr %R); lab supports %s", typestr,
                             lab_supported_dtypes_text(1));
    }
}

static int read_cai_data(PyObject *data, int64_t numel, const lab_arg_label *label, lab_array *array) {
    if (!PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2 || !PyLong_Check(PyTuple_GET_ITEM(data, 0))) {
        return lab_raise_arg(
            PyExc_TypeError, label,
            ": __cuda_array_interface__['data'] must be a tuple (pointer: int, read_only: bool), "
            "got %R",
            data);
    }
    PyObject *pointer = PyTuple_GET_ITEM(data, 0);
    unsigned long long address = PyLong_AsUnsignedLongLong(pointer);
    if (address == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return lab_raise_arg(PyExc_ValueError, label, ": data pointer %R is not a valid address", pointer);
    }
    if (address == 0 && numel > 0) {
        return lab_raise_arg(PyExc_ValueError, label, " has a null data pointer but %lld elements",
                             (long long)numel);
    }
    /* The flag's __bool__ may run any Python code; the caller holds every entry of the dict. */
    int readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
    if (readonly < 0) return -1;
    array->data = (char *)(uintptr_t)address;
    array->readonly = readonly;
    return 0;
}

static int read_cai_strides(PyObject *strides, const lab_arg_label *label, lab_array *array) {
    if (!strides || strides == Py_None) {
        lab_fill_contiguous_strides(array);
        return 0;
    }
    if (!PyTuple_Check(strides) || PyTuple_GET_SIZE(strides) != array->ndim) {
        return lab_raise_arg(
            PyExc_ValueError, label,
            ": __cuda_array_interface__['strides'] must be None or a tuple of %d ints, got %R", array->ndim,
            strides);
    }
    const int64_t itemsize = lab_dtype_itemsize[array->dtype];
    for (int d = 0; d < array->ndim; d++) {
        PyObject *item = PyTuple_GET_ITEM(strides, d);
        int64_t bytes;
        if (read_int64(item, &bytes) != 0) {
            return lab_raise_arg(PyExc_ValueError, label, ": stride %R is not an int64", item);
        }
        if (bytes % itemsize != 0) {
            return lab_raise_arg(
                PyExc_ValueError, label,
                ": stride of %lld bytes in dimension %d is not a multiple of the item size (%lld "
                "bytes)",
                (long long)bytes, d, (long long)itemsize);
        }
        array->strides[d] = bytes / itemsize;
    }
    return 0;
}

static int read_cai_stream(PyObject *stream, const lab_arg_label *label, lab_array *array) {
    array->has_stream = 0;
    array->stream = 0;
    if (!stream || stream == Py_None) return 0;
    if (!PyLong_Check(stream)) {
        return lab_raise_arg(PyExc_TypeError, label,
                             ": __cuda_array_interface__['stream'] must be None or an int, got %s",
                             Py_TYPE(stream)->tp_name);
    }
    unsigned long long handle = PyLong_AsUnsignedLongLong(stream);
    if (handle == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return lab_raise_arg(PyExc_ValueError, label, ": stream %R is not a valid handle", stream);
    }
    if (handle == 0) {
        return lab_raise_arg(
            PyExc_ValueError, label,
            ": __cuda_array_interface__['stream'] is 0, which the protocol forbids (1 means the "
            "legacy default stream, 2 the per-thread default stream)");
    }
    array->has_stream = 1;
    array->stream = (uintptr_t)handle;
    return 0;
}

static int read_cai_entries(const cai_entries *e, const lab_arg_label *label, lab_array *array) {
    const char *missing = !e->shape     ? "shape"
                          : !e->typestr ? "typestr"
                          : !e->data    ? "data"
                          : !e->version ? "version"
                                        : NULL;
    if (missing) {
        return lab_raise_arg(PyExc_TypeError, label, ": __cuda_array_interface__ has no '%s' key", missing);
    }
    if (!PyLong_Check(e->version) || PyLong_AsLong(e->version) < 0) {
        PyErr_Clear();
        return lab_raise_arg(PyExc_TypeError, label,
                             ": __cuda_array_interface__['version'] must be a non-negative int, got %R",
                             e->version);
    }
    if (e->mask && e->mask != Py_None) {
        return lab_raise_arg(
            PyExc_ValueError, label,
            " is a masked array (__cuda_array_interface__['mask'] is not None); lab does not "
            "support masks");
    }
    if (read_cai_shape(e->shape, label, array) < 0 || read_cai_typestr(e->typestr, label, array) < 0 ||
        lab_compute_numel(array, label) < 0 || read_cai_data(e->data, array->numel, label, array) < 0 ||
        read_cai_strides(e->strides, label, array) < 0 || read_cai_stream(e->stream, label, array) < 0) {
        return -1;
    }
    array->device = -1;
    array->source = LAB_SOURCE_CAI;
    array->exchange_api = NULL;
    array->stream_owner = NULL;
    array->last_use = NULL;
    return 0;
}

static int read_cai_dict(lab_state *state, PyObject *cai, const lab_arg_label *label, lab_array *array) {
    if (!PyDict_Check(cai)) {
        return lab_raise_arg(PyExc_TypeError, label, ": __cuda_array_interface__ must be a dict, got %s",
                             Py_TYPE(cai)->tp_name);
    }
    cai_entries entries = {NULL};
    int rc = take_entries(state, cai, &entries);
    if (rc == 0) rc = read_cai_entries(&entries, label, array);
    release_entries(&entries);
    return rc;
}

int lab_read_cai(lab_state *state, PyObject *obj, const lab_arg_label *label, lab_array *array) {
    PyObject *cai = PyObject_GetAttr(obj, LAB_NAME_OBJ(state, cai));
    if (!cai) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1; /* the producer's own error, e.g. torch's */
        }
        PyErr_Clear();
        if (PyObject_HasAttrString(obj, "__array_interface__")) { /* NumPy and friends: host memory */
            return lab_raise_arg(
                PyExc_TypeError, label,
                " is a %s in host memory; lab computes on GPU arrays - copy it to the GPU first, "
                "e.g. lab.asarray(x) (or torch.as_tensor(x, device='cuda'), cupy.asarray(x))",
                Py_TYPE(obj)->tp_name);
        }
        return lab_raise_arg(
            PyExc_TypeError, label,
            " must be a CUDA array (an object with __cuda_array_interface__ or a DLPack C exchange "
            "API, e.g. a torch/CuPy/Numba/JAX GPU array), got %s",
            Py_TYPE(obj)->tp_name);
    }
    int rc = read_cai_dict(state, cai, label, array);
    Py_DECREF(cai);
    return rc;
}
