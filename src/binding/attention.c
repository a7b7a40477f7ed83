/* attention.c - lab.attention and lab.attention_backward (level 2 for dispatch/attention_kind.c):
 * parse the call, read the options and then the arrays, and hand the call to the op driver as the
 * attention kind. The two functions share their options and differ in the arrays they take. */
#include "binding/attention.h"

#include <string.h>

#include "binding/array_reader.h"
#include "binding/errors.h"
#include "dispatch/attention_kind.h"

/* The arrays' slots, in each function's positional order, then the options (shared). */
enum { F_Q, F_K, F_V, F_OUT, F_LSE, F_ARRAYS };
enum { B_GRAD_OUT, B_Q, B_K, B_V, B_OUT, B_LSE, B_GRAD_Q, B_GRAD_K, B_GRAD_V, B_ARRAYS };
enum {
    CAUSAL,
    WINDOW,
    SOFTCAP,
    SCALE,
    CU_SEQLENS_Q,
    CU_SEQLENS_K,
    MAX_SEQLEN_Q,
    MAX_SEQLEN_K,
    STREAM,
    N_OPTIONS
};

#define P LAB_PARAM
#define OPTIONS                                                                                              \
    P(causal, FLAG), P(window, PAIR | LAB_OR_NONE), P(softcap, REAL), P(scale, REAL | LAB_OR_NONE),          \
        P(cu_seqlens_q, ARRAY | LAB_OR_NONE), P(cu_seqlens_k, ARRAY | LAB_OR_NONE),                          \
        P(max_seqlen_q, INT | LAB_OR_NONE), P(max_seqlen_k, INT | LAB_OR_NONE),                              \
        P(stream, STREAM | LAB_OR_NONE)
static const lab_signature FORWARD = {
    4,
    5,
    F_ARRAYS + N_OPTIONS,
    {P(q, ARRAY), P(k, ARRAY), P(v, ARRAY), P(out, ARRAY), P(lse, ARRAY | LAB_OR_NONE), OPTIONS}};
static const lab_signature BACKWARD = {9,
                                       9,
                                       B_ARRAYS + N_OPTIONS,
                                       {P(grad_out, ARRAY), P(q, ARRAY), P(k, ARRAY), P(v, ARRAY),
                                        P(out, ARRAY), P(lse, ARRAY), P(grad_q, ARRAY), P(grad_k, ARRAY),
                                        P(grad_v, ARRAY), OPTIONS}};
#undef OPTIONS
#undef P

/* window=(left, right): each an int >= 0, or -1 or None for no bound on that side. */
static int read_window(PyObject *obj, const char *func, int64_t *left, int64_t *right) {
    LAB_ASSERT_NO_ERROR();
    if (!obj) return 0;
    if (!(PyTuple_Check(obj) || PyList_Check(obj)) || PySequence_Fast_GET_SIZE(obj) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'window' must be a pair (left, right) of ints >= 0, -1 or None for no "
                     "bound; got %.100s",
                     func, Py_TYPE(obj)->tp_name);
        return -1;
    }
    static const lab_int_range SIDE = {-1, INT32_MAX, "an int >= -1 (-1 or None: no bound)"};
    /* reading a side may run Python (__index__) that empties a list: hold both items first */
    PyObject *sides[2] = {PySequence_Fast_GET_ITEM(obj, 0), PySequence_Fast_GET_ITEM(obj, 1)};
    Py_INCREF(sides[0]);
    Py_INCREF(sides[1]);
    int64_t *values[2] = {left, right};
    const char *names[2] = {"window[0]", "window[1]"};
    int failed = 0;
    for (int i = 0; i < 2 && !failed; i++) {
        failed = sides[i] != Py_None && lab_read_int_in(sides[i], func, names[i], &SIDE, values[i]) < 0;
    }
    Py_DECREF(sides[0]);
    Py_DECREF(sides[1]);
    return failed ? -1 : 0;
}

