/* loss_options.c - readers of cross-entropy's options (see loss_options.h). */
#include "binding/loss_options.h"

int lab_read_ignore_index(PyObject *obj, const char *func, int64_t *index) {
    if (!obj) return 0;
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'ignore_index' must be an int, got %.200s", func,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow) {
        PyErr_Format(PyExc_ValueError, "%s(): argument 'ignore_index' must fit in int64, got %R", func, obj);
        return -1;
    }
    if (value == -1 && PyErr_Occurred()) return -1;
    *index = value;
    return 0;
}

int lab_read_label_smoothing(PyObject *obj, const char *func, double *smoothing) {
    return lab_read_real_in(obj, func, "label_smoothing", &LAB_UNIT, smoothing);
}

int lab_read_loss_reduction(lab_state *state, PyObject *obj, const char *func,
                            lab_loss_reduction *reduction) {
    if (!obj) return 0;
    static const struct {
        lab_name name;
        lab_loss_reduction value;
    } choices[] = {
        {LAB_NAME_mean, LAB_LOSS_MEAN}, {LAB_NAME_sum, LAB_LOSS_SUM}, {LAB_NAME_none, LAB_LOSS_NONE}};
    for (size_t i = 0; PyUnicode_Check(obj) && i < sizeof choices / sizeof choices[0]; i++) {
        if (PyUnicode_Compare(obj, state->names[choices[i].name]) == 0) {
            *reduction = choices[i].value;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "%s(): argument 'reduction' must be 'mean', 'sum' or 'none', got %R", func,
                 obj);
    return -1;
}

int lab_read_softcap(PyObject *obj, const char *func, double *softcap) {
    return lab_read_real_in(obj, func, "softcap", &LAB_POSITIVE, softcap);
}

int lab_read_z_loss(PyObject *obj, const char *func, double *z_loss) {
    return lab_read_real_in(obj, func, "z_loss", &LAB_NONNEGATIVE, z_loss);
}
