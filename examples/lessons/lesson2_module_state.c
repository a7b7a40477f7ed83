/* lesson2_module_state.c - lesson 2: module state and multi-phase initialization.
 *
 * Lesson 1 kept its interned names in static globals. A module can be imported by several
 * interpreters in one process (subinterpreters), and each interpreter's objects are its own, so
 * what a module owns belongs in a per-module struct - the module state - that Python allocates
 * with the module (m_size), and that the module's functions find from their first argument
 * (PyModule_GetState). Multi-phase initialization makes that possible: PyInit_ returns only the
 * definition (PyModuleDef_Init), and Python then creates the module and runs its Py_mod_exec slot,
 * which fills the state. The state also holds this module's own exception type, CudaError (a
 * RuntimeError), created per module with PyErr_NewException. m_traverse and m_clear let the garbage
 * collector see the references the state holds, m_free releases them.
 *
 * lab's state (src/binding/module_state.h) holds its interned names, its types (Stream, Event,
 * Array, CudaError) and its dispatch state; src/binding/module.c is its PyInit_lab and exec slot. */
#include "lessons.h"

enum { A, B, OUT, STREAM, N_PARAMS };

typedef struct {
    PyObject *names[N_PARAMS];
    PyObject *cuda_error;
} lesson_state;

static lesson_state *state_of(PyObject *module) { return (lesson_state *)PyModule_GetState(module); }

static PyObject *add(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lesson_state *state = state_of(module);
    PyObject *slots[N_PARAMS];
    if (parse_args("add", state->names, 3, 3, N_PARAMS, args, nargs, kwnames, slots) < 0) return NULL;
    int err = 0;
    const char *error = NULL;
    const int failed = read_and_add(slots, "add", &err, &error);
    if (failed < 0) return NULL;
    if (failed) return PyErr_Format(state->cuda_error, "add(): CUDA error %d: %s", err, error);
    return Py_NewRef(slots[OUT]);
}

static int exec_module(PyObject *module) {
    lesson_state *state = state_of(module);
    static const char *texts[N_PARAMS] = {"a", "b", "out", "stream"};
    for (int i = 0; i < N_PARAMS; i++) {
        if (!(state->names[i] = PyUnicode_InternFromString(texts[i]))) return -1;
    }
    state->cuda_error = PyErr_NewException("lesson2_module_state.CudaError", PyExc_RuntimeError, NULL);
    if (!state->cuda_error) return -1;
    return PyModule_AddObjectRef(module, "CudaError", state->cuda_error);
}

static int traverse(PyObject *module, visitproc visit, void *arg) {
    lesson_state *state = state_of(module);
    if (!state) return 0; /* the state is NULL until the module is executed */
    Py_VISIT(state->cuda_error);
    return 0;
}

static int clear(PyObject *module) {
    lesson_state *state = state_of(module);
    if (!state) return 0;
    for (int i = 0; i < N_PARAMS; i++) Py_CLEAR(state->names[i]);
    Py_CLEAR(state->cuda_error);
    return 0;
}

static void free_module(void *module) { clear((PyObject *)module); }

static PyMethodDef methods[] = {
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL | METH_KEYWORDS,
     "add(a, b, out, *, stream=None)\n--\n\nout = a + b for float32 or float64 CUDA vectors; returns out. "
     "CUDA's errors are lesson2_module_state.CudaError."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {{Py_mod_exec, exec_module}, {0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT,
                                    .m_name = "lesson2_module_state",
                                    .m_doc = "Lesson 2: module state and multi-phase initialization.",
                                    .m_size = sizeof(lesson_state),
                                    .m_methods = methods,
                                    .m_slots = slots,
                                    .m_traverse = traverse,
                                    .m_clear = clear,
                                    .m_free = free_module};

PyMODINIT_FUNC PyInit_lesson2_module_state(void) { return PyModuleDef_Init(&module); }
