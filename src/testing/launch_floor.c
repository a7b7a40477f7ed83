/* launch_floor.c - the cost floor for the benchmarks: lab.lab._bare_add(out, a, b, n) launches
 * lab's float32 add kernel from raw device addresses (ints), with none of the binding's work -
 * no protocol reading, no validation, no plan, no stream or device choice. A Python call plus one
 * kernel launch: what lab.add's per-call cost is measured against. Never use it for real work. */
#include "testing/launch_floor.h"

#include "binding/errors.h"
#include "binding/module_state.h"
#include "kernels/launch.h"

static PyObject *py_bare_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) return PyErr_Format(PyExc_TypeError, "_bare_add(out, a, b, n) takes 4 ints");
    lab_elementwise_launch launch = {0};
    launch.op = LAB_OP_ADD;
    launch.path = LAB_PATH_VECTORIZED;
    launch.n_inputs = 2;
    for (int i = 0; i < 3; i++) {
        launch.dtypes[i] = LAB_FLOAT32;
        launch.data[i] = PyLong_AsVoidPtr(args[i]);
    }
    launch.compute = LAB_FLOAT32;
    launch.numel = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    launch.ndim = 1;
    launch.shape[0] = launch.numel;
    launch.scalars.as_float[0] = launch.scalars.as_float[1] = 1.0;
    cudaError_t err = lab_launch_elementwise(&launch, 0);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&lab_get_state(module)->dispatch, err, "_bare_add", "kernel launch");
    }
    Py_RETURN_NONE;
}

PyMethodDef lab_launch_floor_methods[] = {
    {"_bare_add", (PyCFunction)(void (*)(void))py_bare_add, METH_FASTCALL,
     "_bare_add(out, a, b, n, /)\n--\n\nPrivate, for benchmarks: float32 out = a + b from raw 16-byte "
     "aligned device "
     "addresses on the legacy default stream, with no checks at all."},
    {NULL, NULL, 0, NULL},
};
