/* random.c - lab.uniform, lab.normal, lab.bernoulli and lab.randint (level 2 for dispatch/random_kind.c), and
 * the per-device generator state they draw from: parse the call, read the parameters and then the array, hand
 * the call to the op driver as the random kind. */
#include "binding/random.h"

#include <math.h>
#include <string.h>

#include "binding/array_reader.h"
#include "binding/errors.h"
#include "dispatch/random_kind.h"

enum { OUT, A, B, STREAM, N_PARAMS };

#define P LAB_PARAM
static const lab_signature UNIFORM = {
    1, 3, N_PARAMS, {P(out, ARRAY), P(low, REAL), P(high, REAL), P(stream, STREAM | LAB_OR_NONE)}};
static const lab_signature NORMAL = {
    1, 3, N_PARAMS, {P(out, ARRAY), P(mean, REAL), P(std, REAL), P(stream, STREAM | LAB_OR_NONE)}};
static const lab_signature BERNOULLI = {
    1, 2, 3, {P(out, ARRAY), P(p, REAL), P(stream, STREAM | LAB_OR_NONE)}};
static const lab_signature RANDINT = {
    3, 3, 4, {P(out, ARRAY), P(low, INT), P(high, INT), P(stream, STREAM | LAB_OR_NONE)}};
static const lab_signature SEED = {1, 1, 1, {P(seed, INT)}};
static const lab_signature DEVICE_STATE = {0, 1, 1, {P(device, DEVICE | LAB_OR_NONE)}};
static const lab_signature SET_STATE = {
    2, 3, 3, {P(seed, INT), P(offset, INT), P(device, DEVICE | LAB_OR_NONE)}};
#undef P

static const lab_real_range FINITE = {-Py_HUGE_VAL, Py_HUGE_VAL, 1, 1, "a finite number"};

/* A random call of `distribution` drawing from the module's generators (and its lab.Graph captures). */
static void start_call(lab_random_call *description, lab_state *state, lab_random_distribution distribution) {
    memset(description, 0, sizeof *description);
    description->launch.distribution = distribution;
    description->generators = state->dispatch.generators;
    description->captures = state->dispatch.random_captures;
}

/* The tail every fill shares, once its numbers are read: the stream, then the array (read last: its
 * reading may run Python, which must not see a half-read call), the op driver. Returns out. */
static PyObject *run_fill(lab_state *state, const char *func, lab_random_call *description, PyObject *out_obj,
                          PyObject *stream_obj) {
    lab_op_call call = {.func = func, .description = description};
    if (lab_parse_stream_arg(state, stream_obj, func, &call.stream) < 0) return NULL;
    lab_array out;
    if (lab_read_array(state, out_obj, func, "out", &out) < 0) return NULL;
    description->out = &out;
    lab_op_call_add(&call, "out", &out, 1, 0, 1);
    if (lab_run_op(&state->dispatch, &lab_random_kind, &call) < 0) return lab_raise_failure(&state->dispatch);
    return Py_NewRef(out_obj);
}

