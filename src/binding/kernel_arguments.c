/* kernel_arguments.c - turning a RawKernel call's Python arguments into kernel parameters (level 2,
 * for raw_kernel.c): each argument becomes the bytes of one parameter - an array from any producer
 * its device pointer, a number the C type the signature or its own type says - checked against the
 * kernel's parameter sizes where the runtime reported them, so a mismatch is a TypeError before
 * launch, never a kernel reading the wrong bytes. */
#include "binding/kernel_arguments.h"

#include <math.h>
#include <string.h>

#include "binding/array_reader.h"
#include "dispatch/dtype.h"

/* A signature's code for one parameter: '*' or 's', then the type letter (struct module's letters,
 * 'E' for bfloat16, 'v' for void). */
static int type_size(char letter) {
    switch (letter) {
    case 'b':
    case 'B':
    case '?': return 1;
    case 'h':
    case 'H':
    case 'e':
    case 'E': return 2;
    case 'i':
    case 'I':
    case 'f': return 4;
    case 'q':
    case 'Q':
    case 'd': return 8;
    default: return 0;
    }
}

static int letter_dtype(char letter) {
    switch (letter) {
    case 'e': return LAB_FLOAT16;
    case 'E': return LAB_BFLOAT16;
    case 'f': return LAB_FLOAT32;
    case 'd': return LAB_FLOAT64;
    case 'b': return LAB_INT8;
    case 'h': return LAB_INT16;
    case 'i': return LAB_INT32;
    case 'q': return LAB_INT64;
    case 'B': return LAB_UINT8;
    default: return -1; /* void*: any dtype */
    }
}

