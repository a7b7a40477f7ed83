"""lab.nn.float8_linear, lab.nn.Float8Linear and lab.nn.patch(float8=...) without a GPU: the operators'
shapes, dtypes and autograd wiring on meta tensors (their fake implementations: what torch.compile
traces), which gradients each flag keeps the float8 copies for, torch's linear wherever the float8
products cannot run (CPU tensors, shapes not multiples of 16), the module's parameters shared and
its state_dict unchanged, and the patch's per-shape rule, its refusals and undo. The products
themselves are checked on the GPU (test_nn_float8_gpu.py)."""
import copy

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "float8_e4m3fn"):
    pytest.skip("this torch has no float8 types", allow_module_level=True)
import lab.nn  # noqa: E402

float8_linear = torch.ops.lab.float8_linear.default
E4M3 = torch.float8_e4m3fn


def meta(*shape, dtype=torch.bfloat16, grad=True):
    return torch.empty(*shape, device="meta", dtype=dtype, requires_grad=grad)


@pytest.mark.parametrize("x_shape", [(64, 32), (2, 16, 32), (32,)], ids=["matrix", "batched", "vector"])
@pytest.mark.parametrize("bias", [False, True])
def test_the_operator_returns_y_and_the_float8_copies_the_backward_reads(x_shape, bias):
    x, w = meta(*x_shape), meta(48, 32)
    b = meta(48) if bias else None
    y, x8_t, x_scale, w8_t, w_scale = float8_linear(x, w, b, True, True)
    rows = x.numel() // 32
    assert y.shape == (*x_shape[:-1], 48) and y.dtype == torch.bfloat16 and y.requires_grad
    assert (x8_t.shape, x8_t.dtype, w8_t.shape, w8_t.dtype) == ((32, rows), E4M3, (32, 48), E4M3)
    assert x_scale.shape == w_scale.shape == () and x_scale.dtype == torch.float32
    assert not any(t.requires_grad for t in (x8_t, x_scale, w8_t, w_scale))
    y.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape and x.grad.dtype == torch.bfloat16
    assert (b.grad.shape == (48,)) if bias else True


@pytest.mark.parametrize("keep_x, keep_weight", [(True, False), (False, True), (False, False)])
def test_only_the_copies_asked_for_are_made(keep_x, keep_weight):
    """keep_x: x8_t, for the weight's gradient; keep_weight: w8_t, for the input's. A gradient whose
    copy was not kept is not made."""
    x, w = meta(64, 32, grad=keep_weight), meta(48, 32, grad=keep_x)
    y, x8_t, _, w8_t, _ = float8_linear(x, w, None, keep_x, keep_weight)
    assert x8_t.numel() == (32 * 64 if keep_x else 0) and w8_t.numel() == (32 * 48 if keep_weight else 0)
    if keep_x or keep_weight:
        y.sum().backward()
        assert (w.grad is not None) == keep_x and (x.grad is not None) == keep_weight


def test_the_backward_operator_makes_only_the_gradients_asked_for():
    grad, x8_t, w8_t = meta(64, 48, grad=False), torch.empty(32, 64, device="meta", dtype=E4M3), \
        torch.empty(32, 48, device="meta", dtype=E4M3)
    scale = torch.empty((), device="meta")
    dx, dw, db = torch.ops.lab.float8_linear_backward.default(grad, x8_t, scale, w8_t, scale, True, False, True)
    assert dx.shape == (64, 32) and dw.numel() == 0 and db.shape == (48,)


def test_the_operators_pass_torch_library_checks():
    x, w, b = meta(64, 32, grad=False), meta(48, 32, grad=False), meta(48, grad=False)
    torch.library.opcheck(float8_linear, (x, w, b, True, True), test_utils=("test_schema", "test_faketensor"))


