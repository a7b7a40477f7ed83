/* matmul_plan_info.c - lab.lab._matmul_plan(a, b, out, **keywords): what the matrix product's plan
 * decided for these arrays - which transpose flags and leading dimensions each operand gets, the
 * library's m, n, k, the batches and the epilogue - as a dict, for tests and teaching. It reads the
 * call exactly as lab.matmul does and plans it; it never loads cuBLASLt or calls CUDA. */
#include "testing/matmul_plan_info.h"

#include "binding/errors.h"
#include "binding/matmul.h"

static PyObject *operand_dict(const lab_matmul_operand *op) {
    return Py_BuildValue("{s:O, s:L, s:L, s:L, s:L}", "trans", op->trans ? Py_True : Py_False, "rows",
                         (long long)op->rows, "cols", (long long)op->cols, "ld", (long long)op->ld,
                         "batch_stride", (long long)op->batch_stride);
}

static PyObject *py_matmul_plan(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "_matmul_plan";
    PyObject *slots[LAB_MAX_PARAMS] = {NULL};
    if (lab_parse_args(state, func, lab_matmul_signature(), args, nargs, kwnames, slots) < 0) return NULL;
    if (!slots[2]) { /* left out, or None */
        return PyErr_Format(PyExc_TypeError, "%s() needs 'out' (it plans, never allocates)", func);
    }
    lab_matmul_arrays arrays;
    lab_matmul_call call;
    if (lab_matmul_read(state, func, slots, slots[2], &arrays, &call) < 0) return NULL;
    const int work = lab_plan_matmul(&call, func);
    if (work < 0) return lab_raise_failure(&state->dispatch);
    const lab_matmul_plan *p = &call.plan;
    PyObject *A = operand_dict(&p->A), *B = operand_dict(&p->B), *C = operand_dict(&p->C),
             *D = operand_dict(&p->D);
    PyObject *info = NULL;
    if (A && B && C && D) {
        const char *A_scale = !p->A_scale ? "none" : p->A_scale == call.scale_a ? "scale_a" : "scale_b";
        info = Py_BuildValue(
            "{s:O, s:L, s:L, s:L, s:O, s:O, s:O, s:O, s:O, s:s, s:L, s:O, s:i, s:i, s:i, "
            "s:i, s:i, s:O, s:(OO), s:i, s:s, s:O}",
            "work", work ? Py_True : Py_False, "m", (long long)p->m, "n", (long long)p->n, "k",
            (long long)p->k, "swapped", p->swapped ? Py_True : Py_False, "A", A, "B", B, "C", C, "D", D,
            "A_is", p->A_array == call.a ? "a" : "b", "batch_count", (long long)p->batch_count, "collapsed",
            p->collapsed ? Py_True : Py_False, "epilogue", p->library_epilogue, "compute_type",
            p->compute_type, "scale_type", p->scale_type, "data_type", p->data_type, "out_type", p->out_type,
            "bias_grad_by_lab", call.sum_bias_grad ? Py_True : Py_False, "staged",
            call.stage[0] ? Py_True : Py_False, call.stage[1] ? Py_True : Py_False, "b_data_type",
            p->b_data_type, "A_scale_is", A_scale, "fast_accum", p->fast_accum ? Py_True : Py_False);
    }
    Py_XDECREF(A);
    Py_XDECREF(B);
    Py_XDECREF(C);
    Py_XDECREF(D);
    return info;
}

static PyObject *py_fuse_dgelu_bias_grad(PyObject *module, PyObject *arg) {
    const int fuse = PyObject_IsTrue(arg);
    if (fuse < 0) return NULL;
    const int previous = lab_matmul_fuse_dgelu_bias_grad;
    lab_matmul_fuse_dgelu_bias_grad = fuse;
    return PyBool_FromLong(previous);
}

PyMethodDef lab_matmul_plan_info_methods[] = {
    {"_matmul_fuse_dgelu_bias_grad", py_fuse_dgelu_bias_grad, METH_O,
     "_matmul_fuse_dgelu_bias_grad(fuse, /)\n--\n\nPrivate: True leaves epilogue='dgelu''s bias gradient to "
     "cuBLASLt's DGELU_BGRAD epilogue; False (the default) sums out's columns with lab's reduction after the "
     "product. Returns the previous setting. For benchmarks and tests."},
    {"_matmul_plan", (PyCFunction)(void (*)(void))py_matmul_plan, METH_FASTCALL | METH_KEYWORDS,
     "_matmul_plan(a, b, out=None, *, c=None, alpha=1.0, beta=None, bias=None, epilogue=None, aux_out=None, "
     "aux=None, bias_grad_out=None, allow_tf32=False, stream=None, scale_a=None, scale_b=None, "
     "fast_accum=False)\n--\n\n"
     "Private: lab.matmul's plan for "
     "these arguments as a dict "
     "(the "
     "library's m, n, k; each operand's transpose flag, rows, cols, leading dimension and batch stride; the "
     "batches; the cuBLASLt epilogue, compute and data types - the library's B's own, for mixed float8 - "
     "and which scale is the library's A's). No CUDA call."},
    {NULL, NULL, 0, NULL},
};
