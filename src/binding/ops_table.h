/* ops_table.h - the Python-facing elementwise functions: one row each, read by elementwise.c to make
 * the method table. Adding an op = a functor in kernels/functors.cuh, a row in kernels/ops.def,
 * a row here (and a test).
 *
 * LAB_PY_OP(python name, signature family, kernel op, kernel op for the variant, docstring)
 * The variant is what fused_add_mul runs when `s` is a Python number, and what gelu runs for
 * approximate="tanh"; other rows repeat their op. Docstrings begin with the text signature that
 * inspect.signature() and help() read. */
#define LAB_DOC_OPERANDS                                                                                     \
    "Operands: CUDA arrays from any producer (torch, CuPy, Numba, JAX, lab.Array, any object with "          \
    "__cuda_array_interface__). Inputs broadcast against the output by NumPy's rules (the output never "     \
    "broadcasts); any strides, including negative and zero; dtypes may mix (NumPy promotion, the result "    \
    "cast to the output's dtype). An input may be the output itself (in place) but not partially overlap "   \
    "it. stream: where to launch (default: lab.stream(), else the producer's stream, else the legacy "       \
    "default stream)."
#define LAB_DOC_TAIL "\n\nWrites into `out` and returns it. " LAB_DOC_OPERANDS
#define LAB_FLOAT_DTYPES "\nDtypes: float16, bfloat16, float32, float64 (half types compute in float32)."
#define LAB_ALL_DTYPES                                                                                       \
    "\nDtypes: float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8 "                       \
    "(half types compute in float32; integers wrap on overflow)."

LAB_PY_OP(vector_add, BINARY, ADD, ADD,
          "vector_add(a, b, out, *, stream=None)\n--\n\nout = a + b (add's first name)." LAB_DOC_TAIL
              LAB_ALL_DTYPES)
LAB_PY_OP(add, ADD, ADD, ADD,
          "add(a, b, out, *, alpha=1, stream=None)\n--\n\nout = a + alpha * b." LAB_DOC_TAIL LAB_ALL_DTYPES)
LAB_PY_OP(sub, BINARY, SUB, SUB,
          "sub(a, b, out, *, stream=None)\n--\n\nout = a - b." LAB_DOC_TAIL LAB_ALL_DTYPES)
LAB_PY_OP(mul, BINARY, MUL, MUL,
          "mul(a, b, out, *, stream=None)\n--\n\nout = a * b." LAB_DOC_TAIL LAB_ALL_DTYPES)
LAB_PY_OP(div, BINARY, DIV, DIV,
          "div(a, b, out, *, stream=None)\n--\n\nout = a / b (true division)." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(
    maximum, BINARY, MAXIMUM, MAXIMUM,
    "maximum(a, b, out, *, stream=None)\n--\n\nout = max(a, b) elementwise; NaN propagates." LAB_DOC_TAIL
        LAB_ALL_DTYPES)
LAB_PY_OP(
    minimum, BINARY, MINIMUM, MINIMUM,
    "minimum(a, b, out, *, stream=None)\n--\n\nout = min(a, b) elementwise; NaN propagates." LAB_DOC_TAIL
        LAB_ALL_DTYPES)
LAB_PY_OP(
    fused_add_mul, FUSED, FUSED_ADD_MUL, FUSED_ADD_MUL_SCALAR,
    "fused_add_mul(a, b, s, out, *, stream=None)\n--\n\nout = (a + b) * s in one pass over memory; s is an "
    "array or a Python number." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(
    axpby, AXPBY, AXPBY, AXPBY,
    "axpby(alpha, x, beta, y, out, *, stream=None)\n--\n\nout = alpha * x + beta * y; alpha and beta are "
    "Python numbers." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(
    add_relu, BINARY, ADD_RELU, ADD_RELU,
    "add_relu(a, b, out, *, stream=None)\n--\n\nout = relu(a + b) in one pass." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(neg, UNARY, NEG, NEG, "neg(x, out, *, stream=None)\n--\n\nout = -x." LAB_DOC_TAIL LAB_ALL_DTYPES)
LAB_PY_OP(abs, UNARY, ABS, ABS, "abs(x, out, *, stream=None)\n--\n\nout = |x|." LAB_DOC_TAIL LAB_ALL_DTYPES)
LAB_PY_OP(sqrt, UNARY, SQRT, SQRT,
          "sqrt(x, out, *, stream=None)\n--\n\nout = sqrt(x)." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(exp, UNARY, EXP, EXP,
          "exp(x, out, *, stream=None)\n--\n\nout = e ** x." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(relu, UNARY, RELU, RELU,
          "relu(x, out, *, stream=None)\n--\n\nout = max(x, 0); NaN stays NaN." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(sigmoid, UNARY, SIGMOID, SIGMOID,
          "sigmoid(x, out, *, stream=None)\n--\n\nout = 1 / (1 + exp(-x))." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(silu, UNARY, SILU, SILU,
          "silu(x, out, *, stream=None)\n--\n\nout = x * sigmoid(x)." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(
    gelu, GELU, GELU, GELU_TANH,
    "gelu(x, out, *, approximate='none', stream=None)\n--\n\nout = x * Phi(x) (approximate='none', with erf) "
    "or "
    "its tanh approximation (approximate='tanh'), as torch.nn.functional.gelu." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(swiglu, GLU, SWIGLU, SWIGLU,
          "swiglu(gate, up, out, *, stream=None)\n--\n\nout = silu(gate) * up, the SwiGLU of a transformer "
          "MLP, in one "
          "pass (torch's eager silu and multiply are two). gate and up may be the two halves of one array "
          "(x[..., :h] and x[..., h:]); the gradients: swiglu_backward." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(
    geglu, GLU, GEGLU, GEGLU,
    "geglu(gate, up, out, *, stream=None)\n--\n\nout = gelu(gate, approximate='tanh') * up, the GeGLU of a "
    "transformer MLP, in one pass. gate and up may be the two halves of one array; the gradients: "
    "geglu_backward." LAB_DOC_TAIL LAB_FLOAT_DTYPES)
LAB_PY_OP(
    copy, COPY, COPY, COPY,
    "copy(src, dst, *, stream=None)\n--\n\ndst[...] = src, converting the dtype where they differ (a cast); "
    "writes into `dst` and returns it. " LAB_DOC_OPERANDS LAB_ALL_DTYPES)