def test_off_the_gpu_and_for_unaligned_shapes_it_is_torchs_linear():
    g = torch.Generator().manual_seed(0)
    for rows, k, n in [(32, 64, 48), (17, 64, 48), (32, 20, 48)]:
        x = torch.randn(rows, k, generator=g, dtype=torch.float64, requires_grad=True)
        w = torch.randn(n, k, generator=g, dtype=torch.float64, requires_grad=True)
        b = torch.randn(n, generator=g, dtype=torch.float64, requires_grad=True)
        torch.testing.assert_close(lab.nn.float8_linear(x, w, b), torch.nn.functional.linear(x, w, b))
    assert torch.autograd.gradcheck(lab.nn.float8_linear, (x, w, b))


def test_the_rule_for_the_float8_products():
    on_lab = lab.nn.functional._float8_on_lab
    cpu = torch.zeros(32, 64, dtype=torch.bfloat16), torch.zeros(48, 64, dtype=torch.bfloat16)
    assert not on_lab(*cpu, None), "CPU tensors: torch's linear"
    with pytest.raises(TypeError, match=r"argument 'weight' must be a torch.Tensor, got list"):
        lab.nn.float8_linear(cpu[0], [1.0])


def test_the_module_shares_the_layers_parameters_and_keeps_its_state_dict():
    linear = torch.nn.Linear(64, 48, dtype=torch.float64)
    layer = lab.nn.Float8Linear.from_linear(linear)
    assert layer.weight is linear.weight and layer.bias is linear.bias
    assert list(layer.state_dict()) == list(linear.state_dict()) == ["weight", "bias"]
    x = torch.randn(5, 64, dtype=torch.float64)
    torch.testing.assert_close(layer(x), linear(x))
    no_bias = lab.nn.Float8Linear.from_linear(torch.nn.Linear(64, 48, bias=False))
    assert no_bias.bias is None and "bias=False" in repr(no_bias)


def tiny_llama(hidden=32, intermediate=48):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=97, hidden_size=hidden, intermediate_size=intermediate,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=64, tie_word_embeddings=False,
                                      attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).double()


def test_patch_converts_the_projections_the_rule_admits(monkeypatch):
    """With the rule's threshold lowered to the tiny model's sizes every projection is converted (and
    on the CPU runs torch's linear: the loss and gradients are the original's); lm_head never is."""
    original = tiny_llama()
    model = copy.deepcopy(original)
    monkeypatch.setattr(lab.nn.patching, "FLOAT8_MIN_FEATURES", 16)
    result = lab.nn.patch(model, float8="tensorwise")
    try:
        assert result.counts()["float8_linear"] == 7 * 2
        converted = {name for name, what in result.patched if what == "float8_linear"}
        assert "model.layers.0.mlp.down_proj" in converted and "lm_head" not in converted
        assert not lab.nn.patching._plain_linear(model.model.layers[0].mlp.down_proj), \
            "a float8 down_proj is called as a module, not by swiglu_linear"
        ids = torch.randint(0, 97, (2, 16), generator=torch.Generator().manual_seed(1))
        losses = []
        for m in (model, original):
            m.train()
            out = m(input_ids=ids, labels=ids)
            out.loss.backward()
            losses.append(out.loss)
        torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(model.model.layers[1].self_attn.k_proj.weight.grad,
                                   original.model.layers[1].self_attn.k_proj.weight.grad, rtol=1e-5, atol=1e-7)
    finally:
        result.undo()
    assert "forward" not in model.model.layers[0].mlp.down_proj.__dict__


def test_patch_leaves_small_projections_alone_and_says_why():
    result = lab.nn.patch(tiny_llama(hidden=64, intermediate=4096), float8="tensorwise")
    try:
        assert "float8_linear" not in result.counts()
        reasons = dict(result.left_alone)
        assert reasons["model.layers.0.mlp.up_proj"] == \
            "float8: 64 -> 4096 features is below what gains (4096 each way)"
    finally:
        result.undo()
    gains = lab.nn.patching.float8_gains
    assert gains(4096, 14336) and gains(14336, 4096) and gains(4096, 4096)
    assert not gains(4096, 1024) and not gains(2048, 8192) and not gains(4096, 14340)


