/* module.c - the extension module lab.lab: PyInit_lab and the module's life cycle (level 2).
 *
 * Multi-phase initialisation (PEP 489): PyInit_lab only hands CPython the module definition; the
 * exec slot then creates the state - lab.CudaError and the interned names - and adds the functions.
 * State, not C globals, so every (sub)interpreter that imports lab gets its own, and traverse/clear/
 * free let the garbage collector see and release what the state holds. */
#include "binding/attention.h"
#include "binding/elementwise.h"
#include "binding/elementwise_kernel.h"
#include "binding/errors.h"
#include "binding/float8.h"
#include "binding/foreach.h"
#include "binding/linear_ce.h"
#include "binding/matmul.h"
#include "binding/module_state.h"
#include "binding/random.h"
#include "binding/raw_kernel.h"
#include "binding/reduction.h"
#include "binding/rope.h"
#include "binding/rowwise.h"
#include "binding/runtime.h"
#include "binding/runtime_types.h"
#include "binding/xla_ffi.h"
#include "testing/ffi_holding_gil.h"
#include "testing/introspect.h"
#include "testing/launch_floor.h"
#include "testing/matmul_plan_info.h"
#include "testing/signatures.h"

#include <stdlib.h>
#include <string.h>

#ifndef LAB_VERSION
#define LAB_VERSION "0.0.0+unknown"
#endif

static const char *const NAME_TEXT[LAB_NUM_NAMES] = {
#define LAB_NAME(id, text) text,
#include "binding/names.def"
#undef LAB_NAME
};

static int lab_exec(PyObject *module) {
    lab_state *state = lab_get_state(module);
    state->exchange_cache_len = 0;
    for (int i = 0; i < LAB_NUM_NAMES; i++) {
        state->names[i] = PyUnicode_InternFromString(NAME_TEXT[i]);
        if (!state->names[i]) return -1;
    }
    /* Numba's and CuPy's convention: CUDA_ARRAY_INTERFACE_SYNC=0 means "do not order streams". */
    const char *sync = getenv("LAB_CUDA_ARRAY_INTERFACE_SYNC");
    state->dispatch.order_streams = !(sync && strcmp(sync, "0") == 0);
    for (int d = 0; d < LAB_MAX_DEVICES; d++) {
        state->dispatch.generators[d] = (lab_random_generator){LAB_DEFAULT_SEED, 0};
    }

    state->dispatch.CudaError = lab_create_cuda_error_type();
    if (!state->dispatch.CudaError) return -1;
    if (PyModule_AddObjectRef(module, "CudaError", state->dispatch.CudaError) < 0) return -1;
    state->dispatch.OutOfMemoryError = lab_create_out_of_memory_type(state->dispatch.CudaError);
    if (!state->dispatch.OutOfMemoryError) return -1;
    if (PyModule_AddObjectRef(module, "OutOfMemoryError", state->dispatch.OutOfMemoryError) < 0) return -1;
    state->StreamType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &lab_stream_spec, NULL);
    state->EventType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &lab_event_spec, NULL);
    state->ArrayType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &lab_array_spec, NULL);
    if (!state->StreamType || !state->EventType || !state->ArrayType) return -1;
    if (PyModule_AddType(module, state->StreamType) < 0 || PyModule_AddType(module, state->EventType) < 0 ||
        PyModule_AddType(module, state->ArrayType) < 0) {
        return -1;
    }
    /* lab.Graph, and the C bases of lab.RawKernel and lab.ElementwiseKernel */
    PyType_Spec *const more_types[] = {&lab_graph_spec, &lab_kernel_launcher_spec,
                                       &lab_elementwise_launcher_spec};
    for (size_t k = 0; k < sizeof more_types / sizeof more_types[0]; k++) {
        PyObject *type = PyType_FromModuleAndSpec(module, more_types[k], NULL);
        const int added = type ? PyModule_AddType(module, (PyTypeObject *)type) : -1;
        Py_XDECREF(type);
        if (added < 0) return -1;
    }
    if (PyModule_AddFunctions(module, lab_stream_functions) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_array_functions) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_graph_functions) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_elementwise_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_foreach_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_reduction_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_rowwise_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_raw_kernel_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_matmul_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_linear_ce_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_rope_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_float8_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_random_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_attention_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_xla_ffi_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_introspect_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_launch_floor_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_matmul_plan_info_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_ffi_holding_gil_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, lab_signatures_methods) < 0) return -1;
    if (PyModule_AddStringConstant(module, "__version__", LAB_VERSION) < 0) return -1;
    return 0;
}

