"""lab.nn.patch on tiny random models of each family it knows, on the CPU (where transformers is
installed): what is replaced and what is left alone, the same parameters and state_dict keys, the loss
and every gradient of a training step equal to the unpatched model's (on the CPU lab.nn runs torch's
formulas, so this tests the patching itself: the shifted labels, the fused head's reductions, the
forwards bound to the right modules), evaluation untouched, and undo. The tolerances are float32's:
transformers' RMSNorm computes in float32 even for a float64 model, torch's rms_norm in float64."""
import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import lab.nn  # noqa: E402

LAYERS = 2
CLOSE = dict(rtol=1e-5, atol=1e-7)
SUMMED = dict(rtol=1e-5, atol=1e-6)  # gradients summed over samples run one by one: float32's rounding, added up


def tiny(family, head_dim=64, **overrides):
    """A random-weight causal LM of `family`, float64 on the CPU: 2 layers, 4 query heads over 2 key heads."""
    prefix = lab.nn.patching.FAMILIES[family]
    config_class = getattr(transformers, f"{prefix}Config")
    config = config_class(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=LAYERS,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=head_dim, max_position_embeddings=64,
                          tie_word_embeddings=False, attn_implementation="eager", **overrides)
    torch.manual_seed(0)
    return getattr(transformers, f"{prefix}ForCausalLM")(config).double()


def batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, 97, (2, 11), generator=g)
    labels = input_ids.clone()
    labels[0, :3] = -100  # a prompt that does not count
    return input_ids, labels


def step(model, **kwargs):
    model.train()
    model.zero_grad(set_to_none=True)
    input_ids, labels = batch()
    out = model(input_ids=input_ids, labels=labels, **kwargs)
    out.loss.backward()
    return out, {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "qwen3"])
def test_a_patched_model_trains_like_the_original(family):
    original = tiny(family)
    model = copy.deepcopy(original)
    result = lab.nn.patch(model)
    try:
        norms = 2 * LAYERS + 1 + (2 * LAYERS if family == "qwen3" else 0)  # Qwen3 normalizes q and k too
        assert result.counts() == {"rms_norm": norms, "swiglu": LAYERS, "rope": 1, "attention": LAYERS,
                                   "linear_cross_entropy": 1}
        assert result.left_alone == [] and result.family == lab.nn.patching.FAMILIES[family]
        assert list(model.state_dict()) == list(original.state_dict())
        want, want_grads = step(original)
        got, got_grads = step(model)
        assert got.logits is None  # a training step with labels never makes the logits
        torch.testing.assert_close(got.loss, want.loss, **CLOSE)
        for name, grad in want_grads.items():
            torch.testing.assert_close(got_grads[name], grad, **CLOSE, msg=name)
        items = torch.tensor(15)  # what transformers' Trainer passes under gradient accumulation
        want, _ = step(original, num_items_in_batch=items)
        got, _ = step(model, num_items_in_batch=items)
        torch.testing.assert_close(got.loss, want.loss, **CLOSE)
        model.eval(), original.eval()
        input_ids, labels = batch(2)
        with torch.no_grad():
            got, want = model(input_ids=input_ids, labels=labels), original(input_ids=input_ids, labels=labels)
        torch.testing.assert_close(got.logits, want.logits)
        torch.testing.assert_close(got.loss, want.loss)
    finally:
        result.undo()
    assert not any("forward" in vars(m) for m in model.modules())
    modeling = __import__(type(model).__module__, fromlist=["apply_rotary_pos_emb"])
    assert modeling.apply_rotary_pos_emb is not lab.nn.patching._rotary


