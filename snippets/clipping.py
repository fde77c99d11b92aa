# --8<-- [start:imports]
import copy
import math

import matplotlib.pyplot as plt
import torch

from gradflow_ref.clipping import angle_between, clip_grad_norm_, clip_grad_value_

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
# --8<-- [end:imports]

# --8<-- [start:hand_calc]
a = torch.zeros(2, device=device, requires_grad=True)
b = torch.zeros(1, device=device, requires_grad=True)
a.grad, b.grad = torch.tensor([3.0, 4.0], device=device), torch.tensor([0.0], device=device)
total = clip_grad_norm_([a, b], max_norm=1.0)
print(
    f"max_norm=1.0:  global norm {total:.4f}, clipped to "
    f"[{a.grad[0]:.4f}, {a.grad[1]:.4f}] and [{b.grad[0]:.4f}]"
)

a.grad, b.grad = torch.tensor([3.0, 4.0], device=device), torch.tensor([0.0], device=device)
total = clip_grad_norm_([a, b], max_norm=10.0)
print(
    f"max_norm=10.0: global norm {total:.4f}, left as "
    f"[{a.grad[0]:.4f}, {a.grad[1]:.4f}] and [{b.grad[0]:.4f}]"
)
assert a.grad.tolist() == [3.0, 4.0]
# --8<-- [end:hand_calc]

# --8<-- [start:norm_vs_value]
g = torch.tensor([2.4, 0.6], device=device)
by_norm = torch.zeros(2, device=device, requires_grad=True)
by_value = torch.zeros(2, device=device, requires_grad=True)
by_norm.grad, by_value.grad = g.clone(), g.clone()
clip_grad_norm_(by_norm, max_norm=1.0)
clip_grad_value_(by_value, clip_value=1.0)
for name, v in [("norm-clipped", by_norm.grad), ("value-clipped", by_value.grad)]:
    print(
        f"{name:>13}: [{v[0]:.3f}, {v[1]:.3f}]  length {v.norm():.3f}  "
        f"turned by {angle_between(g, v):.1f} degrees"
    )
assert angle_between(g, by_norm.grad) < 0.01 < 10 < angle_between(g, by_value.grad)
assert by_value.grad.norm() > 1.0
# --8<-- [end:norm_vs_value]

# --8<-- [start:figure_circle]
fig, ax = plt.subplots(figsize=(7, 3.6))
theta = torch.linspace(0, 2 * math.pi, 200)
ax.plot(theta.cos(), theta.sin(), color="0.5", lw=1, label="max_norm = 1 (circle)")
ax.plot(
    [-1, 1, 1, -1, -1],
    [-1, -1, 1, 1, -1],
    color="0.5",
    lw=1,
    ls=":",
    label="clip_value = 1 (square)",
)
for v, color, label in [
    (g, "C3", f"gradient, length {g.norm():.2f}"),
    (by_norm.grad, "C2", f"norm-clipped, turned {angle_between(g, by_norm.grad):.1f}°"),
    (by_value.grad, "C1", f"value-clipped, turned {angle_between(g, by_value.grad):.1f}°"),
]:
    ax.annotate(
        "",
        xy=(v[0].item(), v[1].item()),
        xytext=(0, 0),
        arrowprops={"arrowstyle": "-|>", "color": color, "lw": 2},
    )
    ax.plot([], [], color=color, lw=2, label=label)
ax.set_xlim(-1.3, 2.7)
ax.set_ylim(-1.3, 1.6)
ax.set_aspect("equal")
ax.axhline(0, color="0.85", lw=0.8, zorder=0)
ax.axvline(0, color="0.85", lw=0.8, zorder=0)
ax.set_xlabel("gradient component 1")
ax.set_ylabel("gradient component 2")
ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
fig.tight_layout()
# --8<-- [end:figure_circle]

# --8<-- [start:pytorch_usage]
model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
model.to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
x, y = torch.randn(32, 4).to(device), 100 * torch.randn(32, 1).to(device)

loss = torch.nn.functional.mse_loss(model(x), y)
loss.backward()
norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
applied = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
optimizer.step()
optimizer.zero_grad(set_to_none=True)

print(f"gradient norm {norm:.1f} before clipping, {applied:.4f} in the step")
# --8<-- [end:pytorch_usage]


# --8<-- [start:norm_inside]
@torch.no_grad()
def clip_norm(parameters, max_norm, norm_type=2.0):
    grads = [p.grad for p in parameters if p.grad is not None]
    norms = [torch.linalg.vector_norm(g, norm_type) for g in grads]
    total = torch.linalg.vector_norm(torch.stack(norms), norm_type)
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef)
    return total


# --8<-- [end:norm_inside]

# --8<-- [start:reference]
loss = torch.nn.functional.mse_loss(model(x), y)
loss.backward()
twin, short = copy.deepcopy(model), copy.deepcopy(model)
for p, q, r in zip(model.parameters(), twin.parameters(), short.parameters()):
    q.grad, r.grad = p.grad.clone(), p.grad.clone()
ours = clip_grad_norm_(model.parameters(), max_norm=1.0)
theirs = torch.nn.utils.clip_grad_norm_(twin.parameters(), max_norm=1.0)
mine = clip_norm(short.parameters(), max_norm=1.0)
diff = max(
    (p.grad - q.grad).abs().max().item() for p, q in zip(model.parameters(), twin.parameters())
)
print(f"total norm: gradflow_ref {ours:.6f}, torch {theirs:.6f}, clip_norm {mine:.6f}")
print(f"largest gradient difference, gradflow_ref against torch: {diff:.1e}")
assert diff == 0.0 and ours.item() == theirs.item()
assert all(torch.allclose(q.grad, r.grad) for q, r in zip(twin.parameters(), short.parameters()))
# --8<-- [end:reference]


# --8<-- [start:generator_pitfall]
def two_pass_clip(parameters, max_norm):
    total = math.sqrt(sum(p.grad.norm().item() ** 2 for p in parameters if p.grad is not None))
    scale = max_norm / (total + 1e-6)
    if scale < 1.0:
        for p in parameters:
            if p.grad is not None:
                p.grad.mul_(scale)
    return total


for name, params in [
    ("model.parameters()", lambda: model.parameters()),
    ("list(model.parameters())", lambda: list(model.parameters())),
]:
    model.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    before = two_pass_clip(params(), max_norm=1.0)
    after = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    print(f"{name:>24}: norm {before:.1f} -> {after:.1f}")
assert after.item() < 1.0 + 1e-4
# --8<-- [end:generator_pitfall]
