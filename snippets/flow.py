# --8<-- [start:sigmoid_slope]
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
z = torch.linspace(-6, 6, 1201, dtype=torch.float64, device=device, requires_grad=True)
torch.sigmoid(z).sum().backward()
peak = z.grad.max()
print(f"largest sigmoid derivative {peak:.4f} at z = {z[z.grad.argmax()]:.2f}")
assert abs(peak.item() - 0.25) < 1e-12
# --8<-- [end:sigmoid_slope]

# --8<-- [start:hand_calc]
w = 0.5
x = torch.tensor(0.0, dtype=torch.float64, device=device, requires_grad=True)
a, acts = x, []
for _ in range(3):
    a = torch.sigmoid(w * a)
    a.retain_grad()
    acts.append(a)
a.backward()
for k, act in enumerate(acts, 1):
    print(f"dL/da{k} = {act.grad:.5f}")
print(f"dL/dx  = {x.grad:.5f}")
print(f"best case, every factor 0.25 x {w}: {(0.25 * w) ** 3:.5f}")
assert 0.9 * (0.25 * w) ** 3 < x.grad.item() < (0.25 * w) ** 3
# --8<-- [end:hand_calc]

# --8<-- [start:hook]
from torch import nn

import gradflow_ref.flow as ref


def log_grad_norms(model, norms):
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    for k, layer in enumerate(linears, 1):

        def save(module, grad_input, grad_output, k=k):
            norms[k] = grad_input[0].norm().item()

        layer.register_full_backward_hook(save)


torch.manual_seed(0)
batch = torch.randn(32, 64).to(device).requires_grad_()
# --8<-- [end:hook]

# --8<-- [start:mlp]
to_output = {}
for activation, init in [("sigmoid", "xavier"), ("relu", "he")]:
    net = ref.build_mlp(ref.MLPConfig(20, 64, activation, init), device=device)
    norms = {}
    log_grad_norms(net, norms)
    out = net(batch)
    out.retain_grad()
    out.sum().backward()
    out_norm = out.grad.norm().item()
    to_output[activation] = norms[1] / out_norm
    print(
        f"{activation:<7} output {out_norm:.2f}",
        f"layer 20 {norms[20]:.3e}",
        f"layer 1 {norms[1]:.3e}",
    )
assert to_output["sigmoid"] < 1e-9 and 0.1 < to_output["relu"] < 10
# --8<-- [end:mlp]

# --8<-- [start:inside]
g = ref.gradient_norms(net, batch)
print(f"relu, layer 1: module hook {norms[1]:.4e}, ref.gradient_norms {g[0]:.4e}")
# --8<-- [end:inside]

# --8<-- [start:figure]
import matplotlib.pyplot as plt

scales = [2 ** (k / 2) / 4 for k in range(13)]
by_depth, by_scale = {}, {}
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
for activation, init, style in [
    ("sigmoid", "xavier", "o-"),
    ("tanh", "xavier", "s-"),
    ("relu", "he", "^-"),
]:
    net = ref.build_mlp(ref.MLPConfig(40, 64, activation, init), device=device)
    by_depth[activation] = ratio = ref.gradient_norms(net, batch).cpu() / out_norm
    left.plot(range(1, 41), ratio, style, markersize=3, label=f"{activation}, {init} init")
    at_layer_1 = []
    for s in scales:
        net = ref.build_mlp(ref.MLPConfig(20, 64, activation, init, scale=s), device=device)
        at_layer_1.append(ref.gradient_norms(net, batch)[0].item() / out_norm)
    by_scale[activation] = at_layer_1
    right.plot(scales, at_layer_1, style, markersize=3)
left.set_yscale("log")
left.set_xlabel("layer of a 40-layer MLP")
left.set_ylabel("gradient norm / output's")
left.set_title("Across depth, at the init's own scale")
right.set_xscale("log")
right.set_xlabel("multiplier on the init's weights")
right.set_title("Layer 1 of a 20-layer MLP")
right.axvline(1.0, color="grey", linewidth=0.8, linestyle=":")
right.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
left.legend(fontsize="small")
assert by_depth["sigmoid"][0] < 1e-20 and 0.1 < by_depth["tanh"][0] < 1
assert ((0.5 < by_depth["relu"]) & (by_depth["relu"] < 2)).all()
assert all(r[0] < 1e-10 and r[-1] > 1 for r in by_scale.values())
assert len({min(s for s, r in zip(scales, rs) if r >= 1) for rs in by_scale.values()}) == 3
# --8<-- [end:figure]

# --8<-- [start:draws]
noise = torch.randn(32, 64, generator=torch.Generator().manual_seed(1)).to(device)
losses = {"out.sum()": (None, out_norm), "random": (lambda o: (o * noise).sum(), noise.norm())}
configs = [ref.MLPConfig(40, 64, "relu", "he", seed=seed) for seed in range(20)]
nets = [ref.build_mlp(cfg, device=device) for cfg in configs]
draws = {}
for depth in (20, 40):
    for name, (loss, norm) in losses.items():
        g = [ref.gradient_norms(net[: 2 * depth], batch, loss)[0] / norm for net in nets]
        draws[depth, name] = r = torch.stack(g).cpu()
        print(
            f"{depth} layers, {name:9s}: median {r.median():.2f}, from {r.min():.2f} to "
            f"{r.max():.2f}, root mean square {r.square().mean().sqrt():.2f}"
        )
assert all(0.7 < draws[d, "random"].square().mean().sqrt() < 1.4 for d in (20, 40))
# --8<-- [end:draws]

# --8<-- [start:what_controls]
torch.manual_seed(1)
cases = [(16, 0.35), (256, 0.0875), (256, 0.35)]
factors = []
for width, std in cases:
    cfg = ref.MLPConfig(12, width, "relu", "he", scale=std / (2 / width) ** 0.5)
    net = ref.build_mlp(cfg, device=device)
    w_std = torch.cat([p.flatten() for p in net.parameters()]).std()
    predicted = std * width**0.5 / 2**0.5
    measured = ref.layer_factors(net, torch.randn(64, width).to(device))[:-1].log().mean().exp()
    factors.append(measured.item())
    print(
        f"width {width:>3}  weight std {w_std:.4f}  predicted factor {predicted:.2f}"
        f"  measured {measured:.2f}"
    )
assert 0.8 < factors[1] / factors[0] < 1.25 < factors[2] / factors[0]
# --8<-- [end:what_controls]

# --8<-- [start:relu_unit]
ratios = {}
for init in ("unit", "he"):
    net = ref.build_mlp(ref.MLPConfig(20, 64, "relu", init), device=device)
    ratios[init] = ref.gradient_norms(net, batch)[0].item() / out_norm
    print(f"relu, {init:<4} init: layer 1 gets {ratios[init]:.3e} x the output's gradient")
assert ratios["unit"] > 1e6 * ratios["he"]
# --8<-- [end:relu_unit]
