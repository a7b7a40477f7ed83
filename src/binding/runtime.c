/* runtime.c - what lab can tell about the CUDA runtime it carries and the GPUs it sees.
 *
 * The runtime is linked statically, so these work on a machine with no driver at all: there
 * is_available() is False, device_count() is 0, and anything that needs a GPU raises lab.CudaError. */
#include "binding/runtime.h"

#include <cuda_runtime_api.h>

#include "binding/args.h"
#include "binding/errors.h"
#include "binding/module_state.h"
#include "dispatch/device.h"
#include "dispatch/memory.h"
#include "kernels/launch.h"

static PyObject *py_is_available(PyObject *module, PyObject *unused) {
    int count = 0;
    return PyBool_FromLong(cudaGetDeviceCount(&count) == cudaSuccess && count > 0);
}

static PyObject *py_device_count(PyObject *module, PyObject *unused) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (lab_is_no_device_error(err)) return PyLong_FromLong(0);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&lab_get_state(module)->dispatch, err, "device_count",
                                    "cudaGetDeviceCount");
    }
    return PyLong_FromLong(count);
}

static PyObject *version_tuple(int version) {
    return Py_BuildValue("(ii)", version / 1000, (version % 1000) / 10);
}

static PyObject *py_cuda_runtime_version(PyObject *module, PyObject *unused) {
    int version = 0;
    cudaError_t err = cudaRuntimeGetVersion(&version);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&lab_get_state(module)->dispatch, err, "cuda_runtime_version",
                                    "cudaRuntimeGetVersion");
    }
    return version_tuple(version);
}

static PyObject *py_cuda_driver_version(PyObject *module, PyObject *unused) {
    int version = 0;
    cudaError_t err = cudaDriverGetVersion(&version); /* 0 when no driver is installed */
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&lab_get_state(module)->dispatch, err, "cuda_driver_version",
                                    "cudaDriverGetVersion");
    }
    if (version == 0) Py_RETURN_NONE;
    return version_tuple(version);
}

static PyObject *py_compiled_architectures(PyObject *module, PyObject *unused) {
    return PyUnicode_FromString(lab_compiled_architectures());
}

/* device=None (the current device) or an ordinal: every runtime function that takes a device. */
static const lab_signature OPTIONAL_DEVICE = {0, 1, 1, {LAB_PARAM(device, DEVICE | LAB_OR_NONE)}};
static const lab_signature DEVICE = {1, 1, 1, {LAB_PARAM(device, DEVICE)}};

static PyObject *py_get_device_properties(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *device_obj;
    int device = 0;
    if (lab_parse_args(lab_get_state(module), "get_device_properties", &DEVICE, args, nargs, NULL,
                       &device_obj) < 0 ||
        lab_read_device(device_obj, "get_device_properties", &device) < 0) {
        return NULL;
    }
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&lab_get_state(module)->dispatch, err, "get_device_properties",
                                    "cudaGetDeviceCount");
    }
    if (device < 0 || device >= count) {
        return PyErr_Format(PyExc_ValueError,
                            "get_device_properties(): argument 'device' = %d does not exist (%d device(s))",
                            device, count);
    }
    struct cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, (int)device);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&lab_get_state(module)->dispatch, err, "get_device_properties",
                                    "cudaGetDeviceProperties");
    }
    return Py_BuildValue("{s:s, s:(ii), s:i, s:K, s:i, s:i, s:O}", "name", prop.name, "capability",
                         prop.major, prop.minor, "multi_processor_count", prop.multiProcessorCount,
                         "total_memory", (unsigned long long)prop.totalGlobalMem, "l2_cache_size",
                         prop.l2CacheSize, "max_threads_per_block", prop.maxThreadsPerBlock,
                         "pageable_memory_access", prop.pageableMemoryAccess ? Py_True : Py_False);
}

static cudaError_t synchronize_device(void *unused) { return cudaDeviceSynchronize(); }

typedef struct {
    size_t free, total;
} memory_info;

static cudaError_t read_memory_info(void *context) {
    memory_info *info = context;
    return cudaMemGetInfo(&info->free, &info->total);
}

/* device=None -> -1 (the current device); else an ordinal. -2 on error. */
static int optional_device(PyObject *module, PyObject *const *args, Py_ssize_t nargs, const char *func) {
    PyObject *device_obj;
    int device = -1;
    if (lab_parse_args(lab_get_state(module), func, &OPTIONAL_DEVICE, args, nargs, NULL, &device_obj) < 0 ||
        lab_read_device(device_obj, func, &device) < 0) {
        return -2;
    }
    return device;
}