def test_the_rotary_function_is_restored_when_the_last_patch_is_undone():
    import transformers.models.llama.modeling_llama as modeling
    original_function = modeling.apply_rotary_pos_emb
    first, second = lab.nn.patch(tiny("llama")), lab.nn.patch(tiny("llama"))
    assert modeling.apply_rotary_pos_emb is lab.nn.patching._rotary
    first.undo()
    assert modeling.apply_rotary_pos_emb is lab.nn.patching._rotary  # the second model still uses it
    second.undo()
    assert modeling.apply_rotary_pos_emb is original_function


def test_each_replacement_can_be_turned_off():
    model = tiny("llama")
    result = lab.nn.patch(model, rope=False, loss=False, attention=False)
    try:
        assert set(result.counts()) == {"rms_norm", "swiglu"}
        assert "forward" not in vars(model) and model.config._attn_implementation == "eager"
    finally:
        result.undo()


def test_attention_becomes_lab_and_undo_restores_the_models_own():
    model = tiny("mistral", sliding_window=5)
    result = lab.nn.patch(model)
    assert model.config._attn_implementation == "lab"
    assert [name for name, what in result.patched if what == "attention"] == \
        [f"model.layers.{i}.self_attn" for i in range(LAYERS)]
    result.undo()
    assert model.config._attn_implementation == "eager"
    narrow = lab.nn.patch(tiny("llama", head_dim=8))
    try:
        assert "attention" not in narrow.counts()
        assert ("", "attention: head_dim 8; lab's kernels take 64, 96 or 128") in narrow.left_alone
    finally:
        narrow.undo()


def samples(seed=4, lengths=(5, 1, 9, 4)):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 97, (n,), generator=g) for n in lengths]


@pytest.mark.parametrize("path", ["sdpa", "lab"])
@pytest.mark.parametrize("family, overrides", [("llama", {}), ("mistral", {"sliding_window": 3})])
def test_padding_free_and_padded_batches_train_like_each_sample_alone(family, overrides, path, monkeypatch):
    """One row of samples back to back (position_ids restarting at 0, as transformers'
    DataCollatorWithFlattening makes it) and the same samples padded to the longest: the summed loss
    and every gradient equal those of the samples run one by one. On the CPU, path "sdpa" is what lab's
    function runs there - transformers' SDPA with the mask it stands for; path "lab" takes the GPU's
    way - the real tokens gathered into packed batches for lab.attention - with stand-in kernels
    (torch's arithmetic, tests/test_nn_attention.py). Both test the patching: which tokens see which,
    which labels count."""
    if path == "lab":
        from test_nn_attention import StandInKernels
        monkeypatch.setattr(lab.nn._hf_attention, "_on_lab", lambda query, key, dropout: dropout == 0.0)
        monkeypatch.setattr(lab.nn._attention_ops.lab, "attention", StandInKernels.attention)
        monkeypatch.setattr(lab.nn._attention_ops.lab, "attention_backward", StandInKernels.attention_backward)
        StandInKernels.calls = []
    original = tiny(family, **overrides)
    model = copy.deepcopy(original)
    result = lab.nn.patch(model)
    try:
        model.train(), original.train()
        pieces = samples()
        want_loss, want = 0.0, None
        for piece in pieces:
            original.zero_grad(set_to_none=True)
            out = original(input_ids=piece[None], labels=piece[None], num_items_in_batch=1)
            out.loss.backward()
            want_loss += out.loss.item()
            grads = {n: p.grad.clone() for n, p in original.named_parameters()}
            want = grads if want is None else {n: want[n] + g for n, g in grads.items()}
        row = torch.cat(pieces)[None]
        positions = torch.cat([torch.arange(len(p)) for p in pieces])[None]
        model.zero_grad(set_to_none=True)
        out = model(input_ids=row, labels=row, position_ids=positions, num_items_in_batch=1)
        out.loss.backward()
        assert out.loss.item() == pytest.approx(want_loss, rel=1e-6)
        for name, p in model.named_parameters():
            torch.testing.assert_close(p.grad, want[name], **SUMMED, msg=name)
        longest = max(len(p) for p in pieces)
        padded = torch.zeros(len(pieces), longest, dtype=torch.long)
        mask = torch.zeros(len(pieces), longest, dtype=torch.long)
        labels = torch.full((len(pieces), longest), -100)
        for i, piece in enumerate(pieces):  # right padding for some, left for others
            where = slice(0, len(piece)) if i % 2 else slice(longest - len(piece), longest)
            padded[i, where], mask[i, where], labels[i, where] = piece, 1, piece
            labels[i, where.start] = -100  # a sample's first token is no target (left of it is padding)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # each sample's own positions, as generation makes them
        model.zero_grad(set_to_none=True)
        out = model(input_ids=padded, attention_mask=mask, position_ids=positions, labels=labels,
                    num_items_in_batch=1)
        out.loss.backward()
        assert out.loss.item() == pytest.approx(want_loss, rel=1e-6)
        for name, p in model.named_parameters():
            torch.testing.assert_close(p.grad, want[name], **SUMMED, msg=name)
        if path == "lab":
            from test_nn_attention import StandInKernels
            packed = [options for name, options in StandInKernels.calls if name == "attention"]
            assert packed and all(options.get("cu_seqlens_q") is not None for options in packed)
    finally:
        result.undo()


