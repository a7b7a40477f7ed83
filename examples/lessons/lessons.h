/* lessons.h - what the lessons share, so that each lesson's own file holds only its one new idea:
 * the kernels' launchers (lessons_kernels.cu), the reading of a vector's __cuda_array_interface__,
 * and a keyword-argument parser. Lesson 1 explains the parser, lesson 3 the reader.
 *
 * The reader differs from minimal.c's in two ways. It takes each dict entry as a strong reference
 * before converting anything: converting a number can run Python code (an int subclass's
 * __index__), and Python code can empty the dict and free what a borrowed reference points at (the
 * rule of docs/tour.md section 4; lab's src/binding/cai_reader.c does the same). And it reads what
 * minimal.c refuses: float64 as well as float32, and a stride (a view such as x[::2] or x[::-1]). */
#ifndef LESSONS_H
#define LESSONS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* From lessons_kernels.cu: plain C, no Python. They return a cudaError_t as int (0 = success). */
int lessons_launch_add_f32(float *out, const float *a, const float *b, long long n, void *stream,
                           const char **error);
int lessons_launch_add_strided(int is_double, void *out, const void *a, const void *b, long long n,
                               long long so, long long sa, long long sb, void *stream, const char **error);

typedef struct {
    char *data;
    long long n, stride; /* elements, and elements from one to the next */
    int is_double;       /* float64, else float32 */
    int readonly;
    void *stream; /* the CAI v3 stream the producer declared, NULL for none */
} vector;

/* The entries of a CAI dict that the reader uses, each a strong reference or NULL. */
enum { CAI_SHAPE, CAI_TYPESTR, CAI_DATA, CAI_STRIDES, CAI_STREAM, CAI_ENTRIES };

static int take_entries(PyObject *cai, PyObject **entries) {
    static const char *keys[CAI_ENTRIES] = {"shape", "typestr", "data", "strides", "stream"};
    for (int i = 0; i < CAI_ENTRIES; i++) {
        PyObject *key = PyUnicode_FromString(keys[i]);
        PyObject *item = key ? PyDict_GetItemWithError(cai, key) : NULL; /* borrowed ... */
        Py_XDECREF(key);
        if (!item && PyErr_Occurred()) return -1;
        entries[i] = Py_XNewRef(item); /* ... and owned before anything else can run */
    }
    return 0;
}

static long long read_int(PyObject *obj, const char *func, const char *name, const char *what) {
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): '%s' has a malformed %s (not an int)", func, name, what);
        return -1;
    }
    return PyLong_AsLongLong(obj);
}

/* Reads obj.__cuda_array_interface__ as a 1-D float32 or float64 vector, any stride. 0, or -1 with
 * an exception naming `name`. */
