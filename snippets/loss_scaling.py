# --8<-- [start:imports]
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

import gradflow_ref.loss_scaling as ref
from gradflow_ref.precision import FORMATS, classify_tensor

device = "cuda" if torch.cuda.is_available() else "cpu"
# --8<-- [end:imports]

# --8<-- [start:loop]
vocab, dim, tokens = 32, 16, 256
successor = torch.randperm(vocab, generator=torch.Generator().manual_seed(0)).to(device)


def train(model, optimizer, steps, dtype=None, scaling=False):
    scaler = torch.amp.GradScaler(device, enabled=scaling)
    losses, zeros = [], []
    for _ in range(steps):
        x = torch.randint(vocab, (tokens,)).to(device)
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(model(x), successor[x])
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        zeros.append((grads == 0).float().mean().item())
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses, zeros


# --8<-- [end:loop]

# --8<-- [start:late_training]
PRECISIONS = {
    "FP32": (None, False),
    "FP16": (torch.float16, False),
    "FP16 + GradScaler": (torch.float16, True),
    "BF16": (torch.bfloat16, False),
}
EARLY, LATE = 300, 200
early, runs = [], {name: [] for name in PRECISIONS}
for seed in range(3):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Embedding(vocab, dim), nn.LayerNorm(dim), nn.Linear(dim, vocab))
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    early.append(train(model, optimizer, EARLY))
    for name, (dtype, scaling) in PRECISIONS.items():
        torch.manual_seed(100 + seed)
        runs[name].append(train(*copy.deepcopy((model, optimizer)), LATE, dtype, scaling))
final = {name: [sum(losses[-20:]) / 20 for losses, _ in seeds] for name, seeds in runs.items()}
zero_share = {name: max(max(zeros) for _, zeros in seeds) for name, seeds in runs.items()}
for name in PRECISIONS:
    lo, hi = min(final[name]), max(final[name])
    print(
        f"{name:<18} final loss {lo:.1e} to {hi:.1e}   zero gradients up to {zero_share[name]:.1%}"
    )
assert min(final["FP16"]) > 5 * max(max(final[n]) for n in PRECISIONS if n != "FP16")
# --8<-- [end:late_training]

# --8<-- [start:logit_gradients]
torch.manual_seed(0)
x = torch.randint(vocab, (tokens,)).to(device)
logits = model(x).detach().requires_grad_()
F.cross_entropy(logits, successor[x]).backward()
g = logits.grad.flatten()
print("| scale | rounded to zero | subnormal (fewer bits) | normal |\n|:--|--:|--:|--:|")
for k in (0, 8, 16, 24):
    c = classify_tensor(g * 2.0**k, "float16")
    print(f"| 2^{k} | {c['underflow']:.1%} | {c['subnormal']:.1%} | {c['normal']:.1%} |")
assert torch.allclose(logits.grad, (logits.softmax(-1) - F.one_hot(successor[x], vocab)) / tokens)
# --8<-- [end:logit_gradients]

# --8<-- [start:fp16_training]
gen = torch.Generator().manual_seed(0)
xs = torch.randn(8, 64, 16, generator=gen).to(device)
ys = (xs @ torch.randn(16, 8, generator=gen).to(device)).argmax(-1)
CORRUPTED = (40, 130)


def train_classifier(scaler, steps, corrupted=CORRUPTED):
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 8)).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    scales, losses = [], []
    for step in range(steps):
        inputs = xs[step % 8] * (1e4 if step in corrupted else 1.0)
        with torch.autocast(device_type=device, dtype=torch.float16):
            loss = F.cross_entropy(net(inputs), ys[step % 8])
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        scales.append(scaler.get_scale())
        losses.append(loss.item())
    return scales, losses


# --8<-- [end:fp16_training]

# --8<-- [start:static_vs_dynamic]
scalers = {
    "static 2^10": ref.StaticScaler(2.0**10, device=device),
    "static 2^24": ref.StaticScaler(2.0**24, device=device),
    "dynamic from 2^24": ref.GradScaler(device, init_scale=2.0**24, growth_interval=10),
}
results = {}
for label, scaler in scalers.items():
    scales, losses = train_classifier(scaler, steps=60)
    results[label] = {"skipped": scaler.skipped_steps, "losses": losses, "scales": scales}
    print(
        f"{label:<18} skipped {scaler.skipped_steps:2d} of 60 steps, "
        f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, final scale 2^{math.log2(scales[-1]):.0f}"
    )
# --8<-- [end:static_vs_dynamic]

# --8<-- [start:dynamic_history]
history, history_losses = train_classifier(
    torch.amp.GradScaler(device, init_scale=2.0**16, growth_interval=10), steps=200
)
skips = [s for s, (a, b) in enumerate(zip([2.0**16] + history, history)) if b < a]
print(f"{len(skips)} skipped, at steps {', '.join(map(str, skips))}")
print(f"final scale 2^{math.log2(history[-1]):.0f}")
assert set(CORRUPTED) <= set(skips)
# --8<-- [end:dynamic_history]

# --8<-- [start:inside]
inside = ref.GradScaler(device, init_scale=2.0**16, growth_interval=10)
inside_history, _ = train_classifier(inside, steps=200)
print(f"same 200-step scale history as torch.amp.GradScaler: {inside_history == history}")
print(f"skipped steps it counted: {inside.skipped_steps}")
assert inside_history == history
# --8<-- [end:inside]

# --8<-- [start:bf16_needs_none]
for fmt in ("float16", "bfloat16"):
    c = classify_tensor(g, fmt)
    print(f"{FORMATS[fmt].label}: {c['underflow']:.1%} zero, {c['subnormal']:.1%} subnormal")
print(f"smallest |g|: {g.abs().min():.2e}")
print(f"BF16's smallest normal: {torch.finfo(torch.bfloat16).tiny:.2e}")
assert classify_tensor(g, "bfloat16")["normal"] == 1.0
# --8<-- [end:bf16_needs_none]