@pytest.mark.parametrize("family, overrides, runs_lab", [("llama", {}, False), ("mistral", {"sliding_window": 3}, True)])
def test_a_plain_batch_runs_sdpa_unless_it_needs_a_mask(family, overrides, runs_lab, monkeypatch):
    """A plain batch (no padding, no packing) goes to SDPA's unmasked kernels, which measured faster than
    lab's; one with a sliding window, which SDPA could only take as a dense mask, goes to lab.attention
    (stand-in kernels, with lab's conditions for running said to hold on the CPU)."""
    from test_nn_attention import StandInKernels
    monkeypatch.setattr(lab.nn._hf_attention, "_on_lab", lambda query, key, dropout: dropout == 0.0)
    monkeypatch.setattr(lab.nn._attention_ops.lab, "attention", StandInKernels.attention)
    monkeypatch.setattr(lab.nn._attention_ops.lab, "attention_backward", StandInKernels.attention_backward)
    StandInKernels.calls = []
    original = tiny(family, **overrides)
    model = copy.deepcopy(original)
    result = lab.nn.patch(model)
    try:
        batch = torch.cat([s[None, :4] for s in samples(lengths=(6, 7))])
        want = original(input_ids=batch).logits
        got = model(input_ids=batch).logits
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        assert bool(StandInKernels.calls) == runs_lab
    finally:
        result.undo()


@pytest.mark.parametrize("recompute_mlp", [True, False])
def test_the_mlp_calls_a_hooked_down_projection_as_a_module(recompute_mlp):
    """With recompute_mlp the MLP calls F.linear on down_proj's weight itself - unless down_proj is not
    a plain nn.Linear without hooks: then the module is called, and its hooks run."""
    original = tiny("llama")
    model = copy.deepcopy(original)
    result = lab.nn.patch(model, recompute_mlp=recompute_mlp)
    try:
        assert lab.nn.patching._plain_linear(model.model.layers[0].mlp.down_proj)
        seen = []
        model.model.layers[0].mlp.down_proj.register_forward_hook(lambda m, args, out: seen.append(out.shape))
        assert not lab.nn.patching._plain_linear(model.model.layers[0].mlp.down_proj)
        got, got_grads = step(model)
        want, want_grads = step(original)
        assert seen == [(2, 11, 32)]
        torch.testing.assert_close(got.loss, want.loss, **CLOSE)
        for name in ("model.layers.0.mlp.down_proj.weight", "model.layers.1.mlp.gate_proj.weight"):
            torch.testing.assert_close(got_grads[name], want_grads[name], **CLOSE)
    finally:
        result.undo()


