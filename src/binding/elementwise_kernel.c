/* elementwise_kernel.c - lab.lab._ElementwiseLauncher, the C base of lab.ElementwiseKernel (level 2
 * for dispatch/elementwise_kernel_kind.c; lab/_elementwise_kernel.py is the Python face).
 *
 * A call `kernel(x, y, z, stream=None)` goes from Python straight to C (vectorcall): each argument
 * is read - an array from any producer into a lab_array, a number by its own type - and the types
 * found make a key, one byte an argument. The first call with a key asks the subclass's
 * _specialize(key) for the compiled kernels of those types (Python generates and compiles them once);
 * later calls find them in a dict, or in the one-entry cache in front of it. Then the numbers are
 * converted to their parameters' C types and the op driver runs the elementwise-kernel kind. */
#include "binding/elementwise_kernel.h"

#include <string.h>

#include <structmember.h>

#include "binding/args.h"
#include "binding/array_reader.h"
#include "binding/errors.h"
#include "binding/kernel_arguments.h"
#include "binding/xla_ffi.h"
#include "dispatch/dtype.h"
#include "dispatch/elementwise_kernel_kind.h"

#define KERNEL_CAPSULE "lab.kernel"
#define MAX_ARGS (LAB_KERNEL_MAX_ARRAYS + LAB_KERNEL_MAX_SCALARS)

/* A handle, as _specialize returns it: (vectorized kernel, strided kernel, one letter an input -
 * '*' for an array, a scalar's C type letter - whether the operation uses `i`, the elements of one
 * vectorized item). */
typedef struct {
    const void *vectorized, *strided;
    const char *input_letters;
    int uses_index, vector_elements;
} specialization;

typedef struct {
    PyObject_HEAD vectorcallfunc vectorcall;
    lab_state *state;
    int n_inputs, n_outputs;
    PyObject *name;        /* the kernel's name (str), for messages */
    PyObject *param_names; /* tuple of str: the inputs', then the outputs' */
    const char *func;      /* their UTF-8, read once by _setup (the objects above own it) */
    const char *names[MAX_ARGS];
    PyObject *specializations; /* dict: key (bytes) -> handle */
    char last_key[MAX_ARGS];   /* the last call's key, its handle (a strong reference: the dict is
                                  reachable from Python and may be emptied), read */
    PyObject *last_handle;
    int calls_in_flight; /* _setup() refuses while a call reads names and counts (re-entered from Python) */
    specialization last;
} elementwise_launcher;

static int read_handle(PyObject *handle, int n_inputs, specialization *s) {
    if (!PyTuple_Check(handle) || PyTuple_GET_SIZE(handle) != 5 ||
        !PyBytes_Check(PyTuple_GET_ITEM(handle, 2)) ||
        PyBytes_GET_SIZE(PyTuple_GET_ITEM(handle, 2)) != n_inputs) {
        PyErr_SetString(PyExc_TypeError,
                        "_specialize() must return (vectorized kernel, strided kernel, input letters (bytes, "
                        "one an input), uses index, vector elements)");
        return -1;
    }
    s->vectorized = PyCapsule_GetPointer(PyTuple_GET_ITEM(handle, 0), KERNEL_CAPSULE);
    s->strided = s->vectorized ? PyCapsule_GetPointer(PyTuple_GET_ITEM(handle, 1), KERNEL_CAPSULE) : NULL;
    if (!s->strided) return -1;
    s->input_letters = PyBytes_AS_STRING(PyTuple_GET_ITEM(handle, 2));
    s->uses_index = PyObject_IsTrue(PyTuple_GET_ITEM(handle, 3));
    s->vector_elements = (int)PyLong_AsLong(PyTuple_GET_ITEM(handle, 4));
    if (s->uses_index < 0 || (s->vector_elements == -1 && PyErr_Occurred())) return -1;
    if (s->vector_elements < 1 || s->vector_elements > 16) {
        PyErr_SetString(PyExc_ValueError, "_specialize(): vector elements must be 1 to 16");
        return -1;
    }
    return 0;
}

/* The handle for this call's key - the last call's, the dict's, or a new one from _specialize -
 * read into *s. A handle is read once, when it becomes the last call's. */
