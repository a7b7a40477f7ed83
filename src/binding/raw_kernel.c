/* raw_kernel.c - launching a user's runtime-compiled kernel on anyone's arrays (level 2 for
 * dispatch/raw_kind.c; lab/_jit.py's RawKernel and RawModule are the Python face).
 *
 * Three private functions: _library_load(cubin or PTX) loads a library with the runtime API
 * (cudaLibraryLoadData: no driver-API linking), _library_kernel(library, name) finds a kernel in it
 * and asks the runtime for its parameter sizes, and _launch_kernel(handle, grid, block, args, ...)
 * turns each argument into the bytes of one kernel parameter - an array from any producer into its
 * device pointer, a number into the C type the signature or its own type says - and hands the
 * launch to the op driver, so a user's kernel follows lab's stream policy like every op. */
#include "binding/raw_kernel.h"

#include <math.h>
#include <string.h>

#include "binding/args.h"
#include "binding/array_reader.h"
#include "dispatch/cuda_error.h"
#include "dispatch/dtype.h"
#include "dispatch/raw_kind.h"

#define LIBRARY_CAPSULE "lab.kernel_library"
#define KERNEL_CAPSULE "lab.kernel"
#define MAX_KERNEL_ARGS 256

static void unload_library(PyObject *capsule) {
    cudaLibrary_t library = PyCapsule_GetPointer(capsule, LIBRARY_CAPSULE);
    if (library) cudaLibraryUnload(library); /* nothing to report to at collection time */
}

static PyObject *py_library_load(PyObject *module, PyObject *code) {
    Py_buffer view;
    if (PyObject_GetBuffer(code, &view, PyBUF_SIMPLE) < 0) return NULL;
    cudaLibrary_t library = NULL;
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = cudaLibraryLoadData(&library, view.buf, NULL, NULL, 0, NULL, NULL, 0);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&lab_get_state(module)->dispatch, err, "RawModule",
                                    "loading the compiled code (cudaLibraryLoadData)");
    }
    PyObject *capsule = PyCapsule_New(library, LIBRARY_CAPSULE, unload_library);
    if (!capsule) cudaLibraryUnload(library);
    return capsule;
}

static void release_kernel(PyObject *capsule) { Py_XDECREF((PyObject *)PyCapsule_GetContext(capsule)); }

/* The byte size of each parameter, as bytes (one per parameter, 255 for anything larger), or None
 * where the runtime cannot say. cudaFuncGetParamInfo answers an index past the last parameter with
 * cudaErrorInvalidValue, which it also leaves as the runtime's last error: cleared here, or the next
 * launch's check would report it. */
static PyObject *parameter_sizes(cudaKernel_t kernel) {
    unsigned char sizes[MAX_KERNEL_ARGS + 1];
    int count = 0;
    for (; count <= MAX_KERNEL_ARGS; count++) {
        size_t offset = 0, size = 0;
        if (cudaFuncGetParamInfo((const void *)kernel, (size_t)count, &offset, &size) != cudaSuccess) break;
        sizes[count] = (unsigned char)(size > 255 ? 255 : size);
    }
    cudaGetLastError();
    if (count > MAX_KERNEL_ARGS) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)sizes, count);
}

static PyObject *py_library_kernel(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_library_kernel(library, name: str)");
        return NULL;
    }
    cudaLibrary_t library = PyCapsule_GetPointer(args[0], LIBRARY_CAPSULE);
    const char *name = library ? PyUnicode_AsUTF8(args[1]) : NULL;
    if (!name) return NULL;
    cudaKernel_t kernel = NULL;
    const cudaError_t err = cudaLibraryGetKernel(&kernel, library, name);
    if (err != cudaSuccess) {
        cudaGetLastError();
        if (err == cudaErrorSymbolNotFound || err == cudaErrorInvalidDeviceFunction) {
            PyErr_Format(
                PyExc_ValueError,
                "RawModule: no kernel named '%s' in the compiled code - a kernel's name is its "
                "C++ mangled name unless it is declared extern \"C\" (or passed in name_expressions)",
                name);
            return NULL;
        }
        return lab_raise_cuda_error(&lab_get_state(module)->dispatch, err, "RawModule",
                                    "finding the kernel (cudaLibraryGetKernel)");
    }
    PyObject *capsule = PyCapsule_New(kernel, KERNEL_CAPSULE, release_kernel);
    if (!capsule) return NULL;
    Py_INCREF(args[0]); /* the kernel keeps its library loaded */
    if (PyCapsule_SetContext(capsule, args[0]) < 0) {
        Py_DECREF(args[0]);
        Py_DECREF(capsule);
        return NULL;
    }
    PyObject *sizes = parameter_sizes(kernel);
    if (!sizes) {
        Py_DECREF(capsule);
        return NULL;
    }
    return Py_BuildValue("(NN)", capsule, sizes);
}