lab_state *lab_state_of_type(PyTypeObject *type) {
    PyObject *mro = type->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE)) continue;
        PyObject *module = PyType_GetModule(t);
        if (module) return lab_get_state(module);
        PyErr_Clear();
    }
    PyErr_Format(PyExc_SystemError, "%s: lab's module state not found", type->tp_name);
    return NULL;
}

void lab_gc_dealloc(PyObject *self, inquiry clear) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static int lab_traverse(PyObject *module, visitproc visit, void *arg) {
    lab_state *state = lab_get_state(module);
    if (!state) return 0;
    Py_VISIT(state->dispatch.CudaError);
    Py_VISIT(state->dispatch.OutOfMemoryError);
    Py_VISIT(state->StreamType);
    Py_VISIT(state->EventType);
    Py_VISIT(state->ArrayType);
    Py_VISIT(state->numpy);
    for (int i = 0; i < state->exchange_cache_len; i++) {
        Py_VISIT(state->exchange_cache[i].type);
        Py_VISIT(state->exchange_cache[i].capsule);
    }
    for (int i = 0; i < state->scalar_types_len; i++) Py_VISIT(state->scalar_types[i].type);
    return 0;
}

static int lab_clear(PyObject *module) {
    lab_state *state = lab_get_state(module);
    if (!state) return 0;
    Py_CLEAR(state->dispatch.CudaError);
    Py_CLEAR(state->dispatch.OutOfMemoryError);
    Py_CLEAR(state->StreamType);
    Py_CLEAR(state->EventType);
    Py_CLEAR(state->ArrayType);
    Py_CLEAR(state->numpy);
    for (int i = 0; i < LAB_NUM_NAMES; i++) Py_CLEAR(state->names[i]);
    for (int i = 0; i < state->exchange_cache_len; i++) {
        Py_CLEAR(state->exchange_cache[i].type);
        Py_CLEAR(state->exchange_cache[i].capsule);
    }
    state->exchange_cache_len = 0;
    for (int i = 0; i < state->scalar_types_len; i++) Py_CLEAR(state->scalar_types[i].type);
    state->scalar_types_len = 0;
    return 0;
}

static void lab_free(void *module) {
    lab_state *state = lab_get_state((PyObject *)module);
    for (int d = 0; state && d < LAB_MAX_DEVICES; d++) {
        if (state->dispatch.order_events[d]) {
            cudaEventDestroy((cudaEvent_t)state->dispatch.order_events[d]); /* may fail at exit: harmless */
        }
        state->dispatch.order_events[d] = NULL;
    }
    lab_clear((PyObject *)module);
}

static PyModuleDef_Slot lab_slots[] = {
    {Py_mod_exec, lab_exec},
    {0, NULL},
};

static struct PyModuleDef lab_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "lab.lab",
    .m_doc = "lab's compiled core: CUDA kernels called zero-copy on any CUDA array (see the lab package).",
    .m_size = sizeof(lab_state),
    .m_methods = lab_runtime_methods,
    .m_slots = lab_slots,
    .m_traverse = lab_traverse,
    .m_clear = lab_clear,
    .m_free = lab_free,
};

PyMODINIT_FUNC PyInit_lab(void) { return PyModuleDef_Init(&lab_module); }