static PyObject *run_attention(PyObject *module, int backward, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = backward ? "attention_backward" : "attention";
    const lab_signature *sig = backward ? &BACKWARD : &FORWARD;
    PyObject *slots[B_ARRAYS + N_OPTIONS];
    if (lab_parse_args(state, func, sig, args, nargs, kwnames, slots) < 0) return NULL;
    PyObject **options = slots + (backward ? B_ARRAYS : F_ARRAYS);
    lab_attention_call description;
    memset(&description, 0, sizeof description);
    description.backward = backward;
    description.window_left = description.window_right = -1;
    description.scale = -1.0;
    description.max_seqlen_q = description.max_seqlen_k = -1;
    /* options first: reading them may run Python (__index__, __bool__), which must not see half-read
     * arrays */
    if (lab_read_flag(options[CAUSAL], func, "causal", &description.causal) < 0 ||
        read_window(options[WINDOW], func, &description.window_left, &description.window_right) < 0 ||
        lab_read_real_in(options[SOFTCAP], func, "softcap", &LAB_NONNEGATIVE, &description.softcap) < 0 ||
        lab_read_real_in(options[SCALE], func, "scale", &LAB_POSITIVE, &description.scale) < 0 ||
        lab_read_int_in(options[MAX_SEQLEN_Q], func, "max_seqlen_q", &LAB_COUNT, &description.max_seqlen_q) <
            0 ||
        lab_read_int_in(options[MAX_SEQLEN_K], func, "max_seqlen_k", &LAB_COUNT, &description.max_seqlen_k) <
            0) {
        return NULL;
    }
    if (!options[CU_SEQLENS_Q] != !options[CU_SEQLENS_K]) {
        PyErr_Format(
            PyExc_TypeError,
            "%s(): arguments 'cu_seqlens_q' and 'cu_seqlens_k' go together: give both (a packed batch) "
            "or neither",
            func);
        return NULL;
    }
    lab_op_call call = {.func = func, .description = &description};
    if (lab_parse_stream_arg(state, options[STREAM], func, &call.stream) < 0) return NULL;

    /* every array the function takes, in its slot order, and where the description keeps it */
    lab_array arrays[B_ARRAYS + 2];
    lab_array **fields[B_ARRAYS + 2];
    const char *names[B_ARRAYS + 2];
    PyObject *objects[B_ARRAYS + 2];
    int count = 0;
#define ARRAY(slot, field, text)                                                                             \
    objects[count] = slots[slot], fields[count] = &description.field, names[count++] = text
    if (backward) {
        ARRAY(B_GRAD_OUT, grad_out, "grad_out");
        ARRAY(B_Q, q, "q");
        ARRAY(B_K, k, "k");
        ARRAY(B_V, v, "v");
        ARRAY(B_OUT, out, "out");
        ARRAY(B_LSE, lse, "lse");
        ARRAY(B_GRAD_Q, grad_q, "grad_q");
        ARRAY(B_GRAD_K, grad_k, "grad_k");
        ARRAY(B_GRAD_V, grad_v, "grad_v");
    } else {
        ARRAY(F_Q, q, "q");
        ARRAY(F_K, k, "k");
        ARRAY(F_V, v, "v");
        ARRAY(F_OUT, out, "out");
        ARRAY(F_LSE, lse, "lse");
    }
#undef ARRAY
    objects[count] = options[CU_SEQLENS_Q], fields[count] = &description.cu_seqlens_q,
    names[count++] = "cu_seqlens_q";
    objects[count] = options[CU_SEQLENS_K], fields[count] = &description.cu_seqlens_k,
    names[count++] = "cu_seqlens_k";
    for (int i = 0; i < count; i++) {
        if (!objects[i]) continue; /* lse, cu_seqlens_*: not given */
        if (lab_read_array(state, objects[i], func, names[i], &arrays[i]) < 0) return NULL;
        *fields[i] = &arrays[i];
    }
    lab_attention_add_operands(&call, &description);
    if (lab_run_op(&state->dispatch, &lab_attention_kind, &call) < 0) {
        return lab_raise_failure(&state->dispatch);
    }
    if (backward) return PyTuple_Pack(3, slots[B_GRAD_Q], slots[B_GRAD_K], slots[B_GRAD_V]);
    return PyTuple_Pack(2, slots[F_OUT], slots[F_LSE] ? slots[F_LSE] : Py_None);
}

static PyObject *py_attention(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return run_attention(module, 0, args, nargs, kwnames);
}

static PyObject *py_attention_backward(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames) {
    return run_attention(module, 1, args, nargs, kwnames);
}

#define LAB_ATTENTION_OPTIONS                                                                                \
    "causal=False, window=None, softcap=0.0, scale=None, cu_seqlens_q=None, cu_seqlens_k=None, "             \
    "max_seqlen_q=None, max_seqlen_k=None, stream=None"
#define LAB_ATTENTION_DOC_TAIL                                                                               \
    " q: (batch, heads, positions, head_dim) at any strides that keep head_dim contiguous - the "            \
    "(batch, positions, heads, head_dim) layout transposed is one - float16 or bfloat16, head_dim 64, 96, "  \
    "128 (or 256, forward only); k and v: q's batch and head_dim, a number of heads dividing q's (grouped "  \
    "queries; 1: "                                                                                           \
    "multi-query), their own number of positions. A packed batch: q (tokens, heads, head_dim), k and v "     \
    "likewise, and cu_seqlens_q, cu_seqlens_k (int32, batch + 1 cumulative lengths starting at 0) with "     \
    "max_seqlen_q, max_seqlen_k (the longest sequences): no sequence sees another, no padding is read or "   \
    "written (rows no sequence covers are left as they are). Scores: q.k * scale (default "                  \
    "1/sqrt(head_dim)), or softcap * tanh(q.k * scale / softcap) when softcap > 0. Key j is visible from "   \
    "query i when i + Sk - Sq - left <= j <= i + Sk - Sq + right, window=(left, right) with -1 or None "     \
    "for no bound on a side; causal=True sets right = 0 (the diagonal at the bottom right when the lengths " \
    "differ, as flash-attn). A query that sees no key gets zeros and log-sum-exp +inf. Accumulates in "      \
    "float32; no atomics (the same bits run to run)."
#define LAB_METHOD(name, doc)                                                                                \
    {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef lab_attention_methods[] = {
    LAB_METHOD(attention,
               "attention(q, k, v, out, lse=None, *, " LAB_ATTENTION_OPTIONS
               ")\n--\n\nout = softmax(scores) v without forming the scores in memory (flash "
               "attention on tensor cores). lse, if given (float32, (batch, heads, positions); packed "
               "(heads, tokens)), receives each row's log-sum-exp, which attention_backward takes. "
               "Returns (out, lse)." LAB_ATTENTION_DOC_TAIL),
    LAB_METHOD(
        attention_backward,
        "attention_backward(grad_out, q, k, v, out, lse, grad_q, grad_k, grad_v, *, " LAB_ATTENTION_OPTIONS
        ")\n--\n\nThe gradients of attention with respect to q, k and v, from the forward's out and lse and "
        "the same options, the probabilities recomputed tile by tile. head_dim 64, 96 or 128. Returns "
        "(grad_q, grad_k, grad_v)." LAB_ATTENTION_DOC_TAIL),
    {NULL, NULL, 0, NULL},
};

const lab_signed_function lab_attention_signatures[] = {
    {"attention", &FORWARD}, {"attention_backward", &BACKWARD}, {NULL, NULL}};
#undef LAB_METHOD