/* ---- arguments: each becomes the bytes of one kernel parameter ---- */

typedef union {
    unsigned char bytes[8];
    double align; /* every scalar type fits, aligned for its own loads */
} parameter_bytes;

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

/* A Python number as the scalar type `letter` (the signature's). */
static int convert_number(PyObject *obj, char letter, const char *func, const char *where,
                          parameter_bytes *out) {
    if (!PyNumber_Check(obj) || PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a number for this scalar parameter, got %s", func, where,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (letter == 'f' || letter == 'd' || letter == 'e' || letter == 'E') {
        const double v = PyFloat_AsDouble(obj);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        const float f = (float)v;
        const uint16_t bits = letter == 'e' ? half_bits(f) : bfloat16_bits(f);
        if (letter == 'd') memcpy(out->bytes, &v, 8);
        if (letter == 'f') memcpy(out->bytes, &f, 4);
        if (letter == 'e' || letter == 'E') memcpy(out->bytes, &bits, 2);
        return 0;
    }
    if (letter == '?') {
        const int truth = PyObject_IsTrue(obj);
        if (truth < 0) return -1;
        out->bytes[0] = (unsigned char)truth;
        return 0;
    }
    if (PyFloat_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' is a float; this parameter is an integer", func,
                     where);
        return -1;
    }
    PyObject *index = PyNumber_Index(obj);
    if (!index) return -1;
    const int size = type_size(letter), bits = 8 * size;
    const int is_unsigned = letter == 'B' || letter == 'H' || letter == 'I' || letter == 'Q';
    int fits = 1;
    if (is_unsigned && size == 8) {
        const unsigned long long u = PyLong_AsUnsignedLongLong(index);
        fits = !(u == (unsigned long long)-1 && PyErr_Occurred());
        memcpy(out->bytes, &u, 8);
    } else {
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
        fits = overflow == 0 && !(v == -1 && PyErr_Occurred());
        if (fits && size < 8) {
            fits = is_unsigned ? v >= 0 && v < (1LL << bits)
                               : v >= -(1LL << (bits - 1)) && v < (1LL << (bits - 1));
        }
        if (fits && is_unsigned) fits = v >= 0;
        memcpy(out->bytes, &v, 8); /* little-endian: the low `size` bytes are the value */
    }
    Py_DECREF(index);
    if (!fits) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError,
                     "%s(): argument '%s' = %R does not fit the parameter's %d-bit %s integer", func, where,
                     obj, bits, is_unsigned ? "unsigned" : "signed");
        return -1;
    }
    return 0;
}

typedef struct {
    lab_state *state;
    const char *kernel_name;
    PyObject *const *items;
    int n;
    const unsigned char *sizes; /* the runtime's, or NULL */
    const char *signature;      /* 2 letters a parameter, or NULL */
    parameter_bytes *scalars;
    void **argv;
    lab_array *arrays;
    int n_arrays;
} marshalling;

/* Argument i without a signature: its own type decides - bool as bool, int as long long, float as
 * double, a NumPy scalar as its exact C type, an array as its device pointer. Returns its size. */
