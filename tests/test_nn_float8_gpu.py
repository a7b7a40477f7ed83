"""lab.nn.float8_linear on a GPU with float8 tensor cores: the forward and both gradients against
NumPy-style float64 products of the operands quantized the way the recipe says (x and w to e4m3fn,
the output gradient to e5m2, each scaled by its own amax) - so a wrong scale, layout or format
fails, where a comparison with the unquantized product could not tell it from float8's rounding;
each gradient made only when wanted; inference; torch's linear where the products cannot run;
torch.compile; and lab.nn.patch(float8="tensorwise") training a small Llama."""
import copy

import pytest

from producers import torch_float8_or_skip as float8_torch_or_skip

pytestmark = pytest.mark.gpu

DTYPES = ["bfloat16", "float16", "float32"]
SHAPES = [((16, 16), 16), ((64, 128), 48), ((2, 96, 256), 512)]
TOLERANCE = 1e-2  # outputs in 16-bit floats and the forward's fast accumulation; the quantization is emulated


def torch_float8_or_skip():
    torch = float8_torch_or_skip(tensor_cores=True)
    import lab.nn  # noqa: F401
    return torch


def dequantized(torch, t, dtype):
    """t as the recipe stores it: scaled by amax / largest, rounded to `dtype` (saturating), scaled back."""
    largest = torch.finfo(dtype).max
    scale = t.float().abs().max() * (1.0 / largest)
    stored = (t.float() * (1.0 / scale)).clamp(-largest, largest).to(dtype)
    return stored.double() * scale.double()


def relative_error(torch, got, want):
    assert not torch.isnan(got).any(), "NaN in a result"
    return ((got.double() - want).norm() / want.norm().clamp_min(1e-30)).item()


