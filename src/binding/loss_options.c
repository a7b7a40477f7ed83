/* loss_options.c - readers of cross-entropy's options (see loss_options.h). */
#include "binding/loss_options.h"

#include <math.h>

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

/* A real number, not bool (True is an int, and a loss option of True is a mistake). */
static int read_real_not_bool(PyObject *obj, const char *func, const char *name, double *value) {
    if (PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be a real number, got bool", func, name);
        return -1;
    }
    return lab_read_real(obj, func, name, value);
}

int lab_read_label_smoothing(PyObject *obj, const char *func, double *smoothing) {
    if (!obj) return 0;
    if (read_real_not_bool(obj, func, "label_smoothing", smoothing) < 0) return -1;
    if (!(*smoothing >= 0.0 && *smoothing <= 1.0)) {
        PyErr_Format(PyExc_ValueError, "%s(): argument 'label_smoothing' must be in [0, 1], got %R", func,
                     obj);
        return -1;
    }
    return 0;
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
    if (!obj || obj == Py_None) return 0;
    if (read_real_not_bool(obj, func, "softcap", softcap) < 0) return -1;
    if (!(*softcap > 0.0 && isfinite(*softcap))) {
        PyErr_Format(PyExc_ValueError, "%s(): argument 'softcap' must be None or a finite number > 0, got %R",
                     func, obj);
        return -1;
    }
    return 0;
}

int lab_read_z_loss(PyObject *obj, const char *func, double *z_loss) {
    if (!obj) return 0;
    if (read_real_not_bool(obj, func, "z_loss", z_loss) < 0) return -1;
    if (!(*z_loss >= 0.0 && isfinite(*z_loss))) {
        PyErr_Format(PyExc_ValueError, "%s(): argument 'z_loss' must be a finite number >= 0, got %R", func,
                     obj);
        return -1;
    }
    return 0;
}