def test_swiglu_linear_off_the_gpu_is_the_composition():
    g = torch.Generator().manual_seed(3)
    gate, up = (torch.randn(3, 5, 6, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    weight = torch.randn(4, 6, generator=g, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(4, generator=g, dtype=torch.float64, requires_grad=True)
    got = lab.nn.functional.swiglu_linear(gate, up, weight, bias)
    want = torch.nn.functional.linear(torch.nn.functional.silu(gate) * up, weight, bias)
    torch.testing.assert_close(got, want)
    assert torch.autograd.gradcheck(lab.nn.functional.swiglu_linear, (gate, up, weight, bias))


def test_what_it_does_not_understand_it_leaves_alone():
    result = lab.nn.patch(torch.nn.Sequential(torch.nn.Linear(4, 4)))
    assert result.patched == [] and "Sequential" in result.left_alone[0][1]
    assert "is not a family lab.nn.patch knows: Llama, Mistral, Qwen2, Qwen3" in repr(result)
    gelu = lab.nn.patch(tiny("llama", hidden_act="gelu"))
    try:
        assert "swiglu" not in gelu.counts()
        assert [why for _, why in gelu.left_alone] == ["an MLP with activation 'gelu': lab fuses SiLU's (SwiGLU)"] * LAYERS
    finally:
        gelu.undo()
    with pytest.raises(TypeError, match=r"lab.nn.patch\(\): argument 'model' must be a torch.nn.Module, got str"):
        lab.nn.patch("llama")


def test_gradient_checkpointing_and_return_tuples():
    original = tiny("llama")
    model = copy.deepcopy(original)
    result = lab.nn.patch(model)
    try:
        for m in (original, model):
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        want, want_grads = step(original)
        got, got_grads = step(model)
        torch.testing.assert_close(got.loss, want.loss, **CLOSE)
        torch.testing.assert_close(got_grads["model.layers.0.mlp.up_proj.weight"],
                                   want_grads["model.layers.0.mlp.up_proj.weight"])
        input_ids, labels = batch()
        as_tuple = model(input_ids=input_ids, labels=labels, return_dict=False)
        assert isinstance(as_tuple, tuple)
        torch.testing.assert_close(as_tuple[0], want.loss, **CLOSE)
    finally:
        result.undo()


def test_a_patched_model_traces_under_compile():
    """Dynamo follows the instance forwards and the module-level rotary function (aot_eager: traced
    and run through AOTAutograd without generating code, so no compiler is needed)."""
    original = tiny("llama")
    model = copy.deepcopy(original)
    result = lab.nn.patch(model)
    try:
        want, _ = step(original)
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="aot_eager")
        compiled.train()
        input_ids, labels = batch()
        got = compiled(input_ids=input_ids, labels=labels)
        got.loss.backward()
        torch.testing.assert_close(got.loss, want.loss, **CLOSE)
        assert got.logits is None and model.lm_head.weight.grad is not None
    finally:
        result.undo()
        torch._dynamo.reset()


def test_each_forward_derives_the_packing_once_for_all_layers(monkeypatch):
    """Turning position_ids or a padding mask into cumulative lengths reads a length back to the host:
    the layers of one forward share the result instead of each paying for it."""
    derived = []
    real = lab.nn._hf_attention._packing_from_positions
    monkeypatch.setattr(lab.nn._hf_attention, "_packing_from_positions",
                        lambda *a: derived.append(1) or real(*a))
    model = tiny("llama")
    result = lab.nn.patch(model)
    try:
        pieces = samples()
        row = torch.cat(pieces)[None]
        positions = torch.cat([torch.arange(len(p)) for p in pieces])[None]
        with torch.no_grad():
            model(input_ids=row, position_ids=positions)
            assert len(derived) == 1  # LAYERS attention modules, one derivation
            model(input_ids=row, position_ids=positions.clone())
            assert len(derived) == 2  # another tensor: derived anew
    finally:
        result.undo()