static int marshal_by_type(marshalling *m, int i, const char *where) {
    PyObject *obj = m->items[i];
    parameter_bytes *p = &m->scalars[i];
    m->argv[i] = p->bytes;
    if (PyBool_Check(obj)) {
        p->bytes[0] = obj == Py_True;
        return 1;
    }
    if (PyLong_Check(obj)) {
        const long long v = PyLong_AsLongLong(obj);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Format(PyExc_OverflowError,
                         "%s(): argument '%s' = %R does not fit a long long (the C type of a Python int)",
                         m->kernel_name, where, obj);
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
    lab_state *state = m->state;
    for (int k = 0; k < state->scalar_types_len; k++) { /* a NumPy scalar of a type seen before */
        if (state->scalar_types[k].type == Py_TYPE(obj)) {
            const char letter = state->scalar_types[k].letter;
            return convert_number(obj, letter, m->kernel_name, where, p) < 0 ? -1 : type_size(letter);
        }
    }
    if (lab_has_array_protocol(state, obj)) {
        lab_array *a = &m->arrays[m->n_arrays];
        if (lab_read_array(state, obj, m->kernel_name, where, a) < 0) return -1;
        m->argv[i] = &a->data;
        m->n_arrays++;
        return 8;
    }
    if (PyObject_CheckBuffer(obj)) { /* a NumPy scalar (or 0-d array): its bytes are its C value */
        Py_buffer view;
        if (PyObject_GetBuffer(obj, &view, PyBUF_FORMAT | PyBUF_ND) == 0) {
            const char *format = view.format ? view.format : "";
            if (*format && strchr("<=@!>", *format)) format++;
            const char letter = *format == 'l' ? 'q' : *format == 'L' ? 'Q' : *format;
            const int ok = view.ndim == 0 && format[0] && !format[1] && type_size(letter) == view.itemsize;
            if (ok) memcpy(p->bytes, view.buf, (size_t)view.itemsize);
            const int size = (int)view.itemsize;
            PyBuffer_Release(&view);
            /* remember scalar types (not 0-d arrays: a sequence type, whose dtype varies) */
            if (ok && PyNumber_Check(obj) && !PyObject_HasAttrString(obj, "__len__") &&
                state->scalar_types_len < LAB_SCALAR_TYPE_CACHE_SIZE) {
                state->scalar_types[state->scalar_types_len].type = (PyTypeObject *)Py_NewRef(Py_TYPE(obj));
                state->scalar_types[state->scalar_types_len++].letter = letter;
            }
            if (ok) return size;
        }
        PyErr_Clear();
    }
    PyErr_Format(
        PyExc_TypeError,
        "%s(): argument '%s' is a %s, which cannot be a kernel argument (CUDA arrays from any producer, "
        "NumPy scalars, int, float and bool can)",
        m->kernel_name, where, Py_TYPE(obj)->tp_name);
    return -1;
}

/* Argument i with the signature's parameter type. Returns its size. */
static int marshal_by_signature(marshalling *m, int i, const char *where) {
    PyObject *obj = m->items[i];
    const char kind = m->signature[2 * i], letter = m->signature[2 * i + 1];
    m->argv[i] = m->scalars[i].bytes;
    if (kind == 's') {
        const int converted = convert_number(obj, letter, m->kernel_name, where, &m->scalars[i]);
        return converted < 0 ? -1 : type_size(letter);
    }
    lab_array *a = &m->arrays[m->n_arrays];
    if (lab_read_array(m->state, obj, m->kernel_name, where, a) < 0) return -1;
    const int want = letter_dtype(letter);
    if (want >= 0 && (int)a->dtype != want) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' has dtype %s; the signature's parameter %d points to %s",
                     m->kernel_name, where, lab_dtype_names[a->dtype], i, lab_dtype_names[want]);
        return -1;
    }
    m->argv[i] = &a->data;
    m->n_arrays++;
    return 8;
}

static int read_dimensions(PyObject *obj, const char *kernel_name, const char *what, unsigned int dims[3]) {
    dims[0] = dims[1] = dims[2] = 1;
    PyObject *items[3] = {obj, NULL, NULL};
    Py_ssize_t n = 1;
    if (PyTuple_Check(obj) || PyList_Check(obj)) {
        n = PySequence_Size(obj);
        if (n < 1 || n > 3) {
            PyErr_Format(PyExc_ValueError, "%s(): argument '%s' must have 1 to 3 dimensions, got %zd",
                         kernel_name, what, n);
            return -1;
        }
        for (Py_ssize_t d = 0; d < n; d++) items[d] = PySequence_Fast_GET_ITEM(obj, d);
    }
    for (Py_ssize_t d = 0; d < n; d++) {
        if (PyBool_Check(items[d]) || !PyIndex_Check(items[d])) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument '%s' must be an int or a tuple of 1 to 3 ints, got %s", kernel_name,
                         what, Py_TYPE(items[d])->tp_name);
            return -1;
        }
        const Py_ssize_t v = PyNumber_AsSsize_t(items[d], NULL);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 1 || v > 0x7fffffff) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): argument '%s' sizes must be between 1 and 2^31 - 1, got %zd", kernel_name,
                         what, v);
            return -1;
        }
        dims[d] = (unsigned int)v;
    }
    return 0;
}

/* _launch_kernel(handle, grid, block, args, shared_mem, stream): handle is (kernel capsule, name,
 * parameter sizes or None, signature codes or None). */
