# --8<-- [start:imports]
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from gradflow_ref.loss_scaling import GradScaler, StaticScaler
from gradflow_ref.precision import FORMATS, classify_tensor, relative_error, stored_value

device = "cuda" if torch.cuda.is_available() else "cpu"
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

# --8<-- [start:tiny_lm]
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


# --8<-- [end:tiny_lm]


# --8<-- [start:gradients]
torch.manual_seed(0)
zipf = 1 / torch.arange(1, vocab + 1) ** 1.1
stream = torch.multinomial(zipf / zipf.sum(), tokens + 1, replacement=True).to(device)
model = TinyLM().to(device)
F.cross_entropy(model(stream[:-1]), stream[1:]).backward()
grads = torch.cat([p.grad.flatten() for p in model.parameters()])
nonzero = grads[grads != 0]
zero_share = (grads == 0).float().mean().item()
print(f"{grads.numel():,} gradients, {zero_share:.1%} exactly zero in FP32\n")
print("| scale | rounded to zero | subnormal (fewer bits) | overflow to inf |\n|:--|--:|--:|--:|")
for k in (0, 4, 8, 16, 24):
    c = classify_tensor(nonzero * 2.0**k, "float16")
    print(f"| 2^{k} | {c['underflow']:.3%} | {c['subnormal']:.2%} | {c['overflow']:.3%} |")
absent = torch.bincount(stream[:-1], minlength=vocab) == 0
assert (grads == 0).sum() == absent.sum() * dim == (model.embed.weight.grad[absent] == 0).sum()
# --8<-- [end:gradients]


# --8<-- [start:histogram_figure]
def plot_histogram(nonzero, fp16=FORMATS["float16"]):
    fig, ax = plt.subplots()
    log2g = nonzero.abs().log2().cpu()
    for k, colour in ((0, "tab:blue"), (8, "tab:green")):
        ax.hist(log2g + k, bins=120, range=(-40, 20), alpha=0.6, color=colour, label=f"scale 2^{k}")
    zero, normal = math.log2(fp16.min_subnormal) - 1, math.log2(fp16.min_normal)
    ax.axvspan(-40, zero, color="tab:red", alpha=0.15, label="rounds to zero in FP16")
    ax.axvspan(zero, normal, color="orange", alpha=0.15, label="FP16 subnormal")
    inf = math.log2(fp16.overflow_threshold)
    ax.axvspan(inf, 20, color="black", alpha=0.1, label="overflows to inf")
    ax.set_xlabel("log2 |gradient x scale|")
    ax.set_ylabel("number of gradients")
    ax.set_title("Gradients of a tiny language model at initialisation (FP32)")
    ax.legend(fontsize="small")
    return fig


fig = plot_histogram(nonzero)
# --8<-- [end:histogram_figure]

# --8<-- [start:fp16_training]
g = torch.Generator().manual_seed(0)
xs = torch.randn(8, 64, 16, generator=g).to(device)
ys = (xs @ torch.randn(16, 8, generator=g).to(device)).argmax(-1)
CORRUPTED = (40, 130)


def train(scaler, steps, corrupted=CORRUPTED):
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 8)).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    scales, losses = [], []
    for step in range(steps):
        x = xs[step % 8] * (1e4 if step in corrupted else 1.0)
        with torch.autocast(device_type=device, dtype=torch.float16):
            loss = F.cross_entropy(net(x), ys[step % 8])
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        scales.append(scaler.get_scale())
        losses.append(loss.item())
    return scales, losses


# --8<-- [end:fp16_training]

# --8<-- [start:static_vs_dynamic]
runs = {}
for label, scaler in (
    ("static 2^10", StaticScaler(2.0**10, device=device)),
    ("static 2^24", StaticScaler(2.0**24, device=device)),
    ("dynamic from 2^24", GradScaler(device, init_scale=2.0**24, growth_interval=10)),
):
    scales, losses = train(scaler, steps=60)
    runs[label] = {"skipped": scaler.skipped_steps, "losses": losses, "scales": scales}
    print(
        f"{label:<18} skipped {scaler.skipped_steps:2d} of 60 steps, "
        f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, final scale 2^{math.log2(scales[-1]):.0f}"
    )
for steps in (CORRUPTED[0], CORRUPTED[0] + 1):  # 2^10 skips the corrupted batch, nothing before
    scaler = StaticScaler(2.0**10, device=device)
    train(scaler, steps)
    assert scaler.skipped_steps == steps - CORRUPTED[0]
dynamic = runs["dynamic from 2^24"]["scales"]
assert runs["static 2^10"]["skipped"] == 1 and runs["static 2^24"]["skipped"] == 60
assert dynamic[CORRUPTED[0]] < dynamic[CORRUPTED[0] - 1]
# --8<-- [end:static_vs_dynamic]

# --8<-- [start:dynamic_history]
history_scaler = GradScaler(device, init_scale=2.0**16, growth_interval=10)
history, history_losses = train(history_scaler, steps=200)
skipped = [s for s in range(1, 200) if history[s] < history[s - 1]]
print(
    f"{history_scaler.skipped_steps} skipped steps (at {', '.join(map(str, skipped))}); "
    f"scale from 2^16 to 2^{math.log2(history[-1]):.0f}"
)
assert set(CORRUPTED) <= set(skipped)
# after the first two skips, the scale grows again before every skip on a clean batch
assert all(
    max(history[a:b]) > history[a] for a, b in zip(skipped[1:], skipped[2:]) if b not in CORRUPTED
)
# --8<-- [end:dynamic_history]


# --8<-- [start:dynamic_history_figure]
def plot_history(history, skipped, corrupted=CORRUPTED):
    fig, ax = plt.subplots()
    ax.step(range(len(history)), [math.log2(s) for s in history], where="post", label="log2 scale")
    marks = [math.log2(history[s]) for s in skipped]
    ax.plot(skipped, marks, "x", color="tab:red", label="step skipped (inf/NaN gradient)")
    for s in corrupted:
        ax.axvline(s, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("log2 of the loss scale")
    ax.set_title("Dynamic loss scale of an FP16 run (dotted: corrupted batches)")
    ax.legend()
    return fig


fig = plot_history(history, skipped)
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
torch_scales, _ = train(torch.amp.GradScaler(device, growth_interval=10), steps=60)
defaults = torch.amp.GradScaler(device)
print(
    f"torch.amp.GradScaler({device!r}) defaults: init_scale {defaults.get_scale():g}, "
    f"growth_factor {defaults.get_growth_factor():g}, "
    f"backoff_factor {defaults.get_backoff_factor():g}, "
    f"growth_interval {defaults.get_growth_interval()}"
)
print(f"same 60-step scale history as gradflow_ref: {torch_scales == history[:60]}")
assert torch_scales == history[:60]
# --8<-- [end:pytorch_usage]