static PyObject *fill(PyObject *module, lab_random_distribution distribution, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames) {
    static const char *const funcs[] = {"uniform", "normal", "bernoulli"};
    static const lab_signature *const signatures[] = {&UNIFORM, &NORMAL, &BERNOULLI};
    const char *func = funcs[distribution];
    lab_state *state = lab_get_state(module);
    PyObject *parsed[N_PARAMS] = {NULL};
    if (lab_parse_args(state, func, signatures[distribution], args, nargs, kwnames, parsed) < 0) return NULL;
    /* bernoulli has one number (p) before its stream, the others two */
    const int two = distribution != LAB_RANDOM_BERNOULLI;
    PyObject *const slots[N_PARAMS] = {
        [OUT] = parsed[0], [A] = parsed[1], [B] = two ? parsed[2] : NULL, [STREAM] = parsed[two ? 3 : 2]};

    /* the numbers first: reading them may run Python (__float__), which must not see a half-read array */
    lab_random_call description;
    start_call(&description, state, distribution);
    double a = distribution == LAB_RANDOM_BERNOULLI ? 0.5 : 0.0, b = 1.0;
    if (distribution == LAB_RANDOM_UNIFORM) {
        if ((slots[A] && lab_read_real_in(slots[A], func, "low", &FINITE, &a) < 0) ||
            (slots[B] && lab_read_real_in(slots[B], func, "high", &FINITE, &b) < 0)) {
            return NULL;
        }
        if (!(a <= b)) {
            return PyErr_Format(PyExc_ValueError,
                                "uniform(): argument 'low' must be at most 'high', got low=%R high=%R",
                                slots[A] ? slots[A] : Py_None, slots[B] ? slots[B] : Py_None);
        }
    } else if (distribution == LAB_RANDOM_NORMAL) {
        if ((slots[A] && lab_read_real_in(slots[A], func, "mean", &FINITE, &a) < 0) ||
            (slots[B] && lab_read_real_in(slots[B], func, "std", &LAB_NONNEGATIVE, &b) < 0)) {
            return NULL;
        }
    } else if (slots[A] && lab_read_real_in(slots[A], func, "p", &LAB_UNIT, &a) < 0) {
        return NULL;
    }
    description.launch.a = a;
    description.launch.b = b;
    return run_fill(state, func, &description, slots[OUT], slots[STREAM]);
}

static PyObject *py_uniform(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return fill(module, LAB_RANDOM_UNIFORM, args, nargs, kwnames);
}
static PyObject *py_normal(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return fill(module, LAB_RANDOM_NORMAL, args, nargs, kwnames);
}
static PyObject *py_bernoulli(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return fill(module, LAB_RANDOM_BERNOULLI, args, nargs, kwnames);
}

/* randint(out, low, high): integers uniform in [low, high), any int64 bounds with low < high. */
static PyObject *py_randint(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    PyObject *slots[4] = {NULL};
    int64_t low = 0, high = 0;
    if (lab_parse_args(state, "randint", &RANDINT, args, nargs, kwnames, slots) < 0 ||
        lab_read_int64(slots[1], "randint", "low", &low) < 0 ||
        lab_read_int64(slots[2], "randint", "high", &high) < 0) {
        return NULL;
    }
    if (low >= high) {
        return PyErr_Format(PyExc_ValueError,
                            "randint(): argument 'low' must be below 'high' (the range is [low, high)), got "
                            "low=%lld high=%lld",
                            (long long)low, (long long)high);
    }
    lab_random_call description;
    start_call(&description, state, LAB_RANDOM_RANDINT);
    description.launch.low = low;
    description.launch.range = (uint64_t)high - (uint64_t)low;
    return run_fill(state, "randint", &description, slots[0], slots[3]);
}

/* ---- dropout: out = residual + x * keep / (1 - p) ---- */

enum { D_RESIDUAL, D_X, D_P, D_OUT, D_MASK, D_STATE, D_STREAM, D_PARAMS };
#define P LAB_PARAM
#define DROPOUT_OPTIONS                                                                                      \
    P(mask_out, ARRAY | LAB_OR_NONE), P(rng_state, PAIR | LAB_OR_NONE), P(stream, STREAM | LAB_OR_NONE)
static const lab_signature DROPOUT = {3, 3, 6, {P(x, ARRAY), P(p, REAL), P(out, ARRAY), DROPOUT_OPTIONS}};
static const lab_signature DROPOUT_ADD = {
    4, 4, 7, {P(residual, ARRAY), P(x, ARRAY), P(p, REAL), P(out, ARRAY), DROPOUT_OPTIONS}};
#undef DROPOUT_OPTIONS
#undef P

static const lab_real_range DROP_PROBABILITY = {0.0, 1.0, 0, 1, "a number in [0, 1)"};

