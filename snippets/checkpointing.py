# --8<-- [start:imports]
import warnings
from functools import partial

import matplotlib.pyplot as plt
import torch
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    checkpoint_sequential,
    create_selective_checkpoint_contexts,
)

from gradflow_ref.checkpointing import measure, mlp, segment_model
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


# --8<-- [start:every_block]
class Blocks(torch.nn.Module):
    def __init__(self, blocks, checkpointed=True):
        super().__init__()
        self.blocks, self.checkpointed = blocks, checkpointed

    def forward(self, h):
        for block in self.blocks:
            if self.checkpointed and self.training:
                h = checkpoint(block, h, use_reentrant=False)
            else:
                h = block(h)
        return h


# --8<-- [end:every_block]

# --8<-- [start:every_block_measure]
cfg = MemoryConfig(
    n_layers=16, hidden=64, n_heads=4, seq_len=32, micro_batch=2, vocab=96, dropout=False
)
gpt = GPT(cfg).to(device)
h0 = gpt.embed(torch.randint(0, cfg.vocab, (2, 32)).to(device)).detach()
block_input = h0.numel() * 4
held = {}
for checkpointed in (False, True):
    stats = measure(partial(Blocks(gpt.layers, checkpointed), h0), gpt.layers)
    held[checkpointed] = stats.saved_bytes / block_input
    print(
        f"checkpointed={checkpointed!s:<5}: {held[checkpointed]:5.1f} block inputs held, "
        f"{stats.recomputed} blocks recomputed"
    )
r = held[False] / cfg.n_layers
print(f"one block saves {r:.1f} times its input")
# --8<-- [end:every_block_measure]

# --8<-- [start:sweep_figure]
net = mlp(64, width, device=device)
n, counts = 64, (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 21, 32, 64)
points = []
for segments in counts:
    run = partial(checkpoint_sequential, net, segments, x, use_reentrant=False)
    points.append((n // segments, measure(run, net).saved_bytes / unit))
ks = [1 + i * 63 / 199 for i in range(200)]
fig, ax = plt.subplots(figsize=(6.4, 3.8))
ax.plot(ks, [segment_model(n, k) for k in ks], label="model: L/K + K")
ax.plot(*zip(*points), "o", label="measured (checkpoint_sequential)")
ax.axvline(n**0.5, color="grey", linestyle=":", label=f"K = sqrt(L) = {n**0.5:.0f}")
ax.axhline(n + 1, color="C3", linestyle="--", label="no checkpointing")
ax.set_xscale("log", base=2)
ax.set_xlabel("segment length K (layers)")
ax.set_ylabel("activations held after forward")
ax.set_title("64-layer MLP: memory against segment length")
ax.legend(fontsize=8)
best = min(points, key=lambda p: p[1])
exact = [v == segment_model(n, k) for k, v in points]
print(f"fewest measured: K = {best[0]}, {best[1]:.0f} activations (no checkpointing {n + 1})")
assert best == (8, segment_model(n, 8))
# --8<-- [end:sweep_figure]

# --8<-- [start:crossover]
for name, layers, cost in (("64-layer MLP", 64, 1.0), ("16-block GPT", cfg.n_layers, r)):
    k_best = (layers / cost) ** 0.5
    print(f"{name}: r = {cost:4.1f}, best segment length sqrt(L/r) = {k_best:.2f}")
print(f"segments of 2 blocks hold less than every block once L > 2r = {2 * r:.0f} blocks")
# --8<-- [end:crossover]

# --8<-- [start:selective]
decisions = {"saved": 0, "recomputed": 0}
matmuls = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default)


def keep_matmuls(ctx, op, *args, **kwargs):
    save = op in matmuls
    decisions["saved" if save else "recomputed"] += 1
    return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE


selective = partial(create_selective_checkpoint_contexts, keep_matmuls)
h = h0.clone().requires_grad_()
checkpoint(gpt.layers[0], h, use_reentrant=False, context_fn=selective).sum().backward()
plain = h0.clone().requires_grad_()
gpt.layers[0](plain).sum().backward()
print(f"one block: {decisions['saved']} matmul outputs kept, {decisions['recomputed']} ops redone")
print(f"input gradient vs no checkpointing: max difference {(h.grad - plain.grad).abs().max():.1e}")
# --8<-- [end:selective]

# --8<-- [start:overhead]
stats = measure(partial(checkpoint_sequential, net, 8, x, use_reentrant=False), net)
extra = stats.recomputed / 64
print(f"recomputed layer forwards: {stats.recomputed} of 64 = {extra:.3f} of a forward pass")
print(f"counted compute (backward = 2 forwards): +{extra / 3:.0%}")
# --8<-- [end:overhead]

# --8<-- [start:inside]
import gradflow_ref.checkpointing as ref

ours = measure(lambda: ref.checkpoint_sequential(net, 8, x), net)
theirs = measure(lambda: checkpoint_sequential(net, 8, x, use_reentrant=False), net)
print(f"gradflow_ref: {ours.saved_bytes // unit} activations held, {ours.recomputed} recomputed")
print(
    f"torch       : {theirs.saved_bytes // unit} activations held, {theirs.recomputed} recomputed"
)
# --8<-- [end:inside]

# --8<-- [start:reentrant]
net.zero_grad(set_to_none=True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    checkpoint_sequential(net, 8, x).sum().backward()
missing = sum(p.grad is None for p in net.parameters())
messages = [str(w.message) for w in caught]
for message in dict.fromkeys(messages):
    print(f"{messages.count(message)} x warning: {message[:64]}...")
print(f"{missing} of {len(list(net.parameters()))} parameter tensors got no gradient")
try:
    checkpoint(lambda h, scale: net(h) * scale, x, scale=2.0, use_reentrant=True)
except ValueError as err:
    print(f"keyword argument, use_reentrant=True: ValueError: {err}")
kept = checkpoint(lambda h, scale: net(h) * scale, x, scale=2.0, use_reentrant=False)
print(f"keyword argument, use_reentrant=False: output shape {tuple(kept.shape)}")
# --8<-- [end:reentrant]
