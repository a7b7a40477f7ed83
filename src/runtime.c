/* runtime.c - what lab can tell about the CUDA runtime it carries and the GPUs it sees.
 *
 * The runtime is linked statically, so these work on a machine with no driver at all: there
 * is_available() is False, device_count() is 0, and anything that needs a GPU raises lab.CudaError. */
#include "runtime.h"

#include <cuda_runtime_api.h>

#include "cuda_error.h"
#include "kernels/launch.h"
#include "module_state.h"

static PyObject *py_is_available(PyObject *module, PyObject *unused) {
    int count = 0;
    return PyBool_FromLong(cudaGetDeviceCount(&count) == cudaSuccess && count > 0);
}

static PyObject *py_device_count(PyObject *module, PyObject *unused) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (lab_is_no_device_error(err)) return PyLong_FromLong(0);
    if (err != cudaSuccess) {
        lab_raise_cuda_error(lab_get_state(module), err, "device_count", "cudaGetDeviceCount");
        return NULL;
    }
    return PyLong_FromLong(count);
}

static PyObject *version_tuple(int version) { return Py_BuildValue("(ii)", version / 1000, (version % 1000) / 10); }

static PyObject *py_cuda_runtime_version(PyObject *module, PyObject *unused) {
    int version = 0;
    cudaError_t err = cudaRuntimeGetVersion(&version);
    if (err != cudaSuccess) {
        lab_raise_cuda_error(lab_get_state(module), err, "cuda_runtime_version", "cudaRuntimeGetVersion");
        return NULL;
    }
    return version_tuple(version);
}

static PyObject *py_cuda_driver_version(PyObject *module, PyObject *unused) {
    int version = 0;
    cudaError_t err = cudaDriverGetVersion(&version); /* 0 when no driver is installed */
    if (err != cudaSuccess) {
        lab_raise_cuda_error(lab_get_state(module), err, "cuda_driver_version", "cudaDriverGetVersion");
        return NULL;
    }
    if (version == 0) Py_RETURN_NONE;
    return version_tuple(version);
}

static PyObject *py_compiled_architectures(PyObject *module, PyObject *unused) {
    return PyUnicode_FromString(lab_compiled_architectures());
}

static PyObject *py_get_device_properties(PyObject *module, PyObject *arg) {
    int device = PyLong_AsLong(arg);
    if (device == -1 && PyErr_Occurred()) return NULL;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        lab_raise_cuda_error(lab_get_state(module), err, "get_device_properties", "cudaGetDeviceCount");
        return NULL;
    }
    if (device < 0 || device >= count)
        return PyErr_Format(PyExc_ValueError, "get_device_properties(): device %d does not exist (%d device(s))", device, count);
    struct cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess) {
        lab_raise_cuda_error(lab_get_state(module), err, "get_device_properties", "cudaGetDeviceProperties");
        return NULL;
    }
    return Py_BuildValue("{s:s, s:(ii), s:i, s:K, s:i, s:i}", "name", prop.name, "capability", prop.major, prop.minor,
                         "multi_processor_count", prop.multiProcessorCount, "total_memory",
                         (unsigned long long)prop.totalGlobalMem, "l2_cache_size", prop.l2CacheSize,
                         "max_threads_per_block", prop.maxThreadsPerBlock);
}

PyMethodDef lab_runtime_methods[] = {
    {"is_available", py_is_available, METH_NOARGS,
     "is_available()\n--\n\nTrue if a CUDA driver and at least one GPU are usable."},
    {"device_count", py_device_count, METH_NOARGS,
     "device_count()\n--\n\nThe number of CUDA GPUs; 0 where there is no driver or GPU."},
    {"cuda_runtime_version", py_cuda_runtime_version, METH_NOARGS,
     "cuda_runtime_version()\n--\n\nThe CUDA runtime lab was built with (and carries, statically), as (major, minor)."},
    {"cuda_driver_version", py_cuda_driver_version, METH_NOARGS,
     "cuda_driver_version()\n--\n\nThe CUDA version the installed driver supports, as (major, minor), or None "
     "where no driver is installed."},
    {"compiled_architectures", py_compiled_architectures, METH_NOARGS,
     "compiled_architectures()\n--\n\nThe GPU code in this build, e.g. 'sm_80 sm_90 compute_90' (SASS and PTX)."},
    {"get_device_properties", py_get_device_properties, METH_O,
     "get_device_properties(device, /)\n--\n\nA dict of the device's name, capability, multi_processor_count, "
     "total_memory, l2_cache_size and max_threads_per_block."},
    {NULL, NULL, 0, NULL},
};
