"""Example 17 - padding-free fine-tuning: samples of different lengths back to back in one row.

transformers' DataCollatorWithFlattening puts a batch's samples into one row with position_ids that
restart at 0 for each (and the flash-attention kwargs saying where each starts). lab.nn.patch makes the
model's attention lab's, which runs such a row as a packed batch - no padding, no sample seeing another
- and its fused loss head, which never predicts across a sample boundary. The loss of the row equals
the summed losses of the samples run one by one. Run: python3 examples/17_padding_free_finetune.py
"""
from _common import need, need_gpu

torch = need("torch")
transformers = need("transformers")
need_gpu()
import lab.nn  # noqa: E402

config = transformers.LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, head_dim=64)
torch.manual_seed(0)
model = transformers.LlamaForCausalLM(config).to("cuda", torch.bfloat16)
patched = lab.nn.patch(model)
print(patched)

g = torch.Generator().manual_seed(1)
samples = [{"input_ids": torch.randint(0, 1000, (n,), generator=g).tolist()} for n in (300, 17, 90, 512, 45)]
collate = transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=True)
row = {k: v.to("cuda") if torch.is_tensor(v) else v for k, v in collate(samples).items()}
print(f"{len(samples)} samples, {row['input_ids'].shape[1]} tokens in one row, no padding")

optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model.train()
for step in range(3):
    loss = model(**row).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"step {step}: loss {loss.item():.4f}")

with torch.no_grad():  # the row's loss is the samples' own, token for token
    targets = sum(len(s["input_ids"]) - 1 for s in samples)
    row_loss = model(**row).loss.item() * targets
    alone = sum(model(input_ids=torch.tensor([s["input_ids"]], device="cuda"),
                      labels=torch.tensor([s["input_ids"]], device="cuda")).loss.item() * (len(s["input_ids"]) - 1)
                for s in samples)
assert abs(row_loss - alone) <= 1e-2 * alone, (row_loss, alone)
print(f"summed loss of the row {row_loss:.2f} = of the samples alone {alone:.2f}")
