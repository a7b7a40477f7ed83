/* raw_kernel.c - launching a user's runtime-compiled kernel on anyone's arrays (level 2 for
 * dispatch/raw_kind.c; lab/_jit.py's RawKernel and RawModule are the Python face).
 *
 * Three private functions: _library_load(cubin or PTX) loads a library with the runtime API
 * (cudaLibraryLoadData: no driver-API linking), _library_kernel(library, name, sizes) finds a kernel
 * in it - with its parameter sizes as lab/_kernel_params.py read them from the binary, or asking the
 * runtime where the binary did not say - and _launch_kernel(handle, grid, block, args, ...)
 * turns each argument into the bytes of one kernel parameter - an array from any producer into its
 * device pointer, a number into the C type the signature or its own type says - and hands the
 * launch to the op driver, so a user's kernel follows lab's stream policy like every op. */
#include "binding/raw_kernel.h"

#include <structmember.h>

#include "binding/args.h"
#include "binding/kernel_arguments.h"
#include "dispatch/cuda_error.h"
#include "dispatch/dtype.h"
#include "dispatch/raw_kind.h"

#define LIBRARY_CAPSULE "lab.kernel_library"
#define KERNEL_CAPSULE "lab.kernel"

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
 * where the runtime cannot say. The fallback for a binary lab/_kernel_params.py could not read:
 * cudaFuncGetParamInfo answers an index past the last parameter with cudaErrorInvalidValue, which it
 * also leaves as the runtime's last error (cleared here, or the next launch's check would report it)
 * and which compute-sanitizer reports as an API error of the user's program. */
static PyObject *parameter_sizes(cudaKernel_t kernel) {
    unsigned char sizes[LAB_MAX_KERNEL_ARGS + 1];
    int count = 0;
    cudaError_t err = cudaSuccess;
    for (; count <= LAB_MAX_KERNEL_ARGS; count++) {
        size_t offset = 0, size = 0;
        err = cudaFuncGetParamInfo((const void *)kernel, (size_t)count, &offset, &size);
        if (err != cudaSuccess) break;
        sizes[count] = (unsigned char)(size > 255 ? 255 : size);
    }
    cudaGetLastError();
    /* past the last parameter is cudaErrorInvalidValue; anything else means the runtime cannot say */
    if (count > LAB_MAX_KERNEL_ARGS || err != cudaErrorInvalidValue) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)sizes, count);
}

static PyObject *py_library_kernel(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyUnicode_Check(args[1]) || !(args[2] == Py_None || PyBytes_Check(args[2]))) {
        PyErr_SetString(PyExc_TypeError, "_library_kernel(library, name: str, sizes: bytes | None)");
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
    PyObject *sizes = args[2] != Py_None ? Py_NewRef(args[2]) : parameter_sizes(kernel);
    if (!sizes) {
        Py_DECREF(capsule);
        return NULL;
    }
    return Py_BuildValue("(NN)", capsule, sizes);
}

/* Launches the kernel a handle names - (kernel capsule, name, parameter sizes or None, signature
 * codes or None) - with a call's arguments, through the op driver. */
static PyObject *launch_with_handle(lab_state *state, PyObject *handle, PyObject *grid, PyObject *block,
                                    PyObject *args, PyObject *shared_mem, PyObject *stream) {
    if (!PyTuple_Check(handle) || PyTuple_GET_SIZE(handle) != 4) {
        PyErr_SetString(PyExc_TypeError, "a kernel handle is (kernel, name, parameter sizes, signature)");
        return NULL;
    }
    const void *kernel = PyCapsule_GetPointer(PyTuple_GET_ITEM(handle, 0), KERNEL_CAPSULE);
    const char *name = kernel ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(handle, 1)) : NULL;
    if (!name) return NULL;
    PyObject *sizes = PyTuple_GET_ITEM(handle, 2), *signature = PyTuple_GET_ITEM(handle, 3);
    lab_raw_call description = {.kernel = kernel};
    if (lab_read_launch_dimensions(grid, name, "grid", description.grid) < 0) return NULL;
    if (lab_read_launch_dimensions(block, name, "block", description.block) < 0) return NULL;
    Py_ssize_t shared = 0;
    if (shared_mem) {
        shared = PyNumber_AsSsize_t(shared_mem, PyExc_OverflowError);
        if (shared == -1 && PyErr_Occurred()) return NULL;
    }
    if (shared < 0) {
        PyErr_Format(PyExc_ValueError, "%s(): argument 'shared_mem' must be >= 0 bytes, got %zd", name,
                     shared);
        return NULL;
    }
    description.shared_mem = (size_t)shared;
    const Py_ssize_t n_params = sizes != Py_None       ? PyBytes_GET_SIZE(sizes)
                                : signature != Py_None ? PyBytes_GET_SIZE(signature) / 2
                                                       : -1;
    lab_kernel_args marshalled;
    PyObject *result = NULL;
    if (lab_marshal_kernel_args(
            state, name, args, sizes != Py_None ? (const unsigned char *)PyBytes_AS_STRING(sizes) : NULL,
            n_params, signature != Py_None ? PyBytes_AS_STRING(signature) : NULL, &marshalled) == 0) {
        description.argv = marshalled.argv;
        PyOS_snprintf(description.step, sizeof description.step, "launching kernel '%s'", name);
        lab_op_call call = {.func = name, .description = &description};
        if (lab_parse_stream_arg(state, stream == Py_None ? NULL : stream, name, &call.stream) == 0) {
            if (marshalled.n_arrays > 0) {
                lab_op_call_add(&call, "args", marshalled.arrays, marshalled.n_arrays, 1, 1);
            }
            if (lab_run_op(&state->dispatch, &lab_raw_kind, &call) == 0) result = Py_NewRef(Py_None);
        }
    }
    lab_kernel_args_release(&marshalled);
    return result;
}

