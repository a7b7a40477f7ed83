/* lesson6_dlpack_exchange.c - lesson 6: DLPack's C exchange API, the fast way to read a torch tensor.
 *
 * __cuda_array_interface__ costs a Python dict per array per call (the producer builds it in a
 * property). DLPack 1.3 lets a tensor *type* publish a table of C functions instead, as a capsule
 * named "dlpack_exchange_api" in the type's __dlpack_c_exchange_api__ (torch 2.11 does). Reading a
 * tensor is then one C call - dltensor_from_py_object_no_sync(obj, &dltensor) fills a DLTensor
 * (data, device, dtype, shape, strides in *elements*, byte_offset) borrowed from the live object -
 * and the producer's current stream is another (current_work_stream), so lab can launch where torch
 * works without asking Python. The capsule's name is checked before its pointer is trusted, and the
 * capsule is held (a strong reference) while the table is in use.
 *
 * describe(x) shows what was read, and add(a, b, out) takes either protocol per argument: the
 * exchange API where the type has one, else lessons.h's CAI reader. The structs are DLPack's own, as
 * lab declares the part it uses (src/dispatch/dlpack_exchange.h); lab reads both protocols in
 * src/binding/array_reader.c and caches each type's table. */
#include "dispatch/dlpack_exchange.h"
#include "lessons.h"

/* The exchange table of x's type, and the capsule that keeps it valid (a new reference), or NULL
 * capsule with no error when the type publishes none. -1 with an error for a malformed one. */
static int exchange_api(PyObject *x, PyObject **capsule, const DLPackExchangeAPI **api) {
    *capsule = PyObject_GetAttrString((PyObject *)Py_TYPE(x), "__dlpack_c_exchange_api__");
    if (!*capsule) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    *api = PyCapsule_IsValid(*capsule, LAB_EXCHANGE_CAPSULE_NAME)
               ? (const DLPackExchangeAPI *)PyCapsule_GetPointer(*capsule, LAB_EXCHANGE_CAPSULE_NAME)
               : NULL;
    if (!*api || !(*api)->dltensor_from_py_object_no_sync) {
        Py_CLEAR(*capsule);
        PyErr_Format(PyExc_TypeError,
                     "%s.__dlpack_c_exchange_api__ must be a capsule named '%s' with a table",
                     Py_TYPE(x)->tp_name, LAB_EXCHANGE_CAPSULE_NAME);
        return -1;
    }
    return 0;
}

/* x as a 1-D float32/float64 CUDA vector through its type's exchange table; *used = 0 when the type
 * has none (the caller reads the CAI then). 0, or -1 with an error naming `name`. */
static int read_dlpack_vector(PyObject *x, const char *name, vector *v, int *used) {
    PyObject *capsule = NULL;
    const DLPackExchangeAPI *api = NULL;
    *used = 0;
    if (exchange_api(x, &capsule, &api) < 0) return -1;
    if (!capsule) return 0;
    *used = 1;
    DLTensor t;
    memset(&t, 0, sizeof t);
    int rc = -1;
    if (api->dltensor_from_py_object_no_sync(x, &t) != 0) { /* the producer set the error */
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "add(): '%s': the producer could not export it", name);
        goto done;
    }
    if (t.device.device_type != kDLCUDA) {
        PyErr_Format(PyExc_TypeError, "add(): '%s' is not CUDA device memory (DLPack device type %d)", name,
                     (int)t.device.device_type);
        goto done;
    }
    if (t.ndim != 1 || !t.shape || t.dtype.code != kDLFloat || (t.dtype.bits != 32 && t.dtype.bits != 64) ||
        t.dtype.lanes != 1) {
        PyErr_Format(PyExc_TypeError, "add(): '%s' must be a 1-D float32 or float64 CUDA vector", name);
        goto done;
    }
    v->is_double = t.dtype.bits == 64;
    v->n = t.shape[0];
    v->stride = t.strides ? t.strides[0] : 1; /* DLPack's strides are in elements, CAI's in bytes */
    v->data = (char *)t.data + t.byte_offset; /* where the first element is */
    v->readonly = 0;                          /* this form has no read-only flag (DLPack < 1.0's struct) */
    void *stream = NULL;
    if (api->current_work_stream && api->current_work_stream(kDLCUDA, t.device.device_id, &stream) != 0) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "add(): '%s': no current stream", name);
        goto done;
    }
    v->stream = stream; /* the producer's current stream (torch.cuda.current_stream()) */
    rc = 0;
done:
    Py_DECREF(capsule);
    return rc;
}

static int read_any_vector(PyObject *x, const char *func, const char *name, vector *v) {
    int used = 0;
    if (read_dlpack_vector(x, name, v, &used) < 0) return -1;
    return used ? 0 : read_vector(x, func, name, v);
}

static PyObject *describe(PyObject *module, PyObject *x) {
    vector v;
    int used = 0;
    if (read_dlpack_vector(x, "x", &v, &used) < 0) return NULL;
    if (!used)
        return PyErr_Format(PyExc_TypeError, "describe(): %s publishes no DLPack exchange API",
                            Py_TYPE(x)->tp_name);
    return Py_BuildValue("{s:L, s:L, s:s, s:K, s:K}", "n", v.n, "stride", v.stride, "dtype",
                         v.is_double ? "float64" : "float32", "data", (unsigned long long)(uintptr_t)v.data,
                         "stream", (unsigned long long)(uintptr_t)v.stream);
}

static PyObject *add(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "add(a, b, out) takes 3 arguments, got %zd", nargs);
    vector a, b, out;
    if (read_add_operands_with(read_any_vector, args, "add", &a, &b, &out) < 0) return NULL;
    return add_on_outs_stream(args[2], &a, &b, &out);
}

static PyMethodDef methods[] = {
    {"describe", describe, METH_O,
     "describe(x, /)\n--\n\nWhat x's type's DLPack exchange table said: n, stride (elements), dtype, data, "
     "stream."},
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL,
     "add(a, b, out, /)\n--\n\nout = a + b; each argument read through its type's DLPack exchange API, else "
     "its "
     "__cuda_array_interface__; launched on out's producer's stream. Returns out."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "lesson6_dlpack_exchange",
                                    .m_doc = "Lesson 6: DLPack's C exchange API.", .m_methods = methods};

PyMODINIT_FUNC PyInit_lesson6_dlpack_exchange(void) { return PyModuleDef_Init(&module); }