static PyObject *find_handle(elementwise_launcher *self, const char *key, int n, specialization *s) {
    if (self->last_handle && memcmp(self->last_key, key, (size_t)n) == 0) {
        *s = self->last;
        return self->last_handle;
    }
    PyObject *key_bytes = PyBytes_FromStringAndSize(key, n);
    if (!key_bytes) return NULL;
    /* Strong references from the lookup on: reading a handle runs Python (its bool's __bool__). */
    PyObject *handle = Py_XNewRef(PyDict_GetItemWithError(self->specializations, key_bytes));
    if (!handle && !PyErr_Occurred()) {
        PyObject *made = PyObject_CallMethod((PyObject *)self, "_specialize", "O", key_bytes);
        /* never replace an entry: another thread may have added this key while this one compiled,
         * and a call in flight may be using it */
        if (made) handle = Py_XNewRef(PyDict_SetDefault(self->specializations, key_bytes, made));
        Py_XDECREF(made);
    }
    Py_DECREF(key_bytes);
    if (!handle) return NULL;
    if (read_handle(handle, self->n_inputs, s) < 0) {
        Py_DECREF(handle);
        return NULL;
    }
    memcpy(self->last_key, key, (size_t)n);
    Py_XSETREF(self->last_handle, Py_NewRef(handle));
    self->last = *s;
    Py_DECREF(handle);
    return self->last_handle;
}

static PyObject *run(elementwise_launcher *self, PyObject *const *args, PyObject *stream,
                     lab_elementwise_kernel_call *c, const specialization *s);

/* The call with every output given: read the arguments, find the kernels for their types. */
static PyObject *launch(elementwise_launcher *self, PyObject *const *args, PyObject *stream) {
    const char *func = self->func, *const *names = self->names;
    const int n_in = self->n_inputs, n_out = self->n_outputs, n_args = n_in + n_out;
    lab_elementwise_kernel_call c;
    lab_operands *ops = &c.operands;
    ops->n_outputs = n_out;
    char key[MAX_ARGS];
    for (int k = 0; k < n_out; k++) { /* outputs first, as the iterator wants them */
        PyObject *obj = args[n_in + k];
        if (lab_read_array(self->state, obj, func, names[n_in + k], &ops->arrays[k]) < 0) return NULL;
        ops->names[k] = names[n_in + k];
        key[n_in + k] = (char)('0' + ops->arrays[k].dtype);
    }
    int n_arrays = n_out;
    for (int i = 0; i < n_in; i++) {
        PyObject *obj = args[i];
        char letter = PyBool_Check(obj) ? '?' : PyLong_Check(obj) ? 'q' : PyFloat_Check(obj) ? 'd' : 0;
        if (!letter) letter = lab_numpy_scalar_letter(self->state, obj);
        if (letter) {
            key[i] = letter;
            continue;
        }
        if (n_arrays == LAB_KERNEL_MAX_ARRAYS) {
            PyErr_Format(PyExc_ValueError, "%s(): at most %d array arguments", func, LAB_KERNEL_MAX_ARRAYS);
            return NULL;
        }
        if (lab_read_array(self->state, obj, func, names[i], &ops->arrays[n_arrays]) < 0) return NULL;
        ops->names[n_arrays] = names[i];
        key[i] = (char)('0' + ops->arrays[n_arrays].dtype);
        n_arrays++;
    }
    ops->count = n_arrays;

    specialization s;
    PyObject *handle = find_handle(self, key, n_args, &s);
    if (!handle) return NULL;
    Py_INCREF(handle); /* its kernels stay loaded through the call, whatever other threads do */
    PyObject *result = run(self, args, stream, &c, &s);
    Py_DECREF(handle);
    return result;
}

/* A call, with _setup() locked out until it returns: arguments' Python code may call it. */
static PyObject *launch_locked(elementwise_launcher *self, PyObject *const *args, PyObject *stream) {
    self->calls_in_flight++;
    PyObject *result = launch(self, args, stream);
    self->calls_in_flight--;
    return result;
}

