# --8<-- [start:imports]
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from gradflow_ref.loss_scaling import GradScaler, StaticScaler
from gradflow_ref.precision import FORMATS, classify_tensor, relative_error, stored_value
from gradflow_site.render import table

# --8<-- [end:imports]

# --8<-- [start:rescue]
S = 1024
for g in (2e-5, 3e-6, 1e-7, 1e-8):
    plain = stored_value(g, "float16")
    rescued = stored_value(g * S, "float16") / S
    print(
        f"g = {g:<5g} FP16 alone: {plain:.5g} ({relative_error(g, 'float16'):6.2%} off)   "
        f"x{S} in FP16, / {S} in FP32: {rescued:.5g} ({abs(rescued - g) / g:.3%} off)"
    )
assert stored_value(1e-8, "float16") == 0.0 and stored_value(1e-8 * S, "float16") > 0
# --8<-- [end:rescue]

# --8<-- [start:gradients]
vocab, dim, tokens = 2048, 64, 2048


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx):
        h = self.embed(idx)
        h = h + self.mlp(self.norm1(h))
        return self.head(self.norm2(h))


torch.manual_seed(0)
zipf = 1 / torch.arange(1, vocab + 1) ** 1.1
stream = torch.multinomial(zipf / zipf.sum(), tokens + 1, replacement=True)
model = TinyLM()
F.cross_entropy(model(stream[:-1]), stream[1:]).backward()
grads = torch.cat([p.grad.flatten() for p in model.parameters()])
nonzero = grads[grads != 0]
rows = []
for k in (0, 4, 8, 16, 24):
    c = classify_tensor(nonzero * 2.0**k, "float16")
    rows.append(
        [f"2^{k}", f"{c['underflow']:.3%}", f"{c['subnormal']:.2%}", f"{c['overflow']:.3%}"]
    )
print(
    f"{grads.numel():,} gradients, {(grads == 0).float().mean():.1%} exactly zero in FP32 "
    f"(embedding rows of tokens not in the batch); of the rest, in FP16 after scaling:\n"
)
print(
    table(
        ["scale", "rounded to zero", "subnormal (fewer bits)", "overflow to inf"],
        rows,
        align="lrrr",
    )
)
# --8<-- [end:gradients]

# --8<-- [start:histogram_figure]
fp16 = FORMATS["float16"]
fig, ax = plt.subplots()
log2g = nonzero.abs().log2()
for k, colour in ((0, "tab:blue"), (8, "tab:green")):
    ax.hist(log2g + k, bins=120, range=(-40, 20), alpha=0.6, color=colour, label=f"scale 2^{k}")
ax.axvspan(
    -40,
    math.log2(fp16.min_subnormal) - 1,
    color="tab:red",
    alpha=0.15,
    label="rounds to zero in FP16",
)
ax.axvspan(
    math.log2(fp16.min_subnormal) - 1,
    math.log2(fp16.min_normal),
    color="orange",
    alpha=0.15,
    label="FP16 subnormal",
)
ax.axvspan(
    math.log2(fp16.overflow_threshold), 20, color="black", alpha=0.1, label="overflows to inf"
)
ax.set_xlabel("log2 |gradient x scale|")
ax.set_ylabel("number of gradients")
ax.set_title("Gradients of a tiny language model at initialisation (FP32)")
ax.legend(fontsize="small")
# --8<-- [end:histogram_figure]

# --8<-- [start:static_vs_dynamic]
g = torch.Generator().manual_seed(0)
xs = torch.randn(8, 64, 16, generator=g)
ys = (xs @ torch.randn(16, 8, generator=g)).argmax(-1)


def train(scaler, steps, corrupted=(40, 130)):
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 8))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    scales, losses = [], []
    for step in range(steps):
        x = xs[step % 8] * (1e4 if step in corrupted else 1.0)
        with torch.autocast(device_type="cpu", dtype=torch.float16):
            loss = F.cross_entropy(net(x), ys[step % 8])
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        scales.append(scaler.get_scale())
        losses.append(loss.item())
    return scales, losses


for label, scaler in (
    ("static 2^10", StaticScaler(2.0**10)),
    ("static 2^24", StaticScaler(2.0**24)),
    ("dynamic from 2^24", GradScaler(init_scale=2.0**24, growth_interval=10)),
):
    scales, losses = train(scaler, steps=60)
    print(
        f"{label:<18} skipped {scaler.skipped_steps:2d} of 60 steps, "
        f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, final scale 2^{math.log2(scales[-1]):.0f}"
    )
# --8<-- [end:static_vs_dynamic]

# --8<-- [start:dynamic_history_figure]
scaler = GradScaler(init_scale=2.0**16, growth_interval=10)
scales, losses = train(scaler, steps=200)
skipped = [s for s in range(1, 200) if scales[s] < scales[s - 1]]
print(
    f"{scaler.skipped_steps} skipped steps (at {', '.join(map(str, skipped))}); "
    f"scale from 2^16 to 2^{math.log2(scales[-1]):.0f}"
)
fig, ax = plt.subplots()
ax.step(range(200), [math.log2(s) for s in scales], where="post", label="log2 scale")
ax.plot(
    skipped,
    [math.log2(scales[s]) for s in skipped],
    "x",
    color="tab:red",
    label="step skipped (inf/NaN gradient)",
)
for s in (40, 130):
    ax.axvline(s, color="grey", linestyle=":", linewidth=1)
ax.set_xlabel("step")
ax.set_ylabel("log2 of the loss scale")
ax.set_title("Dynamic loss scale of an FP16 run (dotted: corrupted batches)")
ax.legend()
# --8<-- [end:dynamic_history_figure]

# --8<-- [start:bf16_needs_none]
for name in ("float16", "bfloat16"):
    c = classify_tensor(nonzero, name)
    print(
        f"{FORMATS[name].label}: {c['underflow']:.3%} rounded to zero, "
        f"{c['subnormal']:.2%} subnormal, smallest normal {FORMATS[name].min_normal:.3g}"
    )
print(f"smallest nonzero |gradient|: {nonzero.abs().min():.3g}")
assert classify_tensor(nonzero, "bfloat16")["normal"] == 1.0
# --8<-- [end:bf16_needs_none]

# --8<-- [start:pytorch_usage]
torch_scales, _ = train(torch.amp.GradScaler("cpu", growth_interval=10), steps=60)
print(
    f"torch.amp.GradScaler('cpu') starts at {torch.amp.GradScaler('cpu').get_scale():g}; "
    f"same 60-step scale history as gradflow_ref: {torch_scales == scales[:60]}"
)
assert torch_scales == scales[:60]
# --8<-- [end:pytorch_usage]
