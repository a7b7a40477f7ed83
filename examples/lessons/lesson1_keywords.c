/* lesson1_keywords.c - lesson 1: keyword arguments. add(a, b, out, *, stream=None).
 *
 * METH_FASTCALL | METH_KEYWORDS hands the function a C array of the arguments and a tuple of the
 * keyword names, no dict: args[0 .. nargs) are the positional values, then one value per name in
 * kwnames. Matching a name against the parameters is string comparison - unless the parameter
 * names are *interned*: Python interns the keyword names it compiles, so an interned parameter name
 * is usually the very same object and one pointer compare decides (lessons.h's parse_args falls
 * back to PyUnicode_Compare for a name built at run time). The names are interned once, when the
 * module is made.
 *
 * Here they live in static globals, which is what the next lesson fixes: a static is shared by
 * every interpreter that imports the module, and a PyObject belongs to one. lab keeps its names in
 * module state (src/binding/names.def, interned in src/binding/module.c) and parses with
 * lab_parse_args (src/binding/args.c), which is this parser with messages for each mistake. */
#include "lessons.h"

enum { A, B, OUT, STREAM, N_PARAMS };
static PyObject *names[N_PARAMS]; /* interned at import; see above for why lab does not do this */

static PyObject *add(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *slots[N_PARAMS];
    if (parse_args("add", names, 3, 3, N_PARAMS, args, nargs, kwnames, slots) < 0) return NULL;
    int err = 0;
    const char *error = NULL;
    const int failed = read_and_add(slots, "add", &err, &error);
    if (failed < 0) return NULL;
    if (failed) return PyErr_Format(PyExc_RuntimeError, "add(): CUDA error: %s", error);
    return Py_NewRef(slots[OUT]);
}

static PyMethodDef methods[] = {
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL | METH_KEYWORDS,
     "add(a, b, out, *, stream=None)\n--\n\nout = a + b for float32 or float64 CUDA vectors; returns out."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "lesson1_keywords",
                                    .m_doc = "Lesson 1: keyword arguments.", .m_methods = methods};

PyMODINIT_FUNC PyInit_lesson1_keywords(void) {
    static const char *texts[N_PARAMS] = {"a", "b", "out", "stream"};
    for (int i = 0; i < N_PARAMS; i++) {
        if (!names[i] && !(names[i] = PyUnicode_InternFromString(texts[i]))) return NULL;
    }
    return PyModule_Create(&module);
}