/* The launch once the operands are read and the numbers converted, from either face: the position
 * counter, the kernels for the call's types, the op driver. */
static int launch_specialized(lab_state *state, lab_op_call *call, lab_elementwise_kernel_call *c,
                              const specialization *s) {
    lab_operands *ops = &c->operands;
    const int n_arrays = ops->count;
    c->uses_index = s->uses_index;
    if (s->uses_index) {
        ops->arrays[ops->count] = lab_position_counter(&ops->arrays[0]);
        ops->names[ops->count++] = "i";
    }
    c->vector_elements = s->vector_elements;
    c->vectorized = s->vectorized;
    c->strided = s->strided;
    snprintf(c->step, sizeof c->step, "launching kernel '%s'", call->func);
    for (int k = 0; k < n_arrays; k++)
        lab_op_call_add(call, ops->names[k], &ops->arrays[k], 1, 0, k < ops->n_outputs);
    return lab_run_op(&state->dispatch, &lab_elementwise_kernel_kind, call);
}

/* `value` as the next scalar parameter (C type `letter`) of a call, which takes at most
 * LAB_KERNEL_MAX_SCALARS: what a call from Python and a registration for jit both convert. */
static int add_scalar(lab_parameter_bytes *scalars, int *n_scalars, PyObject *value, char letter,
                      const char *func, const char *name) {
    if (*n_scalars == LAB_KERNEL_MAX_SCALARS) {
        PyErr_Format(PyExc_ValueError, "%s(): at most %d scalar arguments", func, LAB_KERNEL_MAX_SCALARS);
        return -1;
    }
    if (lab_convert_number(value, letter, func, name, -1, &scalars[*n_scalars]) < 0) return -1;
    (*n_scalars)++;
    return 0;
}

/* A key's byte for an argument: '0' + its lab dtype for an array, else a number's type letter. */
static int key_is_array(char byte) { return byte >= '0' && byte < '0' + LAB_NUM_DTYPES; }

/* The call, its kernels found: convert the numbers, run the op driver, return the outputs. */
static PyObject *run(elementwise_launcher *self, PyObject *const *args, PyObject *stream,
                     lab_elementwise_kernel_call *c, const specialization *s) {
    const char *func = self->func, *const *names = self->names;
    const int n_in = self->n_inputs, n_out = self->n_outputs;
    lab_parameter_bytes scalars[LAB_KERNEL_MAX_SCALARS];
    c->n_scalars = 0;
    for (int i = 0; i < n_in; i++) {
        if (s->input_letters[i] == '*') continue;
        if (add_scalar(scalars, &c->n_scalars, args[i], s->input_letters[i], func, names[i]) < 0) return NULL;
    }
    for (int i = 0; i < c->n_scalars; i++) c->scalar_argv[i] = scalars[i].bytes;
    lab_op_call call = {.func = func, .description = c};
    if (lab_parse_stream_arg(self->state, stream, func, &call.stream) < 0) return NULL;
    if (launch_specialized(self->state, &call, c, s) < 0) return lab_raise_failure(&self->state->dispatch);
    if (n_out == 1) return Py_NewRef(args[n_in]);
    PyObject *outputs = PyTuple_New(n_out);
    for (int k = 0; outputs && k < n_out; k++) PyTuple_SET_ITEM(outputs, k, Py_NewRef(args[n_in + k]));
    return outputs;
}