/* rng_state=(seed, offset): two ints >= 0, as get_rng_state returns them. */
static int read_rng_state(PyObject *obj, const char *func, uint64_t *seed, uint64_t *offset) {
    if (!(PyTuple_Check(obj) || PyList_Check(obj)) || PySequence_Fast_GET_SIZE(obj) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'rng_state' must be a pair (seed, offset) of ints >= 0; got %.100s",
                     func, Py_TYPE(obj)->tp_name);
        return -1;
    }
    /* reading an item may run Python (__index__) that empties a list: hold both first */
    PyObject *items[2] = {Py_NewRef(PySequence_Fast_GET_ITEM(obj, 0)),
                          Py_NewRef(PySequence_Fast_GET_ITEM(obj, 1))};
    int64_t values[2] = {0, 0};
    const int failed = lab_read_int_in(items[0], func, "rng_state[0]", &LAB_COUNT, &values[0]) < 0 ||
                       lab_read_int_in(items[1], func, "rng_state[1]", &LAB_COUNT, &values[1]) < 0;
    Py_DECREF(items[0]);
    Py_DECREF(items[1]);
    *seed = (uint64_t)values[0];
    *offset = (uint64_t)values[1];
    return failed ? -1 : 0;
}

static PyObject *run_dropout(PyObject *module, int with_residual, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
    const char *func = with_residual ? "dropout_add" : "dropout";
    lab_state *state = lab_get_state(module);
    PyObject *parsed[D_PARAMS] = {NULL};
    if (lab_parse_args(state, func, with_residual ? &DROPOUT_ADD : &DROPOUT, args, nargs, kwnames,
                       with_residual ? parsed : parsed + 1) < 0) {
        return NULL; /* dropout has no residual: its parameters fill the slots from x on */
    }
    lab_random_call description;
    start_call(&description, state, LAB_RANDOM_DROPOUT);
    description.x_name = "x";
    double p = 0.0;
    if (lab_read_real_in(parsed[D_P], func, "p", &DROP_PROBABILITY, &p) < 0) return NULL;
    description.launch.a = p;
    description.launch.b = 1.0 / (1.0 - p);
    if (parsed[D_STATE]) {
        if (read_rng_state(parsed[D_STATE], func, &description.launch.seed, &description.launch.offset) < 0) {
            return NULL;
        }
        description.explicit_state = 1;
    }
    lab_op_call call = {.func = func, .description = &description};
    if (lab_parse_stream_arg(state, parsed[D_STREAM], func, &call.stream) < 0) return NULL;
    lab_array arrays[4];
    if (lab_read_array(state, parsed[D_OUT], func, "out", &arrays[0]) < 0 ||
        lab_read_array(state, parsed[D_X], func, "x", &arrays[1]) < 0 ||
        (with_residual && lab_read_array(state, parsed[D_RESIDUAL], func, "residual", &arrays[2]) < 0) ||
        (parsed[D_MASK] && lab_read_array(state, parsed[D_MASK], func, "mask_out", &arrays[3]) < 0)) {
        return NULL;
    }
    description.out = &arrays[0];
    description.x = &arrays[1];
    description.residual = with_residual ? &arrays[2] : NULL;
    description.mask = parsed[D_MASK] ? &arrays[3] : NULL;
    lab_random_add_operands(&call, &description);
    if (lab_run_op(&state->dispatch, &lab_random_kind, &call) < 0) return lab_raise_failure(&state->dispatch);
    return Py_NewRef(parsed[D_OUT]);
}

static PyObject *py_dropout(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return run_dropout(module, 0, args, nargs, kwnames);
}
static PyObject *py_dropout_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
    return run_dropout(module, 1, args, nargs, kwnames);
}

