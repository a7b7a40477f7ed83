/* lesson4_plan_launch.c - lesson 4: an op split into a plan and a launch.
 *
 * Until now each add read its arguments and launched in one function. lab splits every op in two:
 * a *plan* - pure C, no CUDA call - that checks the arguments and decides everything about the
 * launch into a plain struct, and a *launch* that only turns that struct into kernel launches. The
 * plan is then testable where there is no GPU (plan() below returns it as a dict), every refusal
 * happens before any CUDA work, and the struct is the whole contract between the two sides: the
 * launch could be in another language, another file, another library (in lab it is: the plan is
 * C in src/dispatch/, the launch is CUDA C++ in src/kernels/, and the struct is declared in
 * src/kernels/launch.h).
 *
 * This plan makes one decision beyond reading: the path. Three contiguous float32 vectors go to the
 * plain kernel (one load per element, no multiply for the index); anything else to the strided one.
 * lab's elementwise plan (src/dispatch/elementwise_kind.c) chooses among six paths the same way,
 * and the op driver (src/dispatch/driver.c) runs plan, then launch, for every kind of op. */
#include "lessons.h"

typedef enum { PATH_CONTIGUOUS_F32, PATH_STRIDED } add_path;

/* Everything the launch needs, decided on the host. */
typedef struct {
    add_path path;
    int is_double;
    void *out;
    const void *a, *b;
    long long n, out_stride, a_stride, b_stride;
    void *stream;
} add_launch;

/* The plan: read, check, decide. No CUDA call. 0, or -1 with a Python exception. */
static int plan_add(PyObject *const *objs, add_launch *l) {
    vector a, b, out;
    if (read_add_operands(objs, "add", &a, &b, &out) < 0) return -1;
    const int contiguous = a.stride == 1 && b.stride == 1 && out.stride == 1;
    *l = (add_launch){.path = contiguous && !out.is_double ? PATH_CONTIGUOUS_F32 : PATH_STRIDED,
                      .is_double = out.is_double,
                      .out = out.data,
                      .a = a.data,
                      .b = b.data,
                      .n = out.n,
                      .out_stride = out.stride,
                      .a_stride = a.stride,
                      .b_stride = b.stride,
                      .stream = launch_stream(out.stream)};
    return 0;
}

/* The launch: the struct to kernels. No Python. Returns the CUDA error as int (0 = success). */
static int launch_add(const add_launch *l, const char **error) {
    if (l->path == PATH_CONTIGUOUS_F32) {
        return lessons_launch_add_f32((float *)l->out, (const float *)l->a, (const float *)l->b, l->n,
                                      l->stream, error);
    }
    return lessons_launch_add_strided(l->is_double, l->out, l->a, l->b, l->n, l->out_stride, l->a_stride,
                                      l->b_stride, l->stream, error);
}

static PyObject *add(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "add(a, b, out) takes 3 arguments, got %zd", nargs);
    add_launch l;
    if (plan_add(args, &l) < 0) return NULL;
    const char *error = NULL;
    if (launch_add(&l, &error) != 0) return PyErr_Format(PyExc_RuntimeError, "add(): CUDA error: %s", error);
    return Py_NewRef(args[2]);
}

static PyObject *plan(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "plan(a, b, out) takes 3 arguments, got %zd", nargs);
    add_launch l;
    if (plan_add(args, &l) < 0) return NULL;
    return Py_BuildValue(
        "{s:s, s:s, s:L, s:(LLL)}", "path", l.path == PATH_CONTIGUOUS_F32 ? "contiguous" : "strided", "dtype",
        l.is_double ? "float64" : "float32", "n", l.n, "strides", l.out_stride, l.a_stride, l.b_stride);
}

static PyMethodDef methods[] = {
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL,
     "add(a, b, out, /)\n--\n\nout = a + b: the plan, then the launch; returns out."},
    {"plan", (PyCFunction)(void (*)(void))plan, METH_FASTCALL,
     "plan(a, b, out, /)\n--\n\nThe plan add would launch, as a dict (path, dtype, n, strides); no CUDA "
     "call."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "lesson4_plan_launch",
                                    .m_doc = "Lesson 4: an op split into a plan and a launch.",
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit_lesson4_plan_launch(void) { return PyModuleDef_Init(&module); }