/* IEEE binary16 and bfloat16 bits of a float, rounding to nearest even (as the hardware does). */
static uint16_t half_bits(float value) {
    uint32_t f;
    memcpy(&f, &value, 4);
    const uint32_t sign = (f >> 16) & 0x8000u;
    const uint32_t magnitude = f & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow: inf */
    if (magnitude < 0x38800000u) {                                   /* subnormal or zero */
        const float scaled = fabsf(value) * 16777216.0f;             /* units of 2^-24 */
        return (uint16_t)(sign | (uint32_t)nearbyintf(scaled));
    }
    const uint32_t rounded = magnitude + 0x0fffu + ((magnitude >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}
static uint16_t bfloat16_bits(float value) {
    uint32_t f;
    memcpy(&f, &value, 4);
    if ((f & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((f >> 16) | 0x40u); /* NaN stays NaN */
    return (uint16_t)((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

int lab_convert_number(PyObject *obj, char letter, const char *func, const char *argname, int index,
                       lab_parameter_bytes *out) {
    char name[64];
    if (!PyNumber_Check(obj) || PyUnicode_Check(obj)) {
        lab_indexed_name(name, sizeof name, argname, index);
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a number for this scalar parameter, got %s", func, name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (letter == 'f' || letter == 'd' || letter == 'e' || letter == 'E') {
        const double v = PyFloat_AsDouble(obj);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        if (letter == 'd') {
            memcpy(out->bytes, &v, 8);
        } else if (letter == 'f') {
            const float f = (float)v;
            memcpy(out->bytes, &f, 4);
        } else {
            const uint16_t bits = letter == 'e' ? half_bits((float)v) : bfloat16_bits((float)v);
            memcpy(out->bytes, &bits, 2);
        }
        return 0;
    }
    if (letter == '?') {
        const int truth = PyObject_IsTrue(obj);
        if (truth < 0) return -1;
        out->bytes[0] = (unsigned char)truth;
        return 0;
    }
    if (PyFloat_Check(obj)) {
        lab_indexed_name(name, sizeof name, argname, index);
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' is a float; this parameter is an integer", func,
                     name);
        return -1;
    }
    PyObject *as_int = PyNumber_Index(obj);
    if (!as_int) return -1;
    const int size = type_size(letter), bits = 8 * size;
    const int is_unsigned = letter == 'B' || letter == 'H' || letter == 'I' || letter == 'Q';
    int fits = 1;
    if (is_unsigned && size == 8) {
        const unsigned long long u = PyLong_AsUnsignedLongLong(as_int);
        fits = !(u == (unsigned long long)-1 && PyErr_Occurred());
        memcpy(out->bytes, &u, 8);
    } else {
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(as_int, &overflow);
        fits = overflow == 0 && !(v == -1 && PyErr_Occurred());
        if (fits && size < 8) {
            fits = is_unsigned ? v >= 0 && v < (1LL << bits)
                               : v >= -(1LL << (bits - 1)) && v < (1LL << (bits - 1));
        }
        if (fits && is_unsigned) fits = v >= 0;
        memcpy(out->bytes, &v, 8); /* little-endian: the low `size` bytes are the value */
    }
    Py_DECREF(as_int);
    if (!fits) {
        PyErr_Clear();
        lab_indexed_name(name, sizeof name, argname, index);
        PyErr_Format(PyExc_OverflowError,
                     "%s(): argument '%s' = %R does not fit the parameter's %d-bit %s integer", func, name,
                     obj, bits, is_unsigned ? "unsigned" : "signed");
        return -1;
    }
    return 0;
}

char lab_numpy_scalar_letter(lab_state *state, PyObject *obj) {
    for (int k = 0; k < state->scalar_types_len; k++) { /* a type seen before */
        if (state->scalar_types[k].type == Py_TYPE(obj)) return state->scalar_types[k].letter;
    }
    if (!PyObject_CheckBuffer(obj) || !PyNumber_Check(obj)) return 0;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_FORMAT | PyBUF_ND) < 0) {
        PyErr_Clear();
        return 0;
    }
    const char *format = view.format ? view.format : "";
    if (*format && strchr("<=@!>", *format)) format++;
    const char letter = *format == 'l' ? 'q' : *format == 'L' ? 'Q' : *format;
    const int ok = view.ndim == 0 && format[0] && !format[1] && type_size(letter) == view.itemsize;
    PyBuffer_Release(&view);
    if (!ok) return 0;
    /* remember scalar types (not 0-d arrays: a sequence type, whose dtype varies) */
    if (!PyObject_HasAttrString(obj, "__len__") && state->scalar_types_len < LAB_SCALAR_TYPE_CACHE_SIZE) {
        state->scalar_types[state->scalar_types_len].type = (PyTypeObject *)Py_NewRef(Py_TYPE(obj));
        state->scalar_types[state->scalar_types_len++].letter = letter;
    }
    return letter;
}

typedef struct {
    lab_state *state;
    const char *kernel_name;
    PyObject *const *items;
    int n;
    const unsigned char *sizes; /* the runtime's, or NULL */
    const char *signature;      /* 2 letters a parameter, or NULL */
    lab_parameter_bytes *scalars;
    void **argv;
    lab_array *arrays;
    int n_arrays;
    const lab_array *placeholders;
    int n_placeholders;
} marshalling;

/* Argument i as an array: a placeholder's copy for None (when placeholders were given), else the
 * array it is; messages name it "args[3]". */
static int read_array_argument(marshalling *m, PyObject *obj, int i, lab_array *a) {
    if (!m->placeholders) return lab_read_array_item(m->state, obj, m->kernel_name, "args", i, a);
    if (obj != Py_None) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'args[%d]' must be None (a buffer) or a number here, got %s",
                     m->kernel_name, i, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (m->n_arrays >= m->n_placeholders) {
        PyErr_Format(PyExc_ValueError, "%s(): argument 'args[%d]' is a buffer beyond the %d given",
                     m->kernel_name, i, m->n_placeholders);
        return -1;
    }
    *a = m->placeholders[m->n_arrays];
    return 0;
}

/* Argument i without a signature: its own type decides - bool as bool, int as long long, float as
 * double, a NumPy scalar as its exact C type, an array as its device pointer. Returns its size. */
static int marshal_by_type(marshalling *m, int i) {
    PyObject *obj = m->items[i];
    lab_parameter_bytes *p = &m->scalars[i];
    m->argv[i] = p->bytes;
    if (PyBool_Check(obj)) {
        p->bytes[0] = obj == Py_True;
        return 1;
    }
    if (PyLong_Check(obj)) {
        const long long v = PyLong_AsLongLong(obj);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Format(
                PyExc_OverflowError,
                "%s(): argument 'args[%d]' = %R does not fit a long long (the C type of a Python int)",
                m->kernel_name, i, obj);
            return -1;
        }
        memcpy(p->bytes, &v, 8);
        return 8;
    }
    if (PyFloat_Check(obj)) {
        const double v = PyFloat_AS_DOUBLE(obj);
        memcpy(p->bytes, &v, 8);
        return 8;
    }
    const char letter = lab_numpy_scalar_letter(m->state, obj); /* its exact C type */
    if (letter) {
        return lab_convert_number(obj, letter, m->kernel_name, "args", i, p) < 0 ? -1 : type_size(letter);
    }
    if (lab_has_array_protocol(m->state, obj) || (obj == Py_None && m->placeholders)) {
        lab_array *a = &m->arrays[m->n_arrays];
        if (read_array_argument(m, obj, i, a) < 0) return -1;
        m->argv[i] = &a->data;
        m->n_arrays++;
        return 8;
    }
    PyErr_Format(PyExc_TypeError,
                 "%s(): argument 'args[%d]' is a %s, which cannot be a kernel argument (CUDA arrays from any "
                 "producer, "
                 "NumPy scalars, int, float and bool can)",
                 m->kernel_name, i, Py_TYPE(obj)->tp_name);
    return -1;
}

/* Argument i with the signature's parameter type. Returns its size. */
static int marshal_by_signature(marshalling *m, int i) {
    PyObject *obj = m->items[i];
    const char kind = m->signature[2 * i], letter = m->signature[2 * i + 1];
    m->argv[i] = m->scalars[i].bytes;
    if (kind == 's') {
        const int converted = lab_convert_number(obj, letter, m->kernel_name, "args", i, &m->scalars[i]);
        return converted < 0 ? -1 : type_size(letter);
    }
    lab_array *a = &m->arrays[m->n_arrays];
    if (read_array_argument(m, obj, i, a) < 0) return -1;
    const int want = letter_dtype(letter);
    if (want >= 0 && (int)a->dtype != want) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'args[%d]' has dtype %s; the signature's parameter %d points to %s",
                     m->kernel_name, i, lab_dtype_names[a->dtype], i, lab_dtype_names[want]);
        return -1;
    }
    m->argv[i] = &a->data;
    m->n_arrays++;
    return 8;
}

int lab_read_launch_dimensions(PyObject *obj, const char *kernel_name, const char *what,
                               unsigned int dims[3]) {
    dims[0] = dims[1] = dims[2] = 1;
    /* A tuple snapshot: an item's __index__ may change a list while it is read. */
    PyObject *items = PyTuple_Check(obj) || PyList_Check(obj) ? PySequence_Tuple(obj) : PyTuple_Pack(1, obj);
    if (!items) return -1;
    const Py_ssize_t n = PyTuple_GET_SIZE(items);
    int rc = -1;
    if (n < 1 || n > 3) {
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' must have 1 to 3 dimensions, got %zd",
                     kernel_name, what, n);
        goto done;
    }
    for (Py_ssize_t d = 0; d < n; d++) {
        PyObject *item = PyTuple_GET_ITEM(items, d);
        if (PyBool_Check(item) || !PyIndex_Check(item)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument '%s' must be an int or a tuple of 1 to 3 ints, got %s", kernel_name,
                         what, Py_TYPE(item)->tp_name);
            goto done;
        }
        const Py_ssize_t v = PyNumber_AsSsize_t(item, NULL); /* clamped: too large is out of range */
        if (v == -1 && PyErr_Occurred()) goto done;
        if (v < 1 || v > 0x7fffffff) {
            PyErr_Format(PyExc_ValueError, "%s(): argument '%s' sizes must be between 1 and 2^31 - 1, got %R",
                         kernel_name, what, item);
            goto done;
        }
        dims[d] = (unsigned int)v;
    }
    rc = 0;