static PyObject *launcher_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames) {
    elementwise_launcher *self = (elementwise_launcher *)self_obj;
    const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *stream = NULL;
    const Py_ssize_t n_kw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < n_kw; k++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, k);
        if (PyUnicode_CompareWithASCIIString(kw, "stream") != 0) {
            PyErr_Format(PyExc_TypeError, "%U() got an unexpected keyword argument '%U' (it takes stream=)",
                         self->name, kw);
            return NULL;
        }
        stream = args[nargs + k] == Py_None ? NULL : args[nargs + k];
    }
    if (self->param_names == NULL) {
        PyErr_SetString(PyExc_TypeError, "_ElementwiseLauncher: _setup() was not called");
        return NULL;
    }
    if (nargs == self->n_inputs && self->n_outputs > 0) { /* outputs left out: Python allocates them */
        PyObject *given = PyTuple_New(nargs);
        for (Py_ssize_t i = 0; given && i < nargs; i++) PyTuple_SET_ITEM(given, i, Py_NewRef(args[i]));
        PyObject *result =
            given ? PyObject_CallMethod(self_obj, "_call_allocating", "OO", given, stream ? stream : Py_None)
                  : NULL;
        Py_XDECREF(given);
        return result;
    }
    if (nargs != self->n_inputs + self->n_outputs) {
        PyErr_Format(PyExc_TypeError,
                     "%U() takes %d inputs and %d outputs (the outputs may be left out), got %zd arguments",
                     self->name, self->n_inputs, self->n_outputs, nargs);
        return NULL;
    }
    return launch_locked(self, args, stream);
}

/* _setup(name, input names, output names): what the Python subclass parsed from the parameters. */
static PyObject *launcher_setup(PyObject *self_obj, PyObject *const *args, Py_ssize_t nargs) {
    elementwise_launcher *self = (elementwise_launcher *)self_obj;
    if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "_setup(name: str, input names: tuple, output names: tuple)");
        return NULL;
    }
    if (self->calls_in_flight) {
        PyErr_SetString(PyExc_RuntimeError, "_setup() cannot change a kernel while a call to it is running");
        return NULL;
    }
    const Py_ssize_t n_in = PyTuple_GET_SIZE(args[1]), n_out = PyTuple_GET_SIZE(args[2]);
    if (n_out < 1 || n_out > LAB_KERNEL_MAX_ARRAYS || n_in + n_out > MAX_ARGS) {
        PyErr_Format(PyExc_ValueError,
                     "an elementwise kernel takes 1 to %d outputs and at most %d parameters",
                     LAB_KERNEL_MAX_ARRAYS, MAX_ARGS);
        return NULL;
    }
    PyObject *names = PySequence_Concat(args[1], args[2]);
    if (!names) return NULL;
    for (Py_ssize_t i = 0; i < n_in + n_out; i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) {
            Py_DECREF(names);
            PyErr_SetString(PyExc_TypeError, "_setup(): parameter names must be str");
            return NULL;
        }
    }
    const char *func = PyUnicode_AsUTF8(args[0]);
    for (Py_ssize_t i = 0; func && i < n_in + n_out; i++) {
        self->names[i] = PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, i));
        if (!self->names[i]) func = NULL;
    }
    if (!func) {
        Py_DECREF(names);
        return NULL;
    }
    self->func = func;
    Py_XSETREF(self->name, Py_NewRef(args[0]));
    Py_XSETREF(self->param_names, names);
    self->n_inputs = (int)n_in;
    self->n_outputs = (int)n_out;
    PyDict_Clear(self->specializations);
    Py_CLEAR(self->last_handle);
    Py_RETURN_NONE;
}