def operands(torch, x_shape, n, dtype, bias, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = getattr(torch, dtype)
    k = x_shape[-1]
    x = (torch.randn(x_shape, device="cuda", generator=g) * 3).to(dt).requires_grad_()
    w = (torch.randn(n, k, device="cuda", generator=g) / k ** 0.5).to(dt).requires_grad_()
    b = torch.randn(n, device="cuda", generator=g).to(dt).requires_grad_() if bias else None
    return x, w, b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("x_shape, n", SHAPES, ids=["16x16x16", "64x128x48", "2x96x256x512"])
def test_forward_and_gradients_match_the_quantized_products(dtype, bias, x_shape, n):
    torch = torch_float8_or_skip()
    import lab.nn
    if bias and dtype == "float32":
        pytest.skip("a float32 layer with a bias runs torch's linear (the float8 epilogue adds 16-bit biases)")
    x, w, b = operands(torch, x_shape, n, dtype, bias)
    e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2
    y = lab.nn.float8_linear(x, w, b)
    assert y.dtype == x.dtype and y.shape == (*x_shape[:-1], n)
    xq, wq = dequantized(torch, x.detach(), e4m3).reshape(-1, x_shape[-1]), dequantized(torch, w.detach(), e4m3)
    want = xq @ wq.t() + (b.detach().double() if bias else 0)
    assert relative_error(torch, y.reshape(-1, n), want) < TOLERANCE

    grad = torch.randn_like(y)
    y.backward(grad)
    gq = dequantized(torch, grad, e5m2).reshape(-1, n)
    assert relative_error(torch, x.grad.reshape(-1, x_shape[-1]), gq @ wq) < TOLERANCE
    assert relative_error(torch, w.grad, gq.t() @ xq) < TOLERANCE
    if bias:
        torch.testing.assert_close(b.grad.double(), grad.reshape(-1, n).double().sum(0), rtol=1e-2, atol=1e-2)


def test_the_functional_runs_the_float8_operator():
    """Not torch's linear in disguise: the same bits as the operator's own output."""
    torch = torch_float8_or_skip()
    import lab.nn
    x, w, _ = operands(torch, (64, 128), 48, "bfloat16", False)
    op = torch.ops.lab.float8_linear.default(x.detach(), w.detach(), None, False, False)[0]
    assert torch.equal(lab.nn.float8_linear(x, w), op)
    assert not torch.equal(op, torch.nn.functional.linear(x, w)), "float8's rounding shows in the result"


def test_projections_sharing_a_cast_give_what_each_alone_gives():
    """q, k and v reading one x through one cast (what lab.nn.patch does): the same outputs and
    gradients, bit for bit, as three float8_linear calls each casting x itself."""
    torch = torch_float8_or_skip()
    import lab.nn
    x, wq, _ = operands(torch, (2, 64, 128), 64, "bfloat16", False, seed=5)
    weights = [wq] + [operands(torch, (2, 64, 128), 32, "bfloat16", False, seed=s)[1] for s in (6, 7)]
    casts = lab.nn.functional.Float8InputCasts()
    shared = [lab.nn.functional._float8_linear_sharing(x, w, None, casts) for w in weights]
    sum(y.float().sum() for y in shared).backward()
    shared_grads = [x.grad.clone()] + [w.grad.clone() for w in weights]
    x.grad = None
    for w in weights:
        w.grad = None
    alone = [lab.nn.float8_linear(x, w) for w in weights]
    sum(y.float().sum() for y in alone).backward()
    for a, b in zip(shared, alone):
        assert torch.equal(a, b)
    for a, b in zip(shared_grads, [x.grad] + [w.grad for w in weights]):
        assert torch.equal(a, b)


@pytest.mark.parametrize("wanted", ["x", "weight"])
def test_each_gradient_alone(wanted):
    torch = torch_float8_or_skip()
    import lab.nn
    x, w, _ = operands(torch, (64, 128), 48, "bfloat16", False, seed=3)
    (w if wanted == "x" else x).requires_grad_(False)
    lab.nn.float8_linear(x, w).sum().backward()
    full_x, full_w, _ = operands(torch, (64, 128), 48, "bfloat16", False, seed=3)
    lab.nn.float8_linear(full_x, full_w).sum().backward()
    got, want = (x.grad, full_x.grad) if wanted == "x" else (w.grad, full_w.grad)
    assert torch.equal(got, want)
    assert (w.grad if wanted == "x" else x.grad) is None


def test_inference_keeps_nothing_and_gives_the_same_output():
    torch = torch_float8_or_skip()
    import lab.nn
    x, w, b = operands(torch, (32, 64), 32, "bfloat16", True)
    trained = lab.nn.float8_linear(x, w, b)
    with torch.no_grad():
        inferred = lab.nn.float8_linear(x, w, b)
    assert torch.equal(trained.detach(), inferred) and inferred.grad_fn is None


def test_zeros_give_zeros_not_nan():
    """An all-zero operand has amax 0 and scale 0: its cast is zeros, and so is every product."""
    torch = torch_float8_or_skip()
    import lab.nn
    x = torch.zeros(32, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(16, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = lab.nn.float8_linear(x, w)
    y.backward(torch.ones_like(y))
    assert (y == 0).all() and (w.grad == 0).all() and not torch.isnan(x.grad).any()


def test_unaligned_token_counts_run_torchs_linear():
    torch = torch_float8_or_skip()
    import lab.nn
    x, w, b = operands(torch, (17, 64), 48, "bfloat16", True)
    assert torch.equal(lab.nn.float8_linear(x, w, b), torch.nn.functional.linear(x, w, b))


def test_under_compile_it_is_the_same_operator():
    torch = torch_float8_or_skip()
    import lab.nn
    torch._dynamo.reset()
    layer = lab.nn.Float8Linear(128, 64, device="cuda", dtype=torch.bfloat16)
    compiled = torch.compile(layer, fullgraph=True)
    x = torch.randn(2, 32, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    got = compiled(x)
    got.sum().backward()
    got_grads = x.grad.clone(), layer.weight.grad.clone(), layer.bias.grad.clone()
    x.grad = layer.weight.grad = layer.bias.grad = None
    want = layer(x)
    want.sum().backward()
    assert torch.equal(got, want)
    for g, w in zip(got_grads, (x.grad, layer.weight.grad, layer.bias.grad)):
        assert torch.equal(g, w)
    torch._dynamo.reset()


def test_a_patched_llama_trains_in_float8(monkeypatch):
    """Every projection of a small Llama in float8 (the rule's threshold lowered to its sizes): the
    first loss within 2% of the bfloat16 patch's, and 30 steps of AdamW on one batch bring it down as
    they do in bfloat16."""
    torch = torch_float8_or_skip()
    transformers = pytest.importorskip("transformers")
    import lab.nn
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      tie_word_embeddings=False)
    torch.manual_seed(0)
    reference = transformers.LlamaForCausalLM(config).to("cuda", torch.bfloat16)
    model = copy.deepcopy(reference)
    monkeypatch.setattr(lab.nn.patching, "FLOAT8_MIN_FEATURES", 16)
    patches = [lab.nn.patch(reference), lab.nn.patch(model, float8="tensorwise")]
    assert patches[1].counts()["float8_linear"] == 14
    ids = torch.randint(0, 256, (4, 64), device="cuda", generator=torch.Generator(device="cuda").manual_seed(1))
    curves = []
    try:
        for m in (reference, model):
            m.train()
            optimizer = torch.optim.AdamW(m.parameters(), lr=3e-3)
            losses = []
            for _ in range(30):
                loss = m(input_ids=ids, labels=ids).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(loss.item())
            curves.append(losses)
    finally:
        for p in patches:
            p.undo()
    bf16, fp8 = curves
    assert all(v == v and abs(v) != float("inf") for v in fp8), "no NaN or inf"
    assert abs(fp8[0] - bf16[0]) / bf16[0] < 0.02
    assert fp8[-1] < 0.5 * fp8[0] and abs(fp8[-1] - bf16[-1]) < 0.25 * bf16[0]