static int read_vector(PyObject *obj, const char *func, const char *name, vector *v) {
    PyObject *cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
    if (!cai) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1; /* the property raised: keep that */
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): '%s' must be a CUDA array, got %s", func, name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *e[CAI_ENTRIES] = {NULL};
    int rc = -1;
    if (!PyDict_Check(cai)) {
        PyErr_Format(PyExc_TypeError, "%s(): '%s'.__cuda_array_interface__ is not a dict", func, name);
        goto done;
    }
    if (take_entries(cai, e) < 0) goto done;
    const char *type =
        e[CAI_TYPESTR] && PyUnicode_Check(e[CAI_TYPESTR]) ? PyUnicode_AsUTF8(e[CAI_TYPESTR]) : NULL;
    if (!type || (strcmp(type, "<f4") != 0 && strcmp(type, "<f8") != 0)) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "%s(): '%s' must hold float32 or float64 ('<f4', '<f8'), got %R",
                         func, name, e[CAI_TYPESTR] ? e[CAI_TYPESTR] : Py_None);
        }
        goto done;
    }
    v->is_double = type[2] == '8';
    const long long itemsize = v->is_double ? 8 : 4;
    if (!e[CAI_SHAPE] || !PyTuple_Check(e[CAI_SHAPE]) || PyTuple_GET_SIZE(e[CAI_SHAPE]) != 1) {
        PyErr_Format(PyExc_ValueError, "%s(): '%s' must be 1-dimensional, got shape %R", func, name,
                     e[CAI_SHAPE] ? e[CAI_SHAPE] : Py_None);
        goto done;
    }
    v->n = read_int(PyTuple_GET_ITEM(e[CAI_SHAPE], 0), func, name, "shape");
    if (v->n == -1 && PyErr_Occurred()) goto done;
    v->stride = 1; /* strides None: C-contiguous */
    if (e[CAI_STRIDES] && e[CAI_STRIDES] != Py_None) {
        if (!PyTuple_Check(e[CAI_STRIDES]) || PyTuple_GET_SIZE(e[CAI_STRIDES]) != 1) {
            PyErr_Format(PyExc_ValueError, "%s(): '%s' has strides %R; a vector has one", func, name,
                         e[CAI_STRIDES]);
            goto done;
        }
        const long long bytes = read_int(PyTuple_GET_ITEM(e[CAI_STRIDES], 0), func, name, "strides");
        if (bytes == -1 && PyErr_Occurred()) goto done;
        if (bytes % itemsize != 0) { /* CAI strides are in bytes; the kernel steps whole elements */
            PyErr_Format(PyExc_ValueError,
                         "%s(): '%s' has a stride of %lld bytes, not a whole number of elements", func, name,
                         bytes);
            goto done;
        }
        v->stride = bytes / itemsize;
    }
    if (!e[CAI_DATA] || !PyTuple_Check(e[CAI_DATA]) || PyTuple_GET_SIZE(e[CAI_DATA]) != 2) {
        PyErr_Format(PyExc_TypeError, "%s(): '%s' has a malformed 'data' entry", func, name);
        goto done;
    }
    v->data = (char *)PyLong_AsVoidPtr(PyTuple_GET_ITEM(e[CAI_DATA], 0));
    if (PyErr_Occurred()) goto done;
    v->readonly = PyObject_IsTrue(PyTuple_GET_ITEM(e[CAI_DATA], 1)); /* may run __bool__: we own the tuple */
    if (v->readonly < 0) goto done;
    v->stream = e[CAI_STREAM] && e[CAI_STREAM] != Py_None ? PyLong_AsVoidPtr(e[CAI_STREAM]) : NULL;
    if (PyErr_Occurred()) goto done;
    rc = 0;
done:
    for (int i = 0; i < CAI_ENTRIES; i++) Py_XDECREF(e[i]);
    Py_DECREF(cai);
    return rc;
}

/* Reads one argument as a vector: read_vector, or a lesson's own reader (lesson 6 tries DLPack first). */
typedef int (*vector_reader)(PyObject *obj, const char *func, const char *name, vector *v);

/* out, a and b read as one call's vectors by `read`: one dtype, one length, out writable. */
static int read_add_operands_with(vector_reader read, PyObject *const *objs, const char *func, vector *a,
                                  vector *b, vector *out) {
    if (read(objs[0], func, "a", a) < 0 || read(objs[1], func, "b", b) < 0 ||
        read(objs[2], func, "out", out) < 0) {
        return -1;
    }
    if (out->readonly) {
        PyErr_Format(PyExc_ValueError, "%s(): 'out' is read-only", func);
        return -1;
    }
    if (a->is_double != out->is_double || b->is_double != out->is_double) {
        PyErr_Format(PyExc_TypeError, "%s(): 'a', 'b' and 'out' must have one dtype", func);
        return -1;
    }
    if (a->n != out->n || b->n != out->n) {
        PyErr_Format(PyExc_ValueError, "%s(): the vectors differ in length (%lld, %lld, %lld)", func, a->n,
                     b->n, out->n);
        return -1;
    }
    return 0;
}

