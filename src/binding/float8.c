/* float8.c - lab.cast_float8 (level 2 for dispatch/float8_cast_kind.c): parse the call, read the arrays
 * (the outputs may be float8, which other ops refuse), and hand the call to the op driver as the float8
 * cast kind. */
#include "binding/float8.h"

#include <string.h>

#include "binding/array_reader.h"
#include "binding/errors.h"
#include "dispatch/float8_cast_kind.h"

enum { X, SCALE, OUT, OUT_T, AMAX, STREAM, N_PARAMS };

#define P LAB_PARAM
static const lab_signature CAST = {3,
                                   3,
                                   N_PARAMS,
                                   {P(x, ARRAY), P(scale, ARRAY), P(out, ARRAY | LAB_OR_NONE),
                                    P(out_t, ARRAY | LAB_OR_NONE), P(amax, ARRAY | LAB_OR_NONE),
                                    P(stream, STREAM | LAB_OR_NONE)}};
#undef P

static PyObject *py_cast_float8(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "cast_float8";
    PyObject *slots[N_PARAMS];
    if (lab_parse_args(state, func, &CAST, args, nargs, kwnames, slots) < 0) return NULL;
    lab_float8_cast_call description;
    memset(&description, 0, sizeof description);
    lab_array x, scale, out, out_t, amax;
    lab_op_call call = {.func = func, .description = &description};
    if (lab_parse_stream_arg(state, slots[STREAM], func, &call.stream) < 0 ||
        lab_read_array(state, slots[X], func, "x", &x) < 0 ||
        lab_read_array(state, slots[SCALE], func, "scale", &scale) < 0) {
        return NULL;
    }
    description.x = &x, description.scale = &scale;
    if (slots[OUT]) {
        if (lab_read_array_float8(state, slots[OUT], func, "out", &out) < 0) return NULL;
        description.out = &out;
    }
    if (slots[OUT_T]) {
        if (lab_read_array_float8(state, slots[OUT_T], func, "out_t", &out_t) < 0) return NULL;
        description.out_t = &out_t;
    }
    if (slots[AMAX]) {
        if (lab_read_array(state, slots[AMAX], func, "amax", &amax) < 0) return NULL;
        description.amax = &amax;
    }
    lab_float8_cast_add_operands(&call, &description);
    if (lab_run_op(&state->dispatch, &lab_float8_cast_kind, &call) < 0) {
        return lab_raise_failure(&state->dispatch);
    }
    return PyTuple_Pack(2, slots[OUT] ? slots[OUT] : Py_None, slots[OUT_T] ? slots[OUT_T] : Py_None);
}

PyMethodDef lab_float8_methods[] = {
    {"cast_float8", (PyCFunction)(void (*)(void))py_cast_float8, METH_FASTCALL | METH_KEYWORDS,
     "cast_float8(x, scale, out, *, out_t=None, amax=None, stream=None)\n--\n\n"
     "x cast to float8 for lab.matmul's float8 products: out = x * (1 / scale) in float32, rounded to "
     "nearest and "
     "saturated to the format's largest finite value (NaN stays NaN). scale is the dequantization "
     "scale (one float32 element in device memory, what lab.matmul's scale_a and scale_b take: the "
     "product multiplies it back), so making it amax / 448 maps x's largest magnitude to e4m3fn's "
     "largest; a scale of 0 casts every element to 0. x: float16, bfloat16 or float32, C-contiguous. out: "
     "float8_e4m3fn or float8_e5m2 of x's "
     "shape; out_t: x's transpose (x a matrix), cast in the same pass - the layout the products need "
     "for the other side of a linear layer; either may be None, not both. amax (one float32 element): "
     "receives max |x| (NaN if x holds one), the statistic the next scale is made from. float8 arrays "
     "come from producers that name them through DLPack (torch). Returns (out, out_t)."},
    {NULL, NULL, 0, NULL},
};

const lab_signed_function lab_float8_signatures[] = {{"cast_float8", &CAST}, {NULL, NULL}};