done:
    Py_DECREF(items);
    return rc;
}

int lab_marshal_kernel_args(lab_state *state, const char *name, PyObject *args, const unsigned char *sizes,
                            Py_ssize_t n_params, const char *signature, const lab_array *placeholders,
                            int n_placeholders, lab_kernel_args *out) {
    out->n = 0;
    out->n_arrays = 0;
    out->items = NULL;
    out->arrays = out->arrays_inline;
    out->scalars = out->scalars_inline;
    out->argv = out->argv_inline;
    if (!PyTuple_Check(args) && !PyList_Check(args)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'args' must be a tuple or list of the kernel's arguments, got %s", name,
                     Py_TYPE(args)->tp_name);
        return -1;
    }
    out->items = PySequence_Tuple(args); /* a tuple passes through as it is */
    if (!out->items) return -1;
    const Py_ssize_t n = PyTuple_GET_SIZE(out->items);
    if (n_params < 0) n_params = n; /* neither the runtime nor a signature said */
    if (n != n_params || n > LAB_MAX_KERNEL_ARGS) {
        PyErr_Format(PyExc_TypeError, "%s(): the kernel takes %zd arguments, got %zd", name, n_params, n);
        return -1;
    }
    if (n > LAB_KERNEL_ARGS_INLINE) {
        out->arrays = PyMem_Malloc(sizeof(lab_array) * (size_t)n);
        out->scalars = PyMem_Malloc(sizeof(lab_parameter_bytes) * (size_t)n);
        out->argv = PyMem_Malloc(sizeof(void *) * (size_t)n);
        out->n = (int)n; /* lab_kernel_args_release frees them from here on */
        if (!out->arrays || !out->scalars || !out->argv) {
            PyErr_NoMemory();
            return -1;
        }
    }
    out->n = (int)n;
    marshalling m = {state,
                     name,
                     PySequence_Fast_ITEMS(out->items),
                     (int)n,
                     sizes,
                     signature,
                     out->scalars,
                     out->argv,
                     out->arrays,
                     0,
                     placeholders,
                     n_placeholders};
    for (int i = 0; i < (int)n; i++) {
        const int size = m.signature ? marshal_by_signature(&m, i) : marshal_by_type(&m, i);
        out->n_arrays = m.n_arrays;
        if (size < 0) return -1;
        if (m.sizes && m.sizes[i] != size) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument 'args[%d]' passes %d bytes (a %s) but the kernel's parameter %d is "
                         "%d bytes - "
                         "pass a NumPy scalar of the parameter's type (numpy.int32(n)), or give RawKernel a "
                         "signature=",
                         name, i, size, Py_TYPE(m.items[i])->tp_name, i, (int)m.sizes[i]);
            return -1;
        }
    }
    if (placeholders && out->n_arrays != n_placeholders) {
        PyErr_Format(PyExc_TypeError, "%s(): %d buffers given, %d of the arguments take one", name,
                     n_placeholders, out->n_arrays);
        return -1;
    }
    return 0;
}

void lab_kernel_args_release(lab_kernel_args *args) {
    Py_CLEAR(args->items);
    if (args->n > LAB_KERNEL_ARGS_INLINE) {
        PyMem_Free(args->arrays);
        PyMem_Free(args->scalars);
        PyMem_Free(args->argv);
    }
}
