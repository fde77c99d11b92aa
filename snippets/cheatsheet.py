# --8<-- [start:setup]
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

from gradflow_ref.checkpointing import SavedTensorMeter, measure, mlp
from gradflow_ref.master import MasterWeights, training_state_bytes

device = "cuda" if torch.cuda.is_available() else "cpu"


def tiny():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    return net.to(device)


data = torch.Generator().manual_seed(1)
x = torch.randn(64, 32, generator=data).to(device)
y = (3 * torch.randn(64, 1, generator=data)).to(device)
# --8<-- [end:setup]

# --8<-- [start:checkpoint_costs]
h = torch.randn(16, 32, generator=data).to(device)
deep, shallow = mlp(64, 32, device=device), mlp(16, 32, device=device)
plain64 = measure(lambda: deep(h), deep)
ckpt64 = measure(lambda: checkpoint_sequential(deep, 8, h, use_reentrant=False), deep)
plain16 = measure(lambda: shallow(h), shallow)
ckpt16 = measure(lambda: checkpoint_sequential(shallow, 4, h, use_reentrant=False), shallow)
ckpt_memory = {
    64: plain64.saved_bytes / ckpt64.saved_bytes,
    16: plain16.saved_bytes / ckpt16.saved_bytes,
}
ckpt_compute = ckpt64.recomputed / 64 / 3
print(
    f"checkpointing, K = sqrt(N): {ckpt_memory[16]:.2f}x less activation memory at N = 16, "
    f"{ckpt_memory[64]:.2f}x at N = 64; {ckpt64.recomputed} of 64 layers recomputed, "
    f"+{ckpt_compute:.0%} compute"
)
# --8<-- [end:checkpoint_costs]

# --8<-- [start:memory_costs]
with SavedTensorMeter() as fp32_meter:
    shallow(h)
with SavedTensorMeter() as bf16_meter:
    mlp(16, 32, dtype=torch.bfloat16, device=device)(h.bfloat16())
activation_ratio = bf16_meter.bytes / fp32_meter.bytes

mw = MasterWeights(tiny())
state = training_state_bytes(mw.model, master=mw)
weight_ratio = (state["weights"] + state["master"]) / state["master"]

with SavedTensorMeter() as big_batch:
    shallow(x)
with SavedTensorMeter() as micro_batch:
    shallow(x[:16].clone())
accum_memory = big_batch.bytes / micro_batch.bytes
print(f"BF16 activations: {activation_ratio:.2f}x the FP32 bytes")
print(f"BF16 weights + FP32 master: {weight_ratio:.2f}x the bytes of FP32 weights alone")
print(f"4 micro-batches of 16 vs one batch of 64: {accum_memory:.2f}x less activation memory")
# --8<-- [end:memory_costs]

# --8<-- [start:connections]
layers, segments, saved = 24, 4, {}


def kept_bytes(net, inp, segments=None):
    run = (
        (lambda: net(inp))
        if segments is None
        else lambda: checkpoint_sequential(net, segments, inp, use_reentrant=False)
    )
    return measure(run, net).saved_bytes


for fmt, dtype in (("FP32", torch.float32), ("BF16", torch.bfloat16)):
    net = mlp(layers, 32, dtype=dtype, device=device)
    saved[fmt, "plain"] = kept_bytes(net, h.to(dtype))
    saved[fmt, "segments"] = kept_bytes(net, h.to(dtype), segments)
for (fmt, mode), kept in saved.items():
    print(f"{fmt} {mode:<8} {kept:>7,} bytes kept for backward")
precision_saving = saved["FP32", "plain"] / saved["BF16", "plain"]
checkpoint_saving = saved["FP32", "plain"] / saved["FP32", "segments"]
both_savings = saved["FP32", "plain"] / saved["BF16", "segments"]
print(f"BF16 {precision_saving:.2f}x, checkpointing {checkpoint_saving:.2f}x,", end=" ")
print(f"both {both_savings:.2f}x")
assert abs(both_savings / (precision_saving * checkpoint_saving) - 1) < 0.01
# --8<-- [end:connections]