static PyObject *py_synchronize(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    const int device = optional_device(module, args, nargs, "synchronize");
    if (device == -2) return NULL;
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = lab_with_device(device, synchronize_device, NULL);
    Py_END_ALLOW_THREADS
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&lab_get_state(module)->dispatch, err, "synchronize",
                                    "cudaDeviceSynchronize");
    }
    Py_RETURN_NONE;
}

static PyObject *py_mem_get_info(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    const int device = optional_device(module, args, nargs, "mem_get_info");
    if (device == -2) return NULL;
    memory_info info = {0, 0};
    cudaError_t err = lab_with_device(device, read_memory_info, &info);
    if (err != cudaSuccess) {
        return lab_raise_cuda_error(&lab_get_state(module)->dispatch, err, "mem_get_info", "cudaMemGetInfo");
    }
    return Py_BuildValue("(KK)", (unsigned long long)info.free, (unsigned long long)info.total);
}

/* ---- memory statistics (dispatch/memory.h) ---- */

/* Reads (after a reset of the peaks, or a trim) what lab holds on the device args name: 0, or -1 with
 * the exception set. */
static int read_memory(PyObject *module, PyObject *const *args, Py_ssize_t nargs, const char *func, int reset,
                       int trim, lab_memory_usage *usage) {
    const int device = optional_device(module, args, nargs, func);
    if (device == -2) return -1;
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS /* empty_cache waits for the device */
    err = lab_memory_usage_of(device, usage, reset, trim);
    Py_END_ALLOW_THREADS
    if (err != cudaSuccess) {
        lab_raise_cuda_error(&lab_get_state(module)->dispatch, err, func,
                             trim ? "cudaDeviceSynchronize/cudaMemPoolTrimTo" : "cudaMemPoolGetAttribute");
        return -1;
    }
    return 0;
}

static PyObject *py_memory_stats(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    lab_memory_usage u;
    if (read_memory(module, args, nargs, "memory_stats", 0, 0, &u) < 0) return NULL;
    return Py_BuildValue(
        "{s:K, s:K, s:K, s:K, s:K, s:K, s:K, s:K, s:K, s:K, s:K, s:K}", "allocated_bytes.current",
        (unsigned long long)u.arrays.used, "allocated_bytes.peak", (unsigned long long)u.arrays.used_peak,
        "reserved_bytes.current", (unsigned long long)u.arrays.reserved, "reserved_bytes.peak",
        (unsigned long long)u.arrays.reserved_peak, "scratch_bytes.current",
        (unsigned long long)u.scratch.used, "scratch_bytes.peak", (unsigned long long)u.scratch.used_peak,
        "scratch_reserved_bytes.current", (unsigned long long)u.scratch.reserved,
        "scratch_reserved_bytes.peak", (unsigned long long)u.scratch.reserved_peak, "num_allocs",
        (unsigned long long)u.array_allocations, "num_frees", (unsigned long long)u.array_frees,
        "device_free_bytes", (unsigned long long)u.device_free, "device_total_bytes",
        (unsigned long long)u.device_total);
}

static PyObject *py_max_memory_allocated(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    lab_memory_usage u;
    if (read_memory(module, args, nargs, "max_memory_allocated", 0, 0, &u) < 0) return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)u.arrays.used_peak);
}

/* lab.Arrays' memory: the device's default pool (cudaMallocAsync), which torch and CuPy do not use,
 * so its counters are lab's own, per process. */
static PyObject *py_memory_allocated(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    lab_memory_usage u;
    if (read_memory(module, args, nargs, "memory_allocated", 0, 0, &u) < 0) return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)u.arrays.used);
}

static PyObject *py_memory_reserved(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    lab_memory_usage u;
    if (read_memory(module, args, nargs, "memory_reserved", 0, 0, &u) < 0) return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)u.arrays.reserved);
}

