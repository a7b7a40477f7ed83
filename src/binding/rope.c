/* rope.c - lab.rope and lab.rope_backward (level 2 for dispatch/rope_kind.c): parse the call, read
 * the options and then the arrays, and hand the call to the op driver as the rope kind. The two
 * functions differ only in their parameter names and in which way the kernel rotates. */
#include "binding/rope.h"

#include <string.h>

#include "binding/args.h"
#include "binding/array_reader.h"
#include "binding/errors.h"
#include "dispatch/rope_kind.h"

enum { X0, X1, COS, SIN, OUT0, OUT1, ROTARY_DIM, INTERLEAVED, STREAM, N_PARAMS };

#define P LAB_PARAM
#define OPTIONS P(rotary_dim, INT | LAB_OR_NONE), P(interleaved, FLAG), P(stream, STREAM | LAB_OR_NONE)
static const lab_signature FORWARD = {6,
                                      6,
                                      N_PARAMS,
                                      {P(q, ARRAY), P(k, ARRAY | LAB_OR_NONE), P(cos, ARRAY), P(sin, ARRAY),
                                       P(q_out, ARRAY), P(k_out, ARRAY | LAB_OR_NONE), OPTIONS}};
static const lab_signature BACKWARD = {6,
                                       6,
                                       N_PARAMS,
                                       {P(grad_q_out, ARRAY), P(grad_k_out, ARRAY | LAB_OR_NONE),
                                        P(cos, ARRAY), P(sin, ARRAY), P(grad_q, ARRAY),
                                        P(grad_k, ARRAY | LAB_OR_NONE), OPTIONS}};
#undef OPTIONS
#undef P

static PyObject *run_rope(PyObject *module, int backward, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = backward ? "rope_backward" : "rope";
    const lab_signature *sig = backward ? &BACKWARD : &FORWARD;
    PyObject *slots[N_PARAMS];
    if (lab_parse_args(state, func, sig, args, nargs, kwnames, slots) < 0) return NULL;
    lab_rope_call description;
    memset(&description, 0, sizeof description);
    description.backward = backward;
    /* options first: reading them may run Python (__index__, __bool__), which must not see
     * half-read arrays */
    description.rotary_dim = -1; /* the tables' last dimension */
    if (lab_read_int_in(slots[ROTARY_DIM], func, "rotary_dim", &LAB_COUNT, &description.rotary_dim) < 0 ||
        lab_read_flag(slots[INTERLEAVED], func, "interleaved", &description.interleaved) < 0) {
        return NULL;
    }
    if (!slots[X1] != !slots[OUT1]) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): arguments '%s' and '%s' go together: give both or neither (None)", func,
                     backward ? "grad_k_out" : "k", backward ? "grad_k" : "k_out");
        return NULL;
    }
    const char *names[N_PARAMS] = {[X0] = backward ? "grad_q_out" : "q",
                                   [X1] = backward ? "grad_k_out" : "k",
                                   [COS] = "cos",
                                   [SIN] = "sin",
                                   [OUT0] = backward ? "grad_q" : "q_out",
                                   [OUT1] = backward ? "grad_k" : "k_out"};
    lab_array arrays[N_PARAMS];
    lab_array **fields[N_PARAMS] = {[X0] = &description.x[0],     [X1] = &description.x[1],
                                    [COS] = &description.cos,     [SIN] = &description.sin,
                                    [OUT0] = &description.out[0], [OUT1] = &description.out[1]};
    lab_op_call call = {.func = func, .description = &description};
    if (lab_parse_stream_arg(state, slots[STREAM], func, &call.stream) < 0) return NULL;
    for (int slot = X0; slot <= OUT1; slot++) {
        if (!slots[slot]) continue; /* k and k_out, left out together (None) */
        if (lab_read_array(state, slots[slot], func, names[slot], &arrays[slot]) < 0) return NULL;
        *fields[slot] = &arrays[slot];
    }
    description.x_names[0] = names[X0], description.x_names[1] = names[X1];
    description.out_names[0] = names[OUT0], description.out_names[1] = names[OUT1];
    lab_rope_add_operands(&call, &description);
    if (lab_run_op(&state->dispatch, &lab_rope_kind, &call) < 0) return lab_raise_failure(&state->dispatch);
    return PyTuple_Pack(2, slots[OUT0], slots[OUT1] ? slots[OUT1] : Py_None);
}

static PyObject *py_rope(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return run_rope(module, 0, args, nargs, kwnames);
}

static PyObject *py_rope_backward(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
    return run_rope(module, 1, args, nargs, kwnames);
}

#define LAB_ROPE_DOC_TAIL                                                                                    \
    " Rotate-half pairs (j, j + rotary_dim/2) as Llama and GPT-NeoX, or with interleaved=True the pairs "    \
    "(2i, 2i+1) as GPT-J; elements past rotary_dim are copied. rotary_dim=None takes the tables' last "      \
    "dimension (one column per element, Hugging Face's tables); a rotary_dim twice it reads one column "     \
    "per pair (flash-attn's). Arrays (batch, heads, positions, head_dim) at any strides - the transposed "   \
    "views attention passes; k may have its own number of heads, or k and its output may be None. cos "      \
    "and sin: (positions, C), (batch or 1, positions, C) or (batch or 1, 1, positions, C), shared by "       \
    "every head; q's dtype or float32. float16, bfloat16, float32 or float64, computing in float32 "         \
    "(float64 for float64); both tensors in one launch. An output may be its input itself (in place). "      \
    "Returns the two outputs as a tuple."
#define LAB_METHOD(name, doc)                                                                                \
    {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef lab_rope_methods[] = {
    LAB_METHOD(
        rope, "rope(q, k, cos, sin, q_out, k_out, *, rotary_dim=None, interleaved=False, stream=None)\n--\n\n"
              "The rotary position embedding: q_out = q * cos + rotate(q) * sin, and the same for k "
              "(Hugging Face's apply_rotary_pos_emb)." LAB_ROPE_DOC_TAIL),
    LAB_METHOD(
        rope_backward,
        "rope_backward(grad_q_out, grad_k_out, cos, sin, grad_q, grad_k, *, rotary_dim=None, "
        "interleaved=False, stream=None)\n--\n\nThe gradients of rope: each pair rotated back by its angle "
        "(the transpose of the forward, exact for any tables)." LAB_ROPE_DOC_TAIL),
    {NULL, NULL, 0, NULL},
};

const lab_signed_function lab_rope_signatures[] = {
    {"rope", &FORWARD}, {"rope_backward", &BACKWARD}, {NULL, NULL}};
#undef LAB_METHOD