/* The device a state call names: an ordinal below LAB_MAX_DEVICES, or -1 for every device (None). */
static int state_device(PyObject *obj, const char *func, int *device) {
    *device = -1;
    if (!obj) return 0;
    if (lab_read_device(obj, func, device) < 0) return -1;
    if (*device >= LAB_MAX_DEVICES) {
        PyErr_Format(PyExc_ValueError, "%s(): argument 'device' must be below %d, got %d", func,
                     LAB_MAX_DEVICES, *device);
        return -1;
    }
    return 0;
}

/* 0, or -1 with RuntimeError when a lab.Graph captures on `device` (-1: on any): a captured draw
 * takes the state each replay writes, from the generator as it is at the replay, so setting it in
 * the middle of a capture would give the capture's draws numbers no replay can reproduce. */
static int refuse_during_capture(const lab_state *state, int device, const char *func) {
    for (int d = 0; d < LAB_MAX_DEVICES; d++) {
        if ((device < 0 || d == device) && state->dispatch.random_captures[d].capture_id != 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): a lab.Graph is capturing on device %d; set the generator's state before "
                         "the capture or between replays (each replay draws from the state it finds)",
                         func, d);
            return -1;
        }
    }
    return 0;
}

static PyObject *py_manual_seed(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    lab_state *state = lab_get_state(module);
    PyObject *slots[1];
    int64_t seed = 0;
    if (lab_parse_args(state, "manual_seed", &SEED, args, nargs, NULL, slots) < 0 ||
        lab_read_int_in(slots[0], "manual_seed", "seed", &LAB_COUNT, &seed) < 0 ||
        refuse_during_capture(state, -1, "manual_seed") < 0) {
        return NULL;
    }
    for (int d = 0; d < LAB_MAX_DEVICES; d++)
        state->dispatch.generators[d] = (lab_random_generator){(uint64_t)seed, 0};
    Py_RETURN_NONE;
}

static PyObject *py_get_rng_state(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    lab_state *state = lab_get_state(module);
    PyObject *slots[1];
    int device = -1;
    if (lab_parse_args(state, "get_rng_state", &DEVICE_STATE, args, nargs, NULL, slots) < 0 ||
        state_device(slots[0], "get_rng_state", &device) < 0) {
        return NULL;
    }
    if (device < 0 && cudaGetDevice(&device) != cudaSuccess) device = 0; /* no GPU: device 0's state */
    const lab_random_generator g = state->dispatch.generators[device < LAB_MAX_DEVICES ? device : 0];
    return Py_BuildValue("(KK)", (unsigned long long)g.seed, (unsigned long long)g.offset);
}

static PyObject *py_set_rng_state(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    lab_state *state = lab_get_state(module);
    PyObject *slots[3];
    int64_t seed = 0, offset = 0;
    int device = -1;
    if (lab_parse_args(state, "set_rng_state", &SET_STATE, args, nargs, NULL, slots) < 0 ||
        lab_read_int_in(slots[0], "set_rng_state", "seed", &LAB_COUNT, &seed) < 0 ||
        lab_read_int_in(slots[1], "set_rng_state", "offset", &LAB_COUNT, &offset) < 0 ||
        state_device(slots[2], "set_rng_state", &device) < 0) {
        return NULL;
    }
    if (device < 0 && cudaGetDevice(&device) != cudaSuccess) device = 0;
    if (refuse_during_capture(state, device < LAB_MAX_DEVICES ? device : 0, "set_rng_state") < 0) return NULL;
    state->dispatch.generators[device < LAB_MAX_DEVICES ? device : 0] =
        (lab_random_generator){(uint64_t)seed, (uint64_t)offset};
    Py_RETURN_NONE;
}

#define LAB_FILL_DOC_TAIL                                                                                    \
    " out: a C-contiguous float16, bfloat16, float32 or float64 CUDA array from any producer, written in "   \
    "place and returned. Element i's number depends only on the device's generator state (seed, offset) "    \
    "and i - not on the GPU or the launch - and the call moves the offset on (Philox4x32-10, "               \
    "counter-based, "                                                                                        \
    "as cuRAND and torch)."
