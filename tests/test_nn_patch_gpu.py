"""lab.nn.patch on a GPU: tiny random models of each family in bfloat16 train like the unpatched model
over a few AdamW steps (losses within bfloat16's tolerance, step by step), the patched modules reach
lab's kernels, and a patched model runs under torch.compile."""
import copy

import pytest

from producers import producer_or_skip

pytestmark = pytest.mark.gpu


def tiny(torch, transformers, family):
    import lab.nn
    prefix = lab.nn.patching.FAMILIES[family]
    config = getattr(transformers, f"{prefix}Config")(
        vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, max_position_embeddings=256, tie_word_embeddings=False,
        attn_implementation="sdpa")
    torch.manual_seed(0)
    return getattr(transformers, f"{prefix}ForCausalLM")(config).to("cuda", torch.bfloat16)


def train(torch, model, steps=4):
    """AdamW steps on a right-padded batch: a plain one would run SDPA's own kernels, not lab's."""
    g = torch.Generator(device="cuda").manual_seed(1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    model.train()
    for _ in range(steps):
        input_ids = torch.randint(0, 1000, (2, 128), device="cuda", generator=g)
        attention_mask = torch.ones_like(input_ids)
        attention_mask[1, -37:] = 0
        labels = input_ids.masked_fill(attention_mask == 0, -100)
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "qwen3"])
def test_a_patched_model_trains_like_the_original(family):
    torch = producer_or_skip("torch").torch
    transformers = pytest.importorskip("transformers")
    import lab.nn
    original = tiny(torch, transformers, family)
    model = copy.deepcopy(original)
    result = lab.nn.patch(model)
    try:
        calls, attention_calls = [], []
        real, real_attention = lab.rope, lab.attention
        lab.nn._rope_ops.lab.rope = lambda *a, **k: calls.append(1) or real(*a, **k)
        lab.nn._attention_ops.lab.attention = lambda *a, **k: attention_calls.append(1) or real_attention(*a, **k)
        try:
            want, got = train(torch, original), train(torch, model)
        finally:
            lab.nn._rope_ops.lab.rope = real
            lab.nn._attention_ops.lab.attention = real_attention
        assert calls, "the patched attention did not reach lab.rope"
        assert attention_calls, "the patched model's attention did not reach lab.attention"
        for step, (a, b) in enumerate(zip(got, want)):
            assert abs(a - b) <= 2e-2 * abs(b), f"step {step}: patched loss {a}, original {b}"
    finally:
        result.undo()


def test_a_patched_model_under_compile():
    torch = producer_or_skip("torch").torch
    transformers = pytest.importorskip("transformers")
    import lab.nn
    model = tiny(torch, transformers, "llama")
    result = lab.nn.patch(model)
    try:
        input_ids = torch.randint(0, 1000, (2, 64), device="cuda")
        eager = model(input_ids=input_ids, labels=input_ids).loss
        compiled = torch.compile(model)(input_ids=input_ids, labels=input_ids).loss
        assert abs(compiled.item() - eager.item()) <= 1e-2 * abs(eager.item())
        compiled.backward()
        assert model.lm_head.weight.grad is not None
    finally:
        result.undo()


@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_a_padding_free_row_trains_like_its_samples_alone(family):
    """Samples back to back in one row, position_ids restarting at 0 (DataCollatorWithFlattening's
    form): lab's attention runs them as a packed batch, and the loss summed over the row's targets
    equals the sum of each sample's own loss (bfloat16's tolerance)."""
    torch = producer_or_skip("torch").torch
    transformers = pytest.importorskip("transformers")
    import lab.nn
    model = tiny(torch, transformers, family)
    result = lab.nn.patch(model)
    try:
        model.train()
        g = torch.Generator(device="cuda").manual_seed(2)
        pieces = [torch.randint(0, 1000, (n,), device="cuda", generator=g) for n in (37, 1, 130, 64, 9)]
        alone = sum(model(input_ids=p[None], labels=p[None], num_items_in_batch=1).loss.item() for p in pieces)
        row = torch.cat(pieces)[None]
        positions = torch.cat([torch.arange(len(p), device="cuda") for p in pieces])[None]
        packed = model(input_ids=row, labels=row, position_ids=positions, num_items_in_batch=1).loss.item()
        assert abs(packed - alone) <= 1e-2 * abs(alone), (packed, alone)
    finally:
        result.undo()
