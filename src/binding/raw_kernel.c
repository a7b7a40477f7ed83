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
#include "binding/errors.h"
#include "binding/kernel_arguments.h"
#include "binding/xla_ffi.h"
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

/* grid, block and shared_mem (NULL: 0 bytes) into a launch description, checked; its step named. */
static int read_launch_shape(PyObject *grid, PyObject *block, PyObject *shared_mem, const char *name,
                             lab_raw_call *d) {
    if (lab_read_launch_dimensions(grid, name, "grid", d->grid) < 0 ||
        lab_read_launch_dimensions(block, name, "block", d->block) < 0) {
        return -1;
    }
    int64_t shared = 0;
    if (lab_read_int_in(shared_mem, name, "shared_mem", &LAB_COUNT, &shared) < 0) return -1;
    d->shared_mem = (size_t)shared;
    PyOS_snprintf(d->step, sizeof d->step, "launching kernel '%s'", name);
    return 0;
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
    if (read_launch_shape(grid, block, shared_mem, name, &description) < 0) return NULL;
    const Py_ssize_t n_params = sizes != Py_None       ? PyBytes_GET_SIZE(sizes)
                                : signature != Py_None ? PyBytes_GET_SIZE(signature) / 2
                                                       : -1;
    lab_kernel_args marshalled;
    PyObject *result = NULL;
    if (lab_marshal_kernel_args(state, name, args,
                                sizes != Py_None ? (const unsigned char *)PyBytes_AS_STRING(sizes) : NULL,
                                n_params, signature != Py_None ? PyBytes_AS_STRING(signature) : NULL, NULL, 0,
                                &marshalled) == 0) {
        description.argv = marshalled.argv;
        lab_op_call call = {.func = name, .description = &description};
        if (lab_parse_stream_arg(state, stream == Py_None ? NULL : stream, name, &call.stream) == 0) {
            if (marshalled.n_arrays > 0) {
                lab_op_call_add(&call, "args", marshalled.arrays, marshalled.n_arrays, 1, 1);
            }
            if (lab_run_op(&state->dispatch, &lab_raw_kind, &call) == 0) {
                result = Py_NewRef(Py_None);
            } else {
                lab_raise_failure(&state->dispatch);
            }
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

/* The launcher's handle (borrowed), from _prepare() on first use. */
static PyObject *prepared_handle(kernel_launcher *self) {
    if (self->handle) return self->handle;
    PyObject *handle = PyObject_CallMethod((PyObject *)self, "_prepare", NULL);
    if (!handle) return NULL;
    if (!PyTuple_Check(handle) || PyTuple_GET_SIZE(handle) != 4 ||
        !PyUnicode_Check(PyTuple_GET_ITEM(handle, 1))) {
        Py_DECREF(handle);
        PyErr_SetString(PyExc_TypeError, "_prepare() must return (kernel, name, parameter sizes, signature)");
        return NULL;
    }
    if (self->handle) {
        Py_DECREF(handle); /* another thread prepared it while this one compiled */
    } else {
        self->handle = handle;
    }
    return self->handle;
}

/* A launch: kernel(grid, block, args, shared_mem=0, stream=None), as CuPy's RawKernel. */
static const lab_signature LAUNCH = {3,
                                     3,
                                     5,
                                     {LAB_PARAM(grid, DIMS), LAB_PARAM(block, DIMS),
                                      LAB_PARAM(args, ARGUMENTS), LAB_PARAM(shared_mem, INT),
                                      LAB_PARAM(stream, STREAM | LAB_OR_NONE)}};

static PyObject *launcher_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames) {
    kernel_launcher *self = (kernel_launcher *)self_obj;
    if (!prepared_handle(self)) return NULL;
    const char *func = PyUnicode_AsUTF8(PyTuple_GET_ITEM(self->handle, 1));
    if (!func) return NULL;
    PyObject *slots[5];
    if (lab_parse_args(self->state, func, &LAUNCH, args, PyVectorcall_NARGS(nargsf), kwnames, slots) < 0) {
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

/* ---- the jit face: lab.jax.RawKernel registers one launch (grid, block, the numbers) for XLA's FFI,
 * whose call gives the buffers - the arguments, then the results - for the parameters left None (an
 * output aliased to an argument may have no parameter of its own: it is that argument's memory).
 * The kernel is loaded at the first run, not at registration: tracing needs no GPU. ---- */

#define FFI_MAX_BUFFERS 64

typedef struct {
    lab_ffi_kernel base;
    kernel_launcher *launcher; /* a strong reference: its handle holds the loaded kernel */
    lab_raw_call shape;        /* grid, block, shared memory and step; the kernel and argv per run */
    char name[128];
    int n_buffers;
    unsigned char buffer_dtypes[FFI_MAX_BUFFERS];
    lab_kernel_args args; /* the numbers' bytes, one placeholder array a buffer parameter */
    int n_params;
    int buffer_of[]; /* per parameter: its buffer, or -1 for a number */
} ffi_launch;

static int run_ffi_launch(lab_ffi_kernel *base, lab_ffi_call *f) {
    ffi_launch *k = (ffi_launch *)base;
    const int64_t n_args = lab_ffi_count(f, 0), n_buffers = n_args + lab_ffi_count(f, 1);
    if (n_buffers != k->n_buffers) {
        lab_fail(LAB_FAILURE_TYPE, "%s: XLA gave %lld buffers; the launch lab.jax registered takes %d",
                 k->name, (long long)n_buffers, k->n_buffers);
        return -1;
    }
    lab_array *buffers = NULL; /* read one after another: consecutive */
    for (int64_t b = 0; b < n_buffers; b++) {
        lab_array *a =
            lab_ffi_buffer(f, b >= n_args, b < n_args ? b : b - n_args, b < n_args ? "input" : "output");
        if (!a) return -1;
        if (!buffers) buffers = a;
        if (a->dtype != k->buffer_dtypes[b]) {
            lab_fail(LAB_FAILURE_TYPE, "%s: buffer %lld has dtype %s; the launch was registered for %s",
                     k->name, (long long)b, lab_dtype_names[a->dtype], lab_dtype_names[k->buffer_dtypes[b]]);
            return -1;
        }
    }
    /* compiled and loaded at the first run; held through the launch, as it keeps the library loaded */
    PyObject *handle = Py_XNewRef(prepared_handle(k->launcher));
    const void *kernel = handle ? PyCapsule_GetPointer(PyTuple_GET_ITEM(handle, 0), KERNEL_CAPSULE) : NULL;
    if (!kernel) {
        Py_XDECREF(handle);
        return lab_fail_from_python();
    }
    void *argv_inline[LAB_KERNEL_ARGS_INLINE];
    void **argv =
        k->n_params <= LAB_KERNEL_ARGS_INLINE ? argv_inline : PyMem_Malloc(sizeof(void *) * k->n_params);
    if (!argv) {
        Py_DECREF(handle);
        return lab_fail(LAB_FAILURE_MEMORY, "%s: out of host memory for %d parameters", k->name, k->n_params);
    }
    for (int i = 0; i < k->n_params; i++)
        argv[i] = k->buffer_of[i] >= 0 ? &buffers[k->buffer_of[i]].data : k->args.argv[i];
    lab_raw_call description = k->shape;
    description.kernel = kernel, description.argv = argv;
    lab_op_call call = lab_ffi_op_call(f, &description);
    if (n_buffers > 0) lab_op_call_add(&call, "buffers", buffers, (int)n_buffers, 1, 1);
    const int rc = lab_run_op(&lab_ffi_state(f)->dispatch, &lab_raw_kind, &call);
    if (argv != argv_inline) PyMem_Free(argv);
    Py_DECREF(handle);
    return rc;
}

static void release_ffi_launch(lab_ffi_kernel *base) {
    ffi_launch *k = (ffi_launch *)base;
    lab_kernel_args_release(&k->args);
    Py_XDECREF(k->launcher);
    PyMem_Free(k);
}

/* _ffi_register(grid, block, shared_mem, args, buffer_dtypes, parameter_buffers, sizes, signature) -> the
 * launch's number for lab.jax's FFI calls. args: as RawKernel's, None where a buffer goes;
 * buffer_dtypes: one lab dtype (a byte) for each of the call's buffers, arguments then results;
 * parameter_buffers: for each None in args, the buffer it is (a byte); sizes and signature: as the
 * handle's (parameter sizes read from the compiled binary, parse_signature's codes), each or None.
 * Every check a call from Python makes on its arguments is made here. */
static PyObject *launcher_ffi_register(PyObject *self_obj, PyObject *const *args, Py_ssize_t nargs) {
    kernel_launcher *self = (kernel_launcher *)self_obj;
    if (nargs != 8 || !PyTuple_Check(args[3]) || !PyBytes_Check(args[4]) || !PyBytes_Check(args[5]) ||
        !(args[6] == Py_None || PyBytes_Check(args[6])) || !(args[7] == Py_None || PyBytes_Check(args[7]))) {
        PyErr_SetString(PyExc_TypeError,
                        "_ffi_register(grid, block, shared_mem, args: tuple, buffer_dtypes: bytes, "
                        "parameter_buffers: bytes, sizes: bytes | None, signature: bytes | None)");
        return NULL;
    }
    PyObject *name_obj = PyObject_GetAttrString(self_obj, "name");
    const char *name = name_obj ? PyUnicode_AsUTF8(name_obj) : NULL;
    if (!name) {
        Py_XDECREF(name_obj);
        return NULL;
    }
    const Py_ssize_t n_params = PyTuple_GET_SIZE(args[3]), n_buffers = PyBytes_GET_SIZE(args[4]);
    const Py_ssize_t n_used = PyBytes_GET_SIZE(args[5]);
    const unsigned char *dtypes = (const unsigned char *)PyBytes_AS_STRING(args[4]);
    const unsigned char *used = (const unsigned char *)PyBytes_AS_STRING(args[5]);
    ffi_launch *k = PyMem_Calloc(1, sizeof *k + sizeof(int) * (size_t)n_params);
    lab_array *placeholders = PyMem_Calloc((size_t)n_used + 1, sizeof(lab_array));
    PyObject *result = NULL;
    if (!k || !placeholders) {
        PyErr_NoMemory();
        goto done;
    }
    k->base.run = run_ffi_launch, k->base.release = release_ffi_launch, k->base.name = k->name;
    k->launcher = (kernel_launcher *)Py_NewRef(self_obj);
    k->n_params = (int)n_params;
    PyOS_snprintf(k->name, sizeof k->name, "%s", name);
    if (n_buffers > FFI_MAX_BUFFERS) {
        PyErr_Format(PyExc_ValueError, "%s(): at most %d arrays and outputs in jit, got %zd", name,
                     FFI_MAX_BUFFERS, n_buffers);
        goto done;
    }
    k->n_buffers = (int)n_buffers;
    for (Py_ssize_t b = 0; b < n_buffers; b++) {
        if (dtypes[b] >= LAB_NUM_DTYPES) {
            PyErr_Format(PyExc_ValueError, "%s(): buffer %zd has no lab dtype (%d)", name, b, dtypes[b]);
            goto done;
        }
        k->buffer_dtypes[b] = dtypes[b];
    }
    for (Py_ssize_t j = 0; j < n_used; j++) {
        if (used[j] >= n_buffers) {
            PyErr_Format(PyExc_ValueError, "%s(): parameter buffer %d of %zd buffers", name, used[j],
                         n_buffers);
            goto done;
        }
        placeholders[j].dtype = (lab_dtype)dtypes[used[j]];
        placeholders[j].device = -1;
    }
    for (Py_ssize_t i = 0, j = 0; i < n_params; i++) {
        const int is_buffer = PyTuple_GET_ITEM(args[3], i) == Py_None && j < n_used;
        k->buffer_of[i] = is_buffer ? used[j++] : -1;
    }
    if (read_launch_shape(args[0], args[1], args[2], name, &k->shape) < 0) goto done;
    const char *signature = args[7] != Py_None ? PyBytes_AS_STRING(args[7]) : NULL;
    const Py_ssize_t declared = args[6] != Py_None ? PyBytes_GET_SIZE(args[6])
                                : signature        ? PyBytes_GET_SIZE(args[7]) / 2
                                                   : -1;
    if (lab_marshal_kernel_args(self->state, name, args[3],
                                args[6] != Py_None ? (const unsigned char *)PyBytes_AS_STRING(args[6]) : NULL,
                                declared, signature, placeholders, (int)n_used, &k->args) < 0) {
        goto done;
    }
    const Py_ssize_t number = lab_ffi_kernel_register(&k->base);
    k = NULL; /* the registry's, or released */
    if (number >= 0) result = PyLong_FromSsize_t(number);
done:
    if (k) release_ffi_launch(&k->base);
    PyMem_Free(placeholders);
    Py_DECREF(name_obj);
    return result;
}

static PyMethodDef launcher_methods[] = {
    {"_ffi_register", (PyCFunction)(void (*)(void))launcher_ffi_register, METH_FASTCALL,
     "_ffi_register($self, grid, block, shared_mem, args, buffer_dtypes, parameter_buffers, sizes, "
     "signature, "
     "/)\n--\n\nRegisters one launch of this kernel for lab.jax's FFI calls (None in args: a buffer); "
     "returns its number."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot launcher_slots[] = {
    {Py_tp_methods, launcher_methods},
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

/* RawKernel's launch, by the name of the Python class whose calls it parses (the launcher is its base). */
const lab_signed_function lab_raw_kernel_signatures[] = {{"RawKernel.__call__", &LAUNCH}, {NULL, NULL}};

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