static PyObject *py_reset_peak_memory_stats(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    lab_memory_usage u;
    if (read_memory(module, args, nargs, "reset_peak_memory_stats", 1, 0, &u) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_empty_cache(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    lab_memory_usage u;
    if (read_memory(module, args, nargs, "empty_cache", 0, 1, &u) < 0) return NULL;
    Py_RETURN_NONE;
}

PyMethodDef lab_runtime_methods[] = {
    {"memory_stats", (PyCFunction)(void (*)(void))py_memory_stats, METH_FASTCALL,
     "memory_stats(device=None, /)\n--\n\nWhat lab holds on the device, as a dict of ints: "
     "allocated_bytes and reserved_bytes (.current, .peak) of the pool lab.Arrays come from, "
     "scratch_bytes and scratch_reserved_bytes (.current, .peak) of the pool lab's kernels take scratch "
     "memory from, num_allocs and num_frees (lab.Arrays of nonzero size in this process), and the "
     "device's device_free_bytes and device_total_bytes. The pools do not report their largest free "
     "block, so neither does lab."},
    {"max_memory_allocated", (PyCFunction)(void (*)(void))py_max_memory_allocated, METH_FASTCALL,
     "max_memory_allocated(device=None, /)\n--\n\nThe peak of memory_allocated() since the pool was made "
     "or reset_peak_memory_stats() was called."},
    {"reset_peak_memory_stats", (PyCFunction)(void (*)(void))py_reset_peak_memory_stats, METH_FASTCALL,
     "reset_peak_memory_stats(device=None, /)\n--\n\nSets every .peak of memory_stats() back to its "
     ".current value."},
    {"empty_cache", (PyCFunction)(void (*)(void))py_empty_cache, METH_FASTCALL,
     "empty_cache(device=None, /)\n--\n\nWaits for the device, then gives the memory lab's pools hold "
     "but do not use back to it (other processes, and torch or CuPy, can then have it). Live arrays "
     "are untouched. Releases the GIL."},
    {"memory_allocated", (PyCFunction)(void (*)(void))py_memory_allocated, METH_FASTCALL,
     "memory_allocated(device=None, /)\n--\n\nBytes of the device's memory held by live lab.Arrays in this "
     "process (the stream-ordered pool lab allocates from; freed arrays leave it once their stream reaches "
     "the free). Like torch.cuda.memory_allocated, for lab's own arrays."},
    {"memory_reserved", (PyCFunction)(void (*)(void))py_memory_reserved, METH_FASTCALL,
     "memory_reserved(device=None, /)\n--\n\nBytes the pool lab allocates from holds from the device, "
     "allocated or cached for reuse (returned to the device at synchronization points)."},
    {"synchronize", (PyCFunction)(void (*)(void))py_synchronize, METH_FASTCALL,
     "synchronize(device=None, /)\n--\n\nWait for all work on the device (default: the current one) to "
     "finish; "
     "releases the GIL."},
    {"mem_get_info", (PyCFunction)(void (*)(void))py_mem_get_info, METH_FASTCALL,
     "mem_get_info(device=None, /)\n--\n\n(free, total) bytes of device memory."},
    {"is_available", py_is_available, METH_NOARGS,
     "is_available()\n--\n\nTrue if a CUDA driver and at least one GPU are usable."},
    {"device_count", py_device_count, METH_NOARGS,
     "device_count()\n--\n\nThe number of CUDA GPUs; 0 where there is no driver or GPU."},
    {"cuda_runtime_version", py_cuda_runtime_version, METH_NOARGS,
     "cuda_runtime_version()\n--\n\nThe CUDA runtime lab was built with (and carries, statically), as "
     "(major, minor)."},
    {"cuda_driver_version", py_cuda_driver_version, METH_NOARGS,
     "cuda_driver_version()\n--\n\nThe CUDA version the installed driver supports, as (major, minor), or "
     "None "
     "where no driver is installed."},
    {"compiled_architectures", py_compiled_architectures, METH_NOARGS,
     "compiled_architectures()\n--\n\nThe GPU code in this build, e.g. 'sm_80 sm_90 compute_90' (SASS and "
     "PTX)."},
    {"get_device_properties", (PyCFunction)(void (*)(void))py_get_device_properties, METH_FASTCALL,
     "get_device_properties(device, /)\n--\n\nA dict of the device's name, capability, "
     "multi_processor_count, "
     "total_memory, l2_cache_size and max_threads_per_block."},
    {NULL, NULL, 0, NULL},
};

const lab_signed_function lab_runtime_signatures[] = {
    {"memory_stats", &OPTIONAL_DEVICE},
    {"max_memory_allocated", &OPTIONAL_DEVICE},
    {"reset_peak_memory_stats", &OPTIONAL_DEVICE},
    {"empty_cache", &OPTIONAL_DEVICE},
    {"memory_allocated", &OPTIONAL_DEVICE},
    {"memory_reserved", &OPTIONAL_DEVICE},
    {"synchronize", &OPTIONAL_DEVICE},
    {"mem_get_info", &OPTIONAL_DEVICE},
    {"is_available", &LAB_NO_PARAMETERS},
    {"device_count", &LAB_NO_PARAMETERS},
    {"cuda_runtime_version", &LAB_NO_PARAMETERS},
    {"cuda_driver_version", &LAB_NO_PARAMETERS},
    {"compiled_architectures", &LAB_NO_PARAMETERS},
    {"get_device_properties", &DEVICE},
    {NULL, NULL},
};
