# --8<-- [start:imports]
import torch
from torch import nn

from gradflow_ref.precision import (
    FORMATS,
    bit_fields,
    classify,
    relative_error,
    stored_value,
    ulp,
)

device = "cuda" if torch.cuda.is_available() else "cpu"
# --8<-- [end:imports]

# --8<-- [start:bit_pattern]
for name in ("float32", "bfloat16", "float16"):
    f, b = FORMATS[name], bit_fields(5.75, name)
    print(f"{f.label:<5} {b.pattern:<34} exponent {b.exponent} - {f.bias} = {b.exponent - f.bias}")
print(
    f"BF16 stores 5.743 as {stored_value(5.743, 'bfloat16')} and 5.744 as "
    f"{stored_value(5.744, 'bfloat16')}"
)
# --8<-- [end:bit_pattern]

# --8<-- [start:small_gradients]
grads = (3e-5, 2e-5, 3e-6, 1e-7)
print("| format | " + " | ".join(f"{g:g}" for g in grads) + " |")
print("|:--" + "|:--" * len(grads) + "|")
for name in ("float32", "bfloat16", "float16"):
    cells = []
    for g in grads:
        kind = classify(g, name)
        note = "" if kind == "normal" else f" ({kind})"
        cells.append(f"{stored_value(g, name):.4g}{note}, {relative_error(g, name):.1%} off")
    print(f"| {FORMATS[name].label} | " + " | ".join(cells) + " |")
assert classify(3e-5, "float16") == "subnormal" and classify(1e-7, "bfloat16") == "normal"
# --8<-- [end:small_gradients]

# --8<-- [start:swamping]
for name in ("float32", "bfloat16", "float16"):
    dt = FORMATS[name].dtype
    total = torch.tensor(1000.0, dtype=dt, device=device) + torch.tensor(0.001, dtype=dt)
    print(
        f"{FORMATS[name].label}: spacing at 1000 is {ulp(1000.0, name):g}; "
        f"1000 + 0.001 = {total.item():.6f}"
    )
weights, kept = (0.01, 0.5, 1.0, 2.0), {}
for w in weights:
    for name in ("bfloat16", "float32"):
        weight = torch.tensor(w, dtype=FORMATS[name].dtype, device=device)
        kept[w, name] = ((weight + 1e-7) - weight).item()
    print(
        f"weight {w:>4}: + 1e-7 moves BF16 by {kept[w, 'bfloat16']:.3g}, "
        f"FP32 by {kept[w, 'float32']:.3g}"
    )
assert all(kept[w, "bfloat16"] == 0 for w in weights) and kept[2.0, "float32"] == 0
# --8<-- [end:swamping]


# --8<-- [start:autocast]
def student(seed: int = 1) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)


teacher = student(seed=0)
x = torch.randn(256, 8, generator=torch.Generator().manual_seed(2)).to(device)
y = teacher(x).detach()

model = student()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(20):
    optimizer.zero_grad()
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        out = model(x)
    loss = (out.float() - y).pow(2).mean()
    loss.backward()
    optimizer.step()
w = model[0].weight
print(
    f"output {out.dtype}; weight {w.dtype}, its gradient {w.grad.dtype}, "
    f"AdamW moments {optimizer.state[w]['exp_avg'].dtype}; loss {loss.item():.5f}"
)
# --8<-- [end:autocast]

# --8<-- [start:inside]
import gradflow_ref.master as ref

twin = student()
twin_opt = torch.optim.AdamW(twin.parameters(), lr=1e-3)
mw = ref.MasterWeights(student(), dtype=torch.bfloat16)
mw_opt = torch.optim.AdamW(mw.params, lr=1e-3)
for _ in range(20):
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        twin_loss = (twin(x).float() - y).pow(2).mean()
    twin_loss.backward()
    twin_opt.step()
    twin_opt.zero_grad()
    (mw.model(x.bfloat16()).float() - y).pow(2).mean().backward()
    mw.grads_to_master()
    mw_opt.step()
    mw.master_to_model()
    mw.zero_grad()
gap = max((m - p).abs().max().item() for m, p in zip(mw.params, twin.parameters()))
print(f"BF16 copy {mw.model[0].weight.dtype}, masters {mw.params[0].dtype}; largest gap {gap}")
assert gap == 0.0
# --8<-- [end:inside]


# --8<-- [start:stall_train]
def train(pure_bf16: bool, seed: int, steps: int = 200):
    net = student(seed)
    if pure_bf16:
        net = net.bfloat16()
    params = list(net.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    losses, frozen = [], []
    for _ in range(steps):
        before = [p.detach().clone() for p in params]
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            step_loss = (net(x).float() - y).pow(2).mean()
        step_loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(step_loss.item())
        same = sum((a == b).sum().item() for a, b in zip(before, params))
        frozen.append(same / sum(p.numel() for p in params))
    return losses, frozen


# --8<-- [end:stall_train]

# --8<-- [start:stall]
seeds = (1, 2, 3)
runs = {(pure, s): train(pure, s) for pure in (True, False) for s in seeds}
late_lost = {key: sum(frozen[100:]) / len(frozen[100:]) for key, (_, frozen) in runs.items()}
for s in seeds:
    pure, fp32 = runs[True, s][0][-1], runs[False, s][0][-1]
    print(
        f"seed {s}: final loss pure BF16 {pure:.5f}, FP32 {fp32:.5f}; updates lost in "
        f"steps 101-200: pure BF16 {late_lost[True, s]:.0%}, FP32 {late_lost[False, s]:.1%}"
    )
ratio = [runs[True, s][0][-1] / runs[False, s][0][-1] for s in seeds]
assert min(ratio) > 1
# --8<-- [end:stall]

# --8<-- [start:memory]
from gradflow_ref.master import training_state_bytes
from gradflow_ref.memory import MemoryConfig, training_memory

P, f32, b16 = 7_000_000_000, torch.float32, torch.bfloat16
layouts = {
    "autocast": MemoryConfig(n_params=P, param_dtype=f32, master_dtype=None, grad_dtype=f32),
    "BF16 copy": MemoryConfig(n_params=P, param_dtype=b16, master_dtype=f32, grad_dtype=f32),
}
state = {name: training_memory(cfg) for name, cfg in layouts.items()}
totals = {}
print("| bytes per parameter | weights | FP32 masters | gradients | AdamW moments | total |")
print("|:--|--:|--:|--:|--:|--:|")
for name, m in state.items():
    parts = (m.weights, m.master_weights, m.gradients, m.optimizer_states)
    totals[name] = sum(parts) / P
    print(f"| {name} | " + " | ".join(f"{b / P:g}" for b in parts) + f" | {totals[name]:g} |")
counted = training_state_bytes(model, optimizer)
n = sum(p.numel() for p in model.parameters())
per_param = sum(counted[k] for k in ("weights", "grads", "exp_avg", "exp_avg_sq")) / n
print(f"the autocast model above, counted from its tensors: {per_param:g} bytes per parameter")
# --8<-- [end:memory]