static int read_add_operands(PyObject *const *objs, const char *func, vector *a, vector *b, vector *out) {
    return read_add_operands_with(read_vector, objs, func, a, b, out);
}

/* Fills slots[0 .. n_params) from positional args and keyword arguments, matched against `names`
 * (interned strings, compared by pointer first; lesson 1 explains why). Parameters past
 * n_positional are keyword-only; those past n_required may be left out (slot NULL). Borrowed
 * references: the caller's args outlive the call. 0, or -1 with a TypeError naming the problem. */
static int parse_args(const char *func, PyObject *const *names, int n_required, int n_positional,
                      int n_params, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      PyObject **slots) {
    if (nargs > n_positional) {
        PyErr_Format(PyExc_TypeError, "%s() takes %d positional arguments but %zd were given", func,
                     n_positional, nargs);
        return -1;
    }
    for (int i = 0; i < n_params; i++) slots[i] = i < nargs ? args[i] : NULL;
    const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int found = -1;
        for (int i = 0; i < n_params && found < 0; i++) {
            if (key == names[i]) found = i; /* the common case: Python interns keyword names too */
        }
        for (int i = 0; i < n_params && found < 0; i++) {
            const int equal = PyUnicode_Compare(key, names[i]) == 0; /* a str built at run time */
            if (PyErr_Occurred()) return -1;
            if (equal) found = i;
        }
        if (found < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", func, key);
            return -1;
        }
        if (slots[found]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument %R", func, names[found]);
            return -1;
        }
        slots[found] = args[nargs + k]; /* keyword values follow the positional ones */
    }
    for (int i = 0; i < n_required; i++) {
        if (!slots[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument %R", func, names[i]);
            return -1;
        }
    }
    return 0;
}

/* stream=: None (the output's producer's stream) or an int, a cudaStream_t handle. */
static int read_stream(PyObject *obj, const char *func, void **stream) {
    if (!obj || obj == Py_None) return 0;
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): 'stream' must be None or an int (a cudaStream_t), got %s", func,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *stream = PyLong_AsVoidPtr(obj);
    return PyErr_Occurred() ? -1 : 0;
}

/* The stream to launch on: CAI's 1 means the legacy default stream, NULL to the runtime. */
static void *launch_stream(void *stream) { return stream == (void *)1 ? NULL : stream; }

/* out = a + b on out's producer's stream; out_obj (a new reference), or NULL with a RuntimeError. */
static PyObject *add_on_outs_stream(PyObject *out_obj, const vector *a, const vector *b, const vector *out) {
    const char *error = NULL;
    if (lessons_launch_add_strided(out->is_double, out->data, a->data, b->data, out->n, out->stride,
                                   a->stride, b->stride, launch_stream(out->stream), &error) != 0) {
        return PyErr_Format(PyExc_RuntimeError, "add(): CUDA error: %s", error);
    }
    return Py_NewRef(out_obj);
}

/* add(a, b, out, *, stream) once parsed (slots: a, b, out, stream): the stream option first, then
 * the arrays (options may run Python; arrays are read last), then the launch - on the given stream,
 * else on out's producer's. 0 launched, 1 the launch failed (*err, *error say how), -1 a Python
 * exception. */
static int read_and_add(PyObject *const *slots, const char *func, int *err, const char **error) {
    void *stream = NULL;
    if (read_stream(slots[3], func, &stream) < 0) return -1;
    vector a, b, out;
    if (read_add_operands(slots, func, &a, &b, &out) < 0) return -1;
    if (!slots[3] || slots[3] == Py_None) stream = out.stream; /* stream=None is the same as none given */
    *err = lessons_launch_add_strided(out.is_double, out.data, a.data, b.data, out.n, out.stride, a.stride,
                                      b.stride, launch_stream(stream), error);
    return *err != 0;
}

#endif