static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    lab_state *state = lab_state_of_type(type);
    if (!state) return NULL;
    elementwise_launcher *self = (elementwise_launcher *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->vectorcall = launcher_vectorcall;
    self->state = state;
    self->specializations = PyDict_New();
    if (!self->specializations) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int launcher_traverse(PyObject *self_obj, visitproc visit, void *arg) {
    elementwise_launcher *self = (elementwise_launcher *)self_obj;
    Py_VISIT(self->name);
    Py_VISIT(self->param_names);
    Py_VISIT(self->specializations);
    Py_VISIT(self->last_handle);
    Py_VISIT(Py_TYPE(self_obj));
    return 0;
}

static int launcher_clear(PyObject *self_obj) {
    elementwise_launcher *self = (elementwise_launcher *)self_obj;
    Py_CLEAR(self->last_handle);
    Py_CLEAR(self->name);
    Py_CLEAR(self->param_names);
    Py_CLEAR(self->specializations);
    return 0;
}

static void launcher_dealloc(PyObject *self) { lab_gc_dealloc(self, launcher_clear); }

/* ---- the jit face: lab.jax.ElementwiseKernel registers one call's types and numbers for XLA's FFI,
 * whose call gives the array inputs and the outputs. The kernels are compiled and loaded at the first
 * run (by _specialize, as for a call from Python), not at registration: tracing needs no GPU. ---- */

typedef struct {
    lab_ffi_kernel base;
    elementwise_launcher *launcher; /* strong references, and the names as registered */
    PyObject *param_names;
    const char *names[MAX_ARGS];
    char key[MAX_ARGS], name[128];
    int n_inputs, n_outputs, n_array_inputs, n_scalars;
    lab_parameter_bytes scalars[LAB_KERNEL_MAX_SCALARS];
    PyObject *handle; /* the specialization, found at the first run */
    specialization s;
} ffi_elementwise;

/* Buffer `index` of the call as operand `slot`, its dtype checked against the registered key. */
static int read_ffi_operand(ffi_elementwise *k, lab_ffi_call *f, int results, int index, int param,
                            lab_operands *ops, int slot) {
    lab_array *a = lab_ffi_buffer(f, results, index, k->names[param]);
    if (!a) return -1;
    if ((int)a->dtype != k->key[param] - '0') {
        lab_fail(LAB_FAILURE_TYPE, "%s: '%s' has dtype %s; the call was registered for %s", k->name,
                 k->names[param], lab_dtype_names[a->dtype], lab_dtype_names[k->key[param] - '0']);
        return -1;
    }
    ops->arrays[slot] = *a;
    ops->names[slot] = k->names[param];
    return 0;
}

static int run_ffi_elementwise(lab_ffi_kernel *base, lab_ffi_call *f) {
    ffi_elementwise *k = (ffi_elementwise *)base;
    if (lab_ffi_count(f, 0) != k->n_array_inputs || lab_ffi_count(f, 1) != k->n_outputs) {
        lab_fail(LAB_FAILURE_TYPE,
                 "%s: XLA gave %lld inputs and %lld outputs; the call was registered with %d and %d", k->name,
                 (long long)lab_ffi_count(f, 0), (long long)lab_ffi_count(f, 1), k->n_array_inputs,
                 k->n_outputs);
        return -1;
    }
    lab_elementwise_kernel_call c;
    lab_operands *ops = &c.operands;
    ops->n_outputs = k->n_outputs;
    for (int o = 0; o < k->n_outputs; o++) { /* outputs first, as the iterator wants them */
        if (read_ffi_operand(k, f, 1, o, k->n_inputs + o, ops, o) < 0) return -1;
    }
    ops->count = k->n_outputs;
    for (int i = 0, j = 0; i < k->n_inputs; i++) {
        if (!key_is_array(k->key[i])) continue; /* a number */
        if (read_ffi_operand(k, f, 0, j++, i, ops, ops->count++) < 0) return -1;
    }
    if (!k->handle) { /* compiled and loaded (or found) once, as for a call from Python */
        k->launcher->calls_in_flight++;
        PyObject *handle = find_handle(k->launcher, k->key, k->n_inputs + k->n_outputs, &k->s);
        k->launcher->calls_in_flight--;
        if (!handle) return lab_fail_from_python();
        k->handle = Py_NewRef(handle);
    }
    for (int i = 0; i < k->n_scalars; i++) c.scalar_argv[i] = k->scalars[i].bytes;
    c.n_scalars = k->n_scalars;
    lab_op_call call = lab_ffi_op_call(f, &c);
    return launch_specialized(lab_ffi_state(f), &call, &c, &k->s);
}

static void release_ffi_elementwise(lab_ffi_kernel *base) {
    ffi_elementwise *k = (ffi_elementwise *)base;
    Py_XDECREF(k->handle);
    Py_XDECREF(k->param_names);
    Py_XDECREF(k->launcher);
    PyMem_Free(k);
}

/* _ffi_register(key, inputs, letters) -> the call's number for lab.jax's FFI calls. key: one byte an
 * argument, '0' + lab dtype for an array (every output among them), as a call from Python makes it;
 * inputs: the inputs, None for an array; letters: one byte an input, the C type letter of a number's
 * parameter ('*' for an array), as _specialize would say - here without compiling. */
static PyObject *launcher_ffi_register(PyObject *self_obj, PyObject *const *args, Py_ssize_t nargs) {
    elementwise_launcher *self = (elementwise_launcher *)self_obj;
    if (!self->param_names) {
        PyErr_SetString(PyExc_TypeError, "_ElementwiseLauncher: _setup() was not called");
        return NULL;
    }
    const int n_in = self->n_inputs, n = self->n_inputs + self->n_outputs;
    if (nargs != 3 || !PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) != n || !PyTuple_Check(args[1]) ||
        PyTuple_GET_SIZE(args[1]) != n_in || !PyBytes_Check(args[2]) || PyBytes_GET_SIZE(args[2]) != n_in) {
        PyErr_Format(PyExc_TypeError,
                     "_ffi_register(key: %d bytes, inputs: a tuple of %d, letters: %d bytes)", n, n_in, n_in);
        return NULL;
    }
    ffi_elementwise *k = PyMem_Calloc(1, sizeof *k);
    if (!k) return PyErr_NoMemory();
    k->base.run = run_ffi_elementwise, k->base.release = release_ffi_elementwise, k->base.name = k->name;
    k->launcher = (elementwise_launcher *)Py_NewRef(self_obj);
    k->param_names = Py_NewRef(self->param_names);
    memcpy(k->names, self->names, sizeof k->names);
    memcpy(k->key, PyBytes_AS_STRING(args[0]), (size_t)n);
    PyOS_snprintf(k->name, sizeof k->name, "%s", self->func);
    k->n_inputs = n_in, k->n_outputs = self->n_outputs;
    const char *letters = PyBytes_AS_STRING(args[2]);
    for (int i = 0; i < n; i++) {
        const int is_array = i >= n_in || letters[i] == '*';
        const int key_array = key_is_array(k->key[i]);
        PyObject *value = i < n_in ? PyTuple_GET_ITEM(args[1], i) : Py_None;
        if (is_array != key_array || is_array != (value == Py_None)) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): argument '%s': the key, the inputs and the letters disagree on "
                         "whether it is an array",
                         k->name, k->names[i]);
            goto fail;
        }
        if (is_array) {
            k->n_array_inputs += i < n_in;
            continue;
        }
        if (add_scalar(k->scalars, &k->n_scalars, value, letters[i], k->name, k->names[i]) < 0) goto fail;
    }
    const Py_ssize_t number = lab_ffi_kernel_register(&k->base);
    return number < 0 ? NULL : PyLong_FromSsize_t(number);
