/* matmul_float8.c - what lab.matmul takes with float8 inputs (see matmul_kind.h), checked before the
 * plan maps anything: the recipe torch._scaled_mm serves, as cuBLASLt's float8 kernels run it.
 *
 * cuBLASLt multiplies float8_e4m3fn and float8_e5m2 (any pair but two e5m2) into bfloat16, float16 or
 * float32, accumulating in float32, with a per-tensor scale for each input read from device memory:
 * out = alpha * (scale_a * scale_b) * a @ b (+ beta * c) (+ bias). Its float8 kernels read the
 * library's A transposed and B not ("TN"): with NumPy's row-major semantics that is a with its rows
 * contiguous and b with its columns contiguous - b = w.T for a row-major weight w (n x k), the
 * layout a linear layer already has. lab's copy kernel does not take float8, so another layout is
 * refused, not staged: lab.cast_float8 writes either layout (out, or its transpose out_t) in the cast. The
 * epilogues offered are the ones the forward of a layer needs (none, relu, gelu_tanh, each with a bias); the
 * saved activation and the backward epilogues stay with the 16- and 32-bit types. */
#include "dispatch/matmul_kind.h"

#include "dispatch/dtype.h"
#include "dispatch/float8_cast_kind.h"

int lab_matmul_check_float8(const lab_matmul_call *c, const char *func) {
    const lab_dtype a = c->a->dtype, b = c->b->dtype, out = c->out->dtype;
    const int a8 = lab_dtype_is_float8(a), b8 = lab_dtype_is_float8(b);
    if (!a8 && !b8) {
        if (c->fast_accum) {
            return lab_fail(LAB_FAILURE_VALUE,
                            "%s(): 'fast_accum' is for float8 inputs (their tensor cores' partial sums); "
                            "'a' and 'b' are %s and %s",
                            func, lab_dtype_names[a], lab_dtype_names[b]);
        }
        if (!c->scale_a && !c->scale_b) return 0;
        return lab_fail(LAB_FAILURE_TYPE,
                        "%s(): 'scale_a' and 'scale_b' scale float8 inputs; 'a' and 'b' are %s and %s", func,
                        lab_dtype_names[a], lab_dtype_names[b]);
    }
    if (!a8 || !b8) {
        return lab_fail(LAB_FAILURE_TYPE,
                        "%s(): 'a' and 'b' must both be float8 or neither; got %s and %s (convert the other "
                        "one, with its scale)",
                        func, lab_dtype_names[a], lab_dtype_names[b]);
    }
    if (a == LAB_FLOAT8_E5M2 && b == LAB_FLOAT8_E5M2) {
        return lab_fail(
            LAB_FAILURE_TYPE,
            "%s(): 'a' and 'b' are both float8_e5m2; cuBLASLt multiplies e4m3fn by e4m3fn or e5m2, "
            "and e5m2 by e4m3fn (gradients in e5m2 meet weights or activations in e4m3fn)",
            func);
    }
    if (out != LAB_BFLOAT16 && out != LAB_FLOAT16 && out != LAB_FLOAT32) {
        return lab_fail(
            LAB_FAILURE_TYPE,
            "%s(): argument 'out' has dtype %s; for float8 inputs it must be bfloat16, float16 or "
            "float32",
            func, lab_dtype_names[out]);
    }
    if (!c->scale_a || !c->scale_b) {
        return lab_fail(LAB_FAILURE_TYPE,
                        "%s(): float8 inputs need 'scale_a' and 'scale_b' (float32 device scalars: out = "
                        "scale_a * scale_b * a @ b; pass ones where the data is unscaled)",
                        func);
    }
    if (lab_check_float8_scale(c->scale_a, "scale_a", func) < 0 ||
        lab_check_float8_scale(c->scale_b, "scale_b", func) < 0) {
        return -1;
    }
    const struct {
        int refused;
        const char *why;
    } rules[] = {
        {c->aux_out || c->aux || c->bias_grad_out || c->epilogue == LAB_MATMUL_DGELU,
         "with float8 inputs, 'aux_out', 'aux', 'bias_grad_out' and epilogue='dgelu' are not offered (they "
         "are for 16- and 32-bit products)"},
        {c->bias && out == LAB_FLOAT32,
         "with float8 inputs, 'bias' goes with a bfloat16 or float16 out (the bias has out's dtype)"},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if (rules[i].refused) return lab_fail(LAB_FAILURE_VALUE, "%s(): %s", func, rules[i].why);
    }
    return 1;
}
