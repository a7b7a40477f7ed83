/* lesson3_strides_dtypes.c - lesson 3: what __cuda_array_interface__ says beyond a pointer.
 *
 * minimal.c took only contiguous float32 vectors. The protocol also says the element type
 * (typestr: '<f4' little-endian 4-byte float, '<f8' 8-byte) and the layout: strides in *bytes*
 * per dimension, or None for C-contiguous. x[::2] is the same memory read every other element,
 * x[::-1] starts at the last element with a negative stride. The reader in lessons.h turns those
 * into what the kernel needs - a data pointer, an element count, a stride in elements, a dtype -
 * and refuses what it cannot represent (a stride that is not a whole number of elements), naming
 * the argument. describe(x) returns what it read, so the reading can be watched on any producer,
 * and tried on plain objects with no GPU at all.
 *
 * lab's reader is src/binding/cai_reader.c (any rank, every dtype of src/binding/protocol_dtypes.c,
 * the CAI 'mask' refused, versions 0-3), and the kernels' side of strides is src/kernels/indexing.cuh. */
#include "lessons.h"

static PyObject *describe(PyObject *module, PyObject *x) {
    vector v;
    if (read_vector(x, "describe", "x", &v) < 0) return NULL;
    return Py_BuildValue("{s:L, s:L, s:s, s:O, s:K, s:K}", "n", v.n, "stride", v.stride, "dtype",
                         v.is_double ? "float64" : "float32", "readonly", v.readonly ? Py_True : Py_False,
                         "data", (unsigned long long)(uintptr_t)v.data, "stream",
                         (unsigned long long)(uintptr_t)v.stream);
}

static PyObject *add(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "add(a, b, out) takes 3 arguments, got %zd", nargs);
    vector a, b, out;
    if (read_add_operands(args, "add", &a, &b, &out) < 0) return NULL;
    return add_on_outs_stream(args[2], &a, &b, &out);
}

static PyMethodDef methods[] = {
    {"describe", describe, METH_O,
     "describe(x, /)\n--\n\nWhat the reader took from x's __cuda_array_interface__: n, stride (elements), "
     "dtype, "
     "readonly, data, stream."},
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL,
     "add(a, b, out, /)\n--\n\nout = a + b for float32 or float64 CUDA vectors of any stride; returns out."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "lesson3_strides_dtypes",
                                    .m_doc = "Lesson 3: strides and dtypes from the CUDA Array Interface.",
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit_lesson3_strides_dtypes(void) { return PyModuleDef_Init(&module); }