fail:
    release_ffi_elementwise(&k->base);
    return NULL;
}

static PyMethodDef launcher_methods[] = {
    {"_ffi_register", (PyCFunction)(void (*)(void))launcher_ffi_register, METH_FASTCALL,
     "_ffi_register($self, key, inputs, letters, /)\n--\n\nRegisters one call's types and numbers for "
     "lab.jax's FFI calls; returns its number."},
    {"_setup", (PyCFunction)(void (*)(void))launcher_setup, METH_FASTCALL,
     "_setup($self, name, input_names, output_names, /)\n--\n\nThe kernel's name and parameters "
     "(ElementwiseKernel's "
     "__init__)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef launcher_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(elementwise_launcher, vectorcall), READONLY, NULL},
    {"_specializations", T_OBJECT, offsetof(elementwise_launcher, specializations), READONLY,
     "{argument type key (bytes): the compiled kernels' handle}, one entry per combination of types called"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot launcher_slots[] = {
    {Py_tp_doc, "The C base of lab.ElementwiseKernel: calling it reads the arguments, finds the kernels "
                "_specialize() compiled for their types, and launches one."},
    {Py_tp_new, launcher_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_traverse, launcher_traverse},
    {Py_tp_clear, launcher_clear},
    {Py_tp_dealloc, launcher_dealloc},
    {Py_tp_methods, launcher_methods},
    {Py_tp_members, launcher_members},
    {0, NULL},
};

PyType_Spec lab_elementwise_launcher_spec = {"lab.lab._ElementwiseLauncher", sizeof(elementwise_launcher), 0,
                                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                                                 Py_TPFLAGS_HAVE_VECTORCALL,
                                             launcher_slots};