#define LAB_METHOD(name, flags, doc) {#name, (PyCFunction)(void (*)(void))py_##name, flags, doc}

PyMethodDef lab_random_methods[] = {
    LAB_METHOD(uniform, METH_FASTCALL | METH_KEYWORDS,
               "uniform(out, low=0.0, high=1.0, *, stream=None)\n--\n\nFills out with numbers uniform in "
               "[low, high)." LAB_FILL_DOC_TAIL),
    LAB_METHOD(normal, METH_FASTCALL | METH_KEYWORDS,
               "normal(out, mean=0.0, std=1.0, *, stream=None)\n--\n\nFills out with normally distributed "
               "numbers (Box-Muller)." LAB_FILL_DOC_TAIL),
    LAB_METHOD(
        randint, METH_FASTCALL | METH_KEYWORDS,
        "randint(out, low, high, *, stream=None)\n--\n\nFills out with integers uniform in [low, high) "
        "(any int64 bounds; out of any lab dtype whose values hold the range - a float dtype rounds "
        "large integers). Element i's integer depends only on the device's generator state (seed, "
        "offset) and i: one 32-bit word of Philox4x32-10 an element (two for a range wider than 2^32), "
        "times the range, its high half (bias at most range / 2^32, as torch's modulo)."),
    LAB_METHOD(bernoulli, METH_FASTCALL | METH_KEYWORDS,
               "bernoulli(out, p=0.5, *, stream=None)\n--\n\nFills out with 1 with probability p, else "
               "0." LAB_FILL_DOC_TAIL),
    LAB_METHOD(
        dropout, METH_FASTCALL | METH_KEYWORDS,
        "dropout(x, p, out, *, mask_out=None, rng_state=None, stream=None)\n--\n\nout = x / (1 - p) where "
        "kept, 0 where dropped, each element dropped with probability p; mask_out (uint8) gets 1 where "
        "kept. Element i is kept where its uniform number from the generator state is at least p, so "
        "the backward is this call on the gradient with rng_state=(seed, offset) as get_rng_state() "
        "returned it before the forward: the same elements kept, nothing drawn. x, out (which may be x) "
        "and mask_out: C-contiguous, one shape; float16, bfloat16, float32 or float64. Returns out."),
    LAB_METHOD(
        dropout_add, METH_FASTCALL | METH_KEYWORDS,
        "dropout_add(residual, x, p, out, *, mask_out=None, rng_state=None, stream=None)\n--\n\nout = "
        "residual + dropout(x, p) in one pass (a residual connection's dropout); otherwise as dropout. "
        "Its backward: the residual's gradient is the output's, x's is dropout of it with the forward's "
        "rng_state. Returns out."),
    LAB_METHOD(manual_seed, METH_FASTCALL,
               "manual_seed(seed, /)\n--\n\nSets every device's generator to (seed, offset 0): the numbers "
               "that follow are the same as after any other manual_seed(seed)."),
    LAB_METHOD(get_rng_state, METH_FASTCALL,
               "get_rng_state(device=None, /)\n--\n\nThe device's generator state as (seed, offset) (the "
               "current device's for None)."),
    LAB_METHOD(set_rng_state, METH_FASTCALL,
               "set_rng_state(seed, offset, device=None, /)\n--\n\nSets the device's generator state (the "
               "current device's for None), as get_rng_state returned it."),
    {NULL, NULL, 0, NULL},
};
#undef LAB_METHOD

const lab_signed_function lab_random_signatures[] = {
    {"uniform", &UNIFORM},         {"randint", &RANDINT},
    {"normal", &NORMAL},           {"bernoulli", &BERNOULLI},
    {"manual_seed", &SEED},        {"get_rng_state", &DEVICE_STATE},
    {"set_rng_state", &SET_STATE}, {"dropout", &DROPOUT},
    {"dropout_add", &DROPOUT_ADD}, {NULL, NULL}};