/* _launch_kernel(handle, grid, block, args, shared_mem, stream): the launch without the launcher
 * type (tests drive the marshalling through it with stand-in handles). */
static PyObject *py_launch_kernel(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "_launch_kernel(handle, grid, block, args, shared_mem, stream)");
        return NULL;
    }
    return launch_with_handle(lab_get_state(module), args[0], args[1], args[2], args[3], args[4], args[5]);
}

/* ---- lab.lab._KernelLauncher: the C base of lab.RawKernel, so a call goes from Python straight
 * to C (vectorcall) with no Python frame: ~0.3 us of a ~6 us call. The first call asks the
 * subclass's _prepare() for the handle (compiling and loading the kernel) and keeps it. ---- */

typedef struct {
    PyObject_HEAD vectorcallfunc vectorcall;
    lab_state *state;
    PyObject *handle;
} kernel_launcher;

static PyObject *launcher_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames) {
    kernel_launcher *self = (kernel_launcher *)self_obj;
#define N(id) LAB_NAME_##id
    static const lab_signature signature = {3, 3, 5, {N(grid), N(block), N(args), N(shared_mem), N(stream)}};
#undef N
    if (!self->handle) {
        PyObject *handle = PyObject_CallMethod(self_obj, "_prepare", NULL);
        if (!handle) return NULL;
        if (!PyTuple_Check(handle) || PyTuple_GET_SIZE(handle) != 4 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(handle, 1))) {
            Py_DECREF(handle);
            PyErr_SetString(PyExc_TypeError,
                            "_prepare() must return (kernel, name, parameter sizes, signature)");
            return NULL;
        }
        if (self->handle) {
            Py_DECREF(handle); /* another thread prepared it while this one compiled */
        } else {
            self->handle = handle;
        }
    }
    const char *func = PyUnicode_AsUTF8(PyTuple_GET_ITEM(self->handle, 1));
    if (!func) return NULL;
    PyObject *slots[5];
    if (lab_parse_args(self->state, func, &signature, args, PyVectorcall_NARGS(nargsf), kwnames, slots) < 0) {
        return NULL;
    }
    return launch_with_handle(self->state, self->handle, slots[0], slots[1], slots[2], slots[3], slots[4]);
}

static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    lab_state *state = lab_state_of_type(type);
    if (!state) return NULL;
    kernel_launcher *self = (kernel_launcher *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->vectorcall = launcher_vectorcall;
    self->state = state;
    self->handle = NULL;
    return (PyObject *)self;
}

static int launcher_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((kernel_launcher *)self)->handle);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static int launcher_clear(PyObject *self) {
    Py_CLEAR(((kernel_launcher *)self)->handle);
    return 0;
}

static void launcher_dealloc(PyObject *self) { lab_gc_dealloc(self, launcher_clear); }

static PyMemberDef launcher_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(kernel_launcher, vectorcall), READONLY, NULL},
    {"_handle", T_OBJECT, offsetof(kernel_launcher, handle), READONLY,
     "(kernel, name, parameter sizes, signature) once the first call prepared it, else None"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot launcher_slots[] = {
    {Py_tp_doc, "The C base of lab.RawKernel: calling it launches the kernel _prepare() returns."},
    {Py_tp_new, launcher_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_traverse, launcher_traverse},
    {Py_tp_clear, launcher_clear},
    {Py_tp_dealloc, launcher_dealloc},
    {Py_tp_members, launcher_members},
    {0, NULL},
};

PyType_Spec lab_kernel_launcher_spec = {"lab.lab._KernelLauncher", sizeof(kernel_launcher), 0,
                                        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                                            Py_TPFLAGS_HAVE_VECTORCALL,
                                        launcher_slots};

PyMethodDef lab_raw_kernel_methods[] = {
    {"_library_load", (PyCFunction)py_library_load, METH_O,
     "_library_load(code, /)\n--\n\nLoads a cubin or PTX with cudaLibraryLoadData "
     "(RawModule's)."},
    {"_library_kernel", (PyCFunction)(void (*)(void))py_library_kernel, METH_FASTCALL,
     "_library_kernel(library, name, sizes, /)\n--\n\nFinds a kernel in a loaded library; sizes: "
     "its parameters' byte sizes as read from the binary, or None to ask the runtime."},
    {"_launch_kernel", (PyCFunction)(void (*)(void))py_launch_kernel, METH_FASTCALL,
     "_launch_kernel(handle, grid, block, args, shared_mem, stream, /)\n--\n\nLaunches a RawKernel (its "
     "__call__)."},
    {NULL, NULL, 0, NULL},
};