# --8<-- [start:clip]
model = tiny()
F.mse_loss(model(x), y).backward()
total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
after = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
print(f"clip_grad_norm_ returned {total:.3f}; norm after clipping {after:.3f}")
assert after <= 1.0 + 1e-6 < total
# --8<-- [end:clip]

# --8<-- [start:bf16]
with torch.autocast(device_type=device, dtype=torch.bfloat16):
    out = model(x)
print(f"inside autocast: output {out.dtype}, weights still {model[0].weight.dtype}")
assert out.dtype == torch.bfloat16 and model[0].weight.dtype == torch.float32
# --8<-- [end:bf16]

# --8<-- [start:fp16]
model = tiny()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler(device)
with torch.autocast(device_type=device, dtype=torch.float16):
    loss = F.mse_loss(model(x), y)
scaler.scale(loss).backward()
scaler.unscale_(optimizer)
torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
before = model[0].weight.detach().clone()
scaler.step(optimizer)
scaler.update()
unscaled = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
taken = not torch.equal(before, model[0].weight)
print(
    f"GradScaler({device!r}): loss scaled by {scaler.get_scale():g}, gradients unscaled and "
    f"clipped to norm {unscaled:.3f}, step taken: {taken}"
)
assert taken
# --8<-- [end:fp16]

# --8<-- [start:accumulation]
accum_steps = 4
model = tiny()
for xb, yb in zip(x.chunk(accum_steps), y.chunk(accum_steps)):
    loss = F.mse_loss(model(xb), yb) / accum_steps
    loss.backward()
accumulated = [p.grad.clone() for p in model.parameters()]
reference = tiny()
F.mse_loss(reference(x), y).backward()
gap = max((a - p.grad).abs().max().item() for a, p in zip(accumulated, reference.parameters()))
print(f"4 micro-batches of 16 vs one batch of 64: largest gradient difference {gap:.1e}")
assert gap < 1e-6
# --8<-- [end:accumulation]

# --8<-- [start:checkpoint]
model = tiny()
F.mse_loss(checkpoint(model, x, use_reentrant=False), y).backward()
recomputed = [p.grad.clone() for p in model.parameters()]
model.zero_grad()
F.mse_loss(model(x), y).backward()
same = all(torch.equal(a, p.grad) for a, p in zip(recomputed, model.parameters()))
print(f"checkpoint(..., use_reentrant=False): gradients identical to the plain pass: {same}")
assert same
# --8<-- [end:checkpoint]

# --8<-- [start:transformer]
head_dim = 16
q_norm, k_norm = torch.nn.LayerNorm(head_dim).to(device), torch.nn.LayerNorm(head_dim).to(device)
q, k, v = (100 * torch.randn(1, 2, 8, head_dim).to(device) for _ in range(3))
attn_out = F.scaled_dot_product_attention(q_norm(q), k_norm(k), v, is_causal=True)
lm_logits = torch.randn(4, 8, 256).to(device)
lm_targets = torch.randint(256, (4, 8)).to(device)
log_z = lm_logits.logsumexp(dim=-1)
lm_loss = F.cross_entropy(lm_logits.flatten(0, 1), lm_targets.flatten())
lm_loss = lm_loss + 1e-4 * log_z.square().mean()
warm_model = torch.nn.Linear(8, 8).to(device)
warm_opt = torch.optim.AdamW(warm_model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
warmup = torch.optim.lr_scheduler.LambdaLR(warm_opt, lambda step: min(1.0, (step + 1) / 100))
print(f"attention {tuple(attn_out.shape)}, loss with z-loss {lm_loss:.4f}")
print(f"learning rate on step 1: {warmup.get_last_lr()[0]:.1e}")
# --8<-- [end:transformer]
