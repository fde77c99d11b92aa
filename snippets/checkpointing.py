# --8<-- [start:imports]
import warnings
from functools import partial

import matplotlib.pyplot as plt
import torch
from torch.utils.checkpoint import checkpoint as torch_checkpoint
from torch.utils.checkpoint import checkpoint_sequential as torch_checkpoint_sequential

from gradflow_ref.checkpointing import (
    checkpoint,
    checkpoint_sequential,
    measure,
    mlp,
    segment_model,
)
from gradflow_ref.memory import GPT, MemoryConfig

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
width, batch = 32, 16
unit = batch * width * 4
x = torch.randn(batch, width).to(device)
# --8<-- [end:imports]

# --8<-- [start:activation_problem]
for depth in (8, 16, 32, 64):
    net = mlp(depth, width, device=device)
    stats = measure(partial(net, x), net)
    print(
        f"{depth:>2} layers: {stats.saved_bytes / 1024:5.1f} KiB held for backward "
        f"= {stats.saved_bytes // unit:>2} activations of {unit} bytes"
    )
assert stats.saved_bytes == (depth + 1) * unit
# --8<-- [end:activation_problem]

# --8<-- [start:segments]
net = mlp(64, width, device=device)
plain = measure(lambda: net(x), net)
ours = measure(lambda: checkpoint_sequential(net, 8, x), net)
ref = measure(lambda: torch_checkpoint_sequential(net, 8, x, use_reentrant=False), net)
print(
    f"no checkpointing   : {plain.saved_bytes // unit} activations held, "
    f"{plain.recomputed} layers recomputed"
)
print(
    f"8 segments (ours)  : {ours.saved_bytes // unit} activations held, "
    f"{ours.recomputed} layers recomputed"
)
print(
    f"8 segments (torch) : {ref.saved_bytes // unit} activations held, "
    f"{ref.recomputed} layers recomputed"
)
print(f"memory saved: {plain.saved_bytes / ours.saved_bytes:.2f}x")
assert ours.saved_bytes == ref.saved_bytes and plain.saved_bytes >= 3 * ours.saved_bytes
# --8<-- [end:segments]

# --8<-- [start:sweep_figure]
n, counts = 64, (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 21, 32, 64)
points = []
for segments in counts:
    stats = measure(partial(checkpoint_sequential, net, segments, x), net)
    points.append((n // segments, stats.saved_bytes / unit))
exact = [v == segment_model(n, k) for k, v in points]
assert exact == [n % s == 0 for s in counts] and all(v >= segment_model(n, k) for k, v in points)
ks = [1 + i * 63 / 199 for i in range(200)]
fig, ax = plt.subplots(figsize=(6.4, 3.8))
ax.plot(ks, [segment_model(n, k) for k in ks], label="model: N/K + K")
ax.plot(*zip(*points), "o", label="measured (checkpoint_sequential)")
ax.axvline(n**0.5, color="grey", linestyle=":", label=f"K = sqrt(N) = {n**0.5:.0f}")
ax.axhline(n + 1, color="C3", linestyle="--", label="no checkpointing")
ax.set_xscale("log", base=2)
ax.set_xlabel("segment length K (layers)")
ax.set_ylabel("activations held after forward")
ax.set_title("64-layer MLP: memory against segment length")
ax.legend(fontsize=8)
best = min(points, key=lambda p: p[1])
print(
    f"fewest measured: K = {best[0]}, {best[1]:.0f} activations "
    f"(model {segment_model(n, best[0]):.0f}, no checkpointing {n + 1})"
)
assert best == (8, segment_model(n, 8))
# --8<-- [end:sweep_figure]

# --8<-- [start:overhead]
stats = measure(partial(checkpoint_sequential, net, 8, x), net)
extra = stats.recomputed / 64
print(f"recomputed layer forwards: {stats.recomputed} of 64 = {extra:.3f} of a forward pass")
print(f"counted compute (backward = 2 forwards): +{extra / 3:.0%}")
assert stats.recomputed == 64 - 8
# --8<-- [end:overhead]


# --8<-- [start:per_layer_pitfall]
def run_layers(layers, h, wrap):
    for i, layer in enumerate(layers):
        h = checkpoint(layer, h) if wrap(i) else layer(h)
    return h


cfg = MemoryConfig(
    n_layers=16, hidden=64, n_heads=4, seq_len=32, micro_batch=2, vocab=96, dropout=False
)
gpt = GPT(cfg).to(device)
h0 = gpt.embed(torch.randint(0, cfg.vocab, (2, 32)).to(device)).detach()
cases = {
    "64-layer MLP, no checkpointing": (net, x, lambda i: False),
    "64-layer MLP, every layer": (net, x, lambda i: True),
    "16-block GPT, no checkpointing": (gpt.layers, h0, lambda i: False),
    "16-block GPT, every 4th block": (gpt.layers, h0, lambda i: i % 4 == 0),
    "16-block GPT, every block": (gpt.layers, h0, lambda i: True),
}
held = {}
for name, (layers, h, wrap) in cases.items():
    stats = measure(partial(run_layers, layers, h, wrap), layers)
    held[name] = stats.saved_bytes / (h.numel() * 4)
    print(f"{name:<37} {held[name]:6.1f} layer inputs held, {stats.recomputed:>2} recomputed")
assert held["64-layer MLP, every layer"] >= 0.98 * held["64-layer MLP, no checkpointing"]
# --8<-- [end:per_layer_pitfall]


# --8<-- [start:pytorch_usage]
class SegmentedStack(torch.nn.Module):
    def __init__(self, layers, k):
        super().__init__()
        self.layers, self.k = layers, k

    def forward(self, h):
        for start in range(0, len(self.layers), self.k):
            segment = self.layers[start : start + self.k]
            if self.training:
                h = torch_checkpoint(segment, h, use_reentrant=False)
            else:
                h = segment(h)
        return h


stats = measure(lambda: SegmentedStack(net, k=8)(x), net)
print(
    f"SegmentedStack(k=8): {stats.saved_bytes // unit} activations held, "
    f"{stats.recomputed} layers recomputed"
)

# --8<-- [end:pytorch_usage]

# --8<-- [start:reentrant]
net.zero_grad(set_to_none=True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    torch_checkpoint_sequential(net, 8, x).sum().backward()
missing = sum(p.grad is None for p in net.parameters())
messages = [str(w.message) for w in caught]
for message in dict.fromkeys(messages):
    print(f"{messages.count(message)} x warning: {message[:64]}...")
print(f"{missing} of {len(list(net.parameters()))} parameter tensors got no gradient")
try:
    torch_checkpoint(lambda h, scale: net(h) * scale, x, scale=2.0, use_reentrant=True)
except ValueError as err:
    print(f"keyword argument, use_reentrant=True: ValueError: {err}")
else:
    raise AssertionError("the reentrant variant accepted a keyword argument")
kept = torch_checkpoint(lambda h, scale: net(h) * scale, x, scale=2.0, use_reentrant=False)
print(f"keyword argument, use_reentrant=False: output shape {tuple(kept.shape)}")
assert missing == 7 * 8 * 2 and sum("None of the inputs" in m for m in messages) == 7
# --8<-- [end:reentrant]