def test_patch_refuses_an_unknown_recipe():
    with pytest.raises(ValueError, match=r"float8 must be None or one of 'tensorwise'; got 'rowwise'"):
        lab.nn.patch(tiny_llama(), float8="rowwise")


def test_projections_reading_one_tensor_share_its_cast():
    """Float8InputCasts: the same tensor (same version) gets the same cast; a transpose asked for later,
    another tensor, or an in-place change make a new one; the cast goes when its tensor does."""
    casts = lab.nn.functional.Float8InputCasts()
    x = meta(64, 32)
    first = casts.lookup(x, transposed=False)
    assert casts.lookup(x, transposed=False) is first
    with_t = casts.lookup(x, transposed=True)
    assert with_t is not first and with_t[1].shape == (32, 64)
    assert casts.lookup(x, transposed=False) is with_t, "a cast with its transpose serves one without"
    other = meta(64, 32)
    before = casts.lookup(other, transposed=True)
    assert before is not with_t
    with torch.no_grad():
        other.mul_(2)
    after = casts.lookup(other, transposed=True)
    assert after is not before and casts.lookup(other, transposed=True) is after
    del other
    assert casts.cast is None and casts.source is None


def test_a_shared_cast_is_what_the_backward_keeps():
    x, w = meta(64, 32), meta(48, 32)
    x8, x8_t, scale = torch.ops.lab.float8_cast.default(x.detach(), True)
    y, kept_x8_t, kept_scale, _, _ = float8_linear(x, w, None, True, True, x8, x8_t, scale)
    assert kept_x8_t.numel() == 0 and kept_scale.numel() == 0, "outputs may not alias the inputs"
    y.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape


@pytest.fixture
def kernels_stubbed(monkeypatch):
    """lab's calls as no-ops, so the eager path's Python runs on CPU tensors: its wiring, not its numbers."""
    for name in ("norm", "axpby", "cast_float8", "matmul"):
        monkeypatch.setattr(lab, name, lambda *args, **kwargs: None)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("wanted", ["both", "x", "weight"])
def test_the_eager_function_makes_the_gradients_asked_for(kernels_stubbed, shared, wanted):
    from lab.nn import _eager
    x = torch.zeros(2, 32, 64, dtype=torch.bfloat16, requires_grad=wanted in ("both", "x"))
    w = torch.zeros(48, 64, dtype=torch.bfloat16, requires_grad=wanted in ("both", "weight"))
    keep_x, keep_weight = w.requires_grad, x.requires_grad
    casts = torch.ops.lab.float8_cast.default(x.detach(), keep_x) if shared else (None, None, None)
    y = _eager.Float8Linear.run(x, w, None, keep_x, keep_weight, *casts)
    assert y.shape == (2, 32, 48) and y.dtype == torch.bfloat16
    saved_x8_t = y.grad_fn.saved_tensors[0]
    if shared and keep_x:
        assert saved_x8_t is casts[1], "the shared x8_t itself is kept"
    y.backward(torch.zeros_like(y))
    assert (x.grad is not None) == x.requires_grad and (w.grad is not None) == w.requires_grad
    assert x.grad is None or x.grad.shape == x.shape
    assert w.grad is None or w.grad.shape == w.shape


def test_without_grad_the_eager_function_records_nothing(kernels_stubbed):
    from lab.nn import _eager
    x, w = torch.zeros(16, 64, dtype=torch.bfloat16), torch.zeros(48, 64, dtype=torch.bfloat16, requires_grad=True)
    with torch.no_grad():
        y = _eager.Float8Linear.run(x, w, None, False, False, None, None, None)
    assert y.grad_fn is None and y.shape == (16, 48)