static PyObject *py_launch_kernel(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 4) {
        PyErr_SetString(PyExc_TypeError, "_launch_kernel(handle, grid, block, args, shared_mem, stream)");
        return NULL;
    }
    lab_state *state = lab_get_state(module);
    PyObject *handle = args[0];
    const void *kernel = PyCapsule_GetPointer(PyTuple_GET_ITEM(handle, 0), KERNEL_CAPSULE);
    const char *name = kernel ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(handle, 1)) : NULL;
    if (!name) return NULL;
    PyObject *sizes_obj = PyTuple_GET_ITEM(handle, 2), *signature_obj = PyTuple_GET_ITEM(handle, 3);
    lab_raw_call description = {.kernel = kernel};
    if (read_dimensions(args[1], name, "grid", description.grid) < 0) return NULL;
    if (read_dimensions(args[2], name, "block", description.block) < 0) return NULL;
    if (!PyTuple_Check(args[3]) && !PyList_Check(args[3])) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'args' must be a tuple or list of the kernel's arguments, got %s", name,
                     Py_TYPE(args[3])->tp_name);
        return NULL;
    }
    const Py_ssize_t shared = PyNumber_AsSsize_t(args[4], PyExc_OverflowError);
    if (shared == -1 && PyErr_Occurred()) return NULL;
    if (shared < 0) {
        PyErr_Format(PyExc_ValueError, "%s(): argument 'shared_mem' must be >= 0 bytes, got %zd", name,
                     shared);
        return NULL;
    }
    description.shared_mem = (size_t)shared;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(args[3]);
    const Py_ssize_t n_params = sizes_obj != Py_None       ? PyBytes_GET_SIZE(sizes_obj)
                                : signature_obj != Py_None ? PyBytes_GET_SIZE(signature_obj) / 2
                                                           : n;
    if (n != n_params || n > MAX_KERNEL_ARGS) {
        PyErr_Format(PyExc_TypeError, "%s(): the kernel takes %zd arguments, got %zd", name, n_params, n);
        return NULL;
    }
    lab_array arrays_small[16];
    parameter_bytes scalars_small[16];
    void *argv_small[16];
    lab_array *arrays = arrays_small;
    parameter_bytes *scalars = scalars_small;
    void **argv = argv_small;
    if (n > 16) {
        arrays = PyMem_Malloc(sizeof(lab_array) * (size_t)n);
        scalars = PyMem_Malloc(sizeof(parameter_bytes) * (size_t)n);
        argv = PyMem_Malloc(sizeof(void *) * (size_t)n);
        if (!arrays || !scalars || !argv) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    marshalling m = {state,
                     name,
                     PySequence_Fast_ITEMS(args[3]),
                     (int)n,
                     sizes_obj != Py_None ? (const unsigned char *)PyBytes_AS_STRING(sizes_obj) : NULL,
                     signature_obj != Py_None ? PyBytes_AS_STRING(signature_obj) : NULL,
                     scalars,
                     argv,
                     arrays,
                     0};
    for (int i = 0; i < (int)n; i++) {
        char where[32];
        lab_indexed_name(where, sizeof where, "args", i);
        const int size = m.signature ? marshal_by_signature(&m, i, where) : marshal_by_type(&m, i, where);
        if (size < 0) goto fail;
        if (m.sizes && m.sizes[i] != size) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument '%s' passes %d bytes (a %s) but the kernel's parameter %d is %d "
                         "bytes - pass a NumPy "
                         "scalar of the parameter's type (numpy.int32(n)), or give RawKernel a signature=",
                         name, where, size, Py_TYPE(m.items[i])->tp_name, i, (int)m.sizes[i]);
            goto fail;
        }
    }
    description.argv = argv;
    PyOS_snprintf(description.step, sizeof description.step, "launching kernel '%s'", name);
    lab_op_call call = {.func = name, .description = &description};
    if (lab_parse_stream_arg(state, args[5] == Py_None ? NULL : args[5], name, &call.stream) < 0) goto fail;
    if (m.n_arrays > 0) lab_op_call_add(&call, "args", arrays, m.n_arrays, 1, 1);
    if (lab_run_op(&state->dispatch, &lab_raw_kind, &call) < 0) goto fail;
    if (n > 16) {
        PyMem_Free(arrays);
        PyMem_Free(scalars);
        PyMem_Free(argv);
    }
    Py_RETURN_NONE;
fail:
    if (n > 16) {
        PyMem_Free(arrays);
        PyMem_Free(scalars);
        PyMem_Free(argv);
    }
    return NULL;
}

PyMethodDef lab_raw_kernel_methods[] = {
    {"_library_load", (PyCFunction)py_library_load, METH_O,
     "_library_load(code: bytes) -> library\n--\n\nLoads a cubin or PTX with cudaLibraryLoadData "
     "(RawModule's)."},
    {"_library_kernel", (PyCFunction)(void (*)(void))py_library_kernel, METH_FASTCALL,
     "_library_kernel(library, name) -> (kernel, parameter sizes)\n--\n\nFinds a kernel in a loaded "
     "library."},
    {"_launch_kernel", (PyCFunction)(void (*)(void))py_launch_kernel, METH_FASTCALL,
     "_launch_kernel(handle, grid, block, args, shared_mem, stream)\n--\n\nLaunches a RawKernel (its "
     "__call__)."},
    {NULL, NULL, 0, NULL},
};
