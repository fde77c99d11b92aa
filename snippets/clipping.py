# --8<-- [start:imports]
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parameters_to_vector

import gradflow_ref.clipping as ref

device = "cuda" if torch.cuda.is_available() else "cpu"
# --8<-- [end:imports]


# --8<-- [start:train]
def train(seed, max_norm, spike_at=None, steps=150, lr=3e-3):
    torch.manual_seed(seed)
    teacher = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    x_test = torch.randn(256, 16).to(device)
    y_test = teacher(x_test).detach()
    log = []
    for step in range(steps):
        x, noise = torch.randn(32, 16).to(device), torch.randn(32, 1).to(device)
        y = (teacher(x).detach() + 0.3 * noise) * (100 if step == spike_at else 1)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)
        before = parameters_to_vector(model.parameters()).detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            moved = (parameters_to_vector(model.parameters()) - before).square().mean().sqrt()
            m_hat, v_hat = ref.adam_moments(opt)
            lr_eff = (lr / (v_hat.sqrt() + 1e-8)).median()
            test_loss = F.mse_loss(model(x_test), y_test)
        log.append(torch.stack([norm, test_loss, moved / lr, m_hat.norm(), v_hat.norm(), lr_eff]))
    return dict(zip(["norm", "loss", "step", "m", "v", "lr_eff"], torch.stack(log).T.cpu()))


# --8<-- [end:train]

# --8<-- [start:quiet]
quiet = train(seed=0, max_norm=1.0)
clipped_steps = int((quiet["norm"] > 1.0).sum())
print(f"gradient norm: first step {quiet['norm'][0]:.3f}, median {quiet['norm'].median():.3f}")
print(f"steps clipped: {clipped_steps} of {len(quiet['norm'])}")
print(f"step per weight, in lr: first {quiet['step'][0]:.3f}, median {quiet['step'].median():.3f}")
print(f"test loss: after step 1 {quiet['loss'][0]:.4f}, at the end {quiet['loss'][-1]:.4f}")
# --8<-- [end:quiet]

# --8<-- [start:hand_calc]
a = torch.zeros(2, device=device, requires_grad=True)
b = torch.zeros(1, device=device, requires_grad=True)
for max_norm in (1.0, 10.0):
    a.grad = torch.tensor([3.0, 4.0], device=device)
    b.grad = torch.tensor([0.0], device=device)
    total = torch.nn.utils.clip_grad_norm_([a, b], max_norm=max_norm)
    print(
        f"max_norm={max_norm:<4}: global norm {total:.4f}, gradients now "
        f"[{a.grad[0]:.4f}, {a.grad[1]:.4f}] and [{b.grad[0]:.4f}]"
    )
# --8<-- [end:hand_calc]

# --8<-- [start:norm_vs_value]
g = torch.tensor([2.4, 0.6], device=device)
by_norm = torch.zeros(2, device=device, requires_grad=True)
by_value = torch.zeros(2, device=device, requires_grad=True)
by_norm.grad, by_value.grad = g.clone(), g.clone()
torch.nn.utils.clip_grad_norm_(by_norm, max_norm=1.0)
torch.nn.utils.clip_grad_value_(by_value, clip_value=1.0)
for name, v in [("norm-clipped", by_norm.grad), ("value-clipped", by_value.grad)]:
    print(
        f"{name:>13}: [{v[0]:.3f}, {v[1]:.3f}]  length {v.norm():.3f}  "
        f"turned by {ref.angle_between(g, v):.1f} degrees"
    )
# --8<-- [end:norm_vs_value]

# --8<-- [start:spike]
spike_at, seeds = 50, range(5)
settings = {"no clipping": math.inf, "max_norm=1.0": 1.0, "max_norm=0.01": 0.01}
runs = {name: [train(s, c, spike_at) for s in seeds] for name, c in settings.items()}


def effects(run, at=spike_at):
    before = slice(at - 20, at)
    return {
        "norm x": run["norm"][at] / run["norm"][before].median(),
        "step": run["step"][at],
        "step before": run["step"][before].median(),
        "m x": run["m"][at] / run["m"][at - 1],
        "v x": run["v"][at] / run["v"][at - 1],
        "slow steps": (run["lr_eff"][at:] < run["lr_eff"][at - 1] / 2).sum(),
        "loss x": run["loss"][at : at + 50].mean() / run["loss"][before].mean(),
        "final loss": run["loss"][-20:].mean(),
    }


# --8<-- [end:spike]


# --8<-- [start:spike_table]
def spread(t):
    text = [f"{x:.3g}" if x < 1000 else f"{x:.0f}" for x in (t.median(), t.min(), t.max())]
    return "{} ({}-{})".format(*text)


found = {}
for name, logs in runs.items():
    rows = [effects(log) for log in logs]
    found[name] = {key: torch.stack([row[key] for row in rows]).float() for key in rows[0]}
print(f"{'5 seeds':>11}" + "".join(f"{name:>26}" for name in runs))
for key in found["no clipping"]:
    print(f"{key:>11}" + "".join(f"{spread(f[key]):>26}" for f in found.values()))
assert found["max_norm=1.0"]["v x"].max() < found["no clipping"]["v x"].min()
# --8<-- [end:spike_table]


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
grads = [100 * torch.randn(shape).to(device) for shape in [(64, 16), (64,), (1, 64), (1,)]]
copies = {name: [torch.zeros_like(gr) for gr in grads] for name in ("torch", "ref", "mine")}
for params in copies.values():
    for p, gr in zip(params, grads):
        p.grad = gr.clone()
theirs = torch.nn.utils.clip_grad_norm_(copies["torch"], max_norm=1.0)
ours = ref.clip_grad_norm_(copies["ref"], max_norm=1.0)
mine = clip_norm(copies["mine"], max_norm=1.0)
diff = max((p.grad - q.grad).abs().max().item() for p, q in zip(copies["torch"], copies["ref"]))
print(f"total norm: torch {theirs:.6f}, gradflow_ref {ours:.6f}, clip_norm {mine:.6f}")
print(f"largest gradient difference, gradflow_ref against torch: {diff:.1e}")
# --8<-- [end:reference]


# --8<-- [start:generator_pitfall]
def two_pass_clip(parameters, max_norm):
    total = math.sqrt(sum(p.grad.norm().item() ** 2 for p in parameters))
    for p in parameters:
        p.grad.mul_(min(1.0, max_norm / total))


net = torch.nn.Linear(16, 1).to(device)
net(100 * torch.randn(32, 16).to(device)).square().mean().backward()
two_pass_clip(net.parameters(), max_norm=1.0)
pitfall = torch.nn.utils.get_total_norm([p.grad for p in net.parameters()])
print(f"gradient norm after two_pass_clip(net.parameters(), max_norm=1.0): {pitfall:.1f}")
# --8<-- [end:generator_pitfall]
