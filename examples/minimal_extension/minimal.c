/* minimal.c - the smallest correct CUDA extension: minimal.add(a, b, out) for float32 vectors.
 *
 * A first lesson before lab itself (which does all of this at scale): one method table, one module
 * definition, one function that reads three __cuda_array_interface__ dicts, checks them, and calls a
 * kernel launcher compiled by nvcc (add_kernel.cu). Every error is a Python exception; every
 * reference taken is released on every path, and none is borrowed across Python code. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* From add_kernel.cu: plain C, no Python. Returns a cudaError_t as int (0 = success). */
int minimal_launch_add(float *out, const float *a, const float *b, long long n, void *stream, const char **error);

typedef struct {
    float *data;
    long long n;
    void *stream; /* the CAI v3 stream the producer declared, NULL for none */
} vector;

/* A strong reference to dict[key], or NULL where the key is missing. Strong, because what follows
 * runs Python code (the read-only flag's __bool__) that may empty the dict: a borrowed reference
 * from PyDict_GetItemString would then point at freed memory (docs/tour.md, section 4). */
static PyObject *entry(PyObject *dict, const char *key) {
    PyObject *value = PyDict_GetItemString(dict, key);
    Py_XINCREF(value); /* before anything else can run */
    return value;
}

/* Reads obj.__cuda_array_interface__ as a contiguous 1-D float32 vector. 0, or -1 with an exception. */
static int read_vector(PyObject *obj, const char *name, int writable, vector *v) {
    PyObject *cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
    if (!cai) {
        PyErr_Format(PyExc_TypeError, "add(): '%s' must be a CUDA array, got %s", name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int rc = -1;
    PyObject *shape = NULL, *typestr = NULL, *data = NULL, *strides = NULL, *stream = NULL;
    if (!PyDict_Check(cai)) {
        PyErr_Format(PyExc_TypeError, "add(): '%s'.__cuda_array_interface__ is not a dict", name);
        goto done;
    }
    shape = entry(cai, "shape");
    typestr = entry(cai, "typestr");
    data = entry(cai, "data");
    strides = entry(cai, "strides");
    stream = entry(cai, "stream");
    const char *type_text = typestr && PyUnicode_Check(typestr) ? PyUnicode_AsUTF8(typestr) : NULL;
    if (typestr && PyUnicode_Check(typestr) && !type_text) goto done; /* AsUTF8 failed: its error stands */
    if (!shape || !PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != 1 || !type_text || strcmp(type_text, "<f4") != 0) {
        PyErr_Format(PyExc_TypeError, "add(): '%s' must be a 1-D float32 CUDA array", name);
        goto done;
    }
    if (strides && strides != Py_None) {
        PyErr_Format(PyExc_ValueError, "add(): '%s' must be contiguous (strides None)", name);
        goto done;
    }
    if (!data || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2) {
        PyErr_Format(PyExc_TypeError, "add(): '%s' has a malformed 'data' entry", name);
        goto done;
    }
    /* Runs the flag's own __bool__, which may do anything - the references above stay valid. */
    const int readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1)); /* -1: its __bool__ raised */
    if (readonly < 0) goto done;
    if (writable && readonly) {
        PyErr_Format(PyExc_ValueError, "add(): '%s' is read-only", name);
        goto done;
    }
    v->n = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, 0));
    v->data = (float *)PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    v->stream = stream && stream != Py_None ? PyLong_AsVoidPtr(stream) : NULL;
    if (PyErr_Occurred()) goto done;
    rc = 0;
done: /* every reference taken, released on every path */
    Py_XDECREF(shape);
    Py_XDECREF(typestr);
    Py_XDECREF(data);
    Py_XDECREF(strides);
    Py_XDECREF(stream);
    Py_DECREF(cai);
    return rc;
}

static PyObject *add(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "add(a, b, out) takes 3 arguments, got %zd", nargs);
    vector a, b, out;
    if (read_vector(args[0], "a", 0, &a) < 0 || read_vector(args[1], "b", 0, &b) < 0 ||
        read_vector(args[2], "out", 1, &out) < 0)
        return NULL;
    if (a.n != out.n || b.n != out.n) return PyErr_Format(PyExc_ValueError, "add(): the vectors differ in length");
    /* Launch where the output's producer works (CAI v3 'stream'); 1 is its name for the legacy default. */
    void *stream = out.stream == (void *)1 ? NULL : out.stream;
    const char *error = NULL;
    if (minimal_launch_add(out.data, a.data, b.data, out.n, stream, &error) != 0)
        return PyErr_Format(PyExc_RuntimeError, "add(): CUDA error: %s", error);
    return Py_NewRef(args[2]);
}

static PyMethodDef methods[] = {
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL,
     "add(a, b, out, /)\n--\n\nout = a + b for contiguous float32 CUDA vectors; returns out."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "minimal", "The smallest CUDA extension.", 0, methods};

PyMODINIT_FUNC PyInit_minimal(void) { return PyModuleDef_Init(&module); }
