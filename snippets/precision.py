# --8<-- [start:imports]
import matplotlib.pyplot as plt
import torch
from torch import nn

from gradflow_ref.hardware import GPUS, peak_flops, ridge_point
from gradflow_ref.master import MasterWeights, training_state_bytes
from gradflow_ref.precision import (
    FORMATS,
    bit_fields,
    classify,
    format_table,
    neighbours,
    relative_error,
    stored_value,
    ulp,
)

device = "cuda" if torch.cuda.is_available() else "cpu"
# --8<-- [end:imports]

# --8<-- [start:bit_pattern]
for name in ("float32", "bfloat16", "float16", "float8_e4m3fn"):
    f, b = FORMATS[name], bit_fields(5.75, name)
    power = b.exponent - f.bias
    print(
        f"{f.label:<9} {b.pattern:<34} exponent {b.exponent} - {f.bias} = {power}, "
        f"stored {stored_value(5.75, name):g}"
    )
print(
    f"BF16 stores 5.743 as {stored_value(5.743, 'bfloat16')} and 5.744 as "
    f"{stored_value(5.744, 'bfloat16')}"
)
assert bit_fields(5.75, "float32").code == torch.tensor(5.75).view(torch.int32).item()
# --8<-- [end:bit_pattern]

# --8<-- [start:format_table]
print(
    "| format | sign / exp / mantissa | largest | smallest normal | smallest subnormal "
    "| epsilon | decimal digits | bytes |"
)
print("|:--|--:|--:|--:|--:|--:|--:|--:|")
for r in format_table():
    print(
        f"| {r['format']} | 1 / {r['exponent_bits']} / {r['mantissa_bits']} | {r['max']:.4g} "
        f"| {r['min_normal']:.3g} | {r['min_subnormal']:.3g} | {r['eps']:.3g} "
        f"| {r['decimal_digits']:.2f} | {r['bytes']} |"
    )
assert all(f.max == torch.finfo(f.dtype).max for f in FORMATS.values())
# --8<-- [end:format_table]

# --8<-- [start:small_gradients]
grads = (3e-5, 2e-5, 3e-6, 1e-7)
print("| format | " + " | ".join(f"{g:g}" for g in grads) + " |")
print("|:--" + "|:--" * len(grads) + "|")
for name in ("float32", "bfloat16", "float16", "float8_e5m2"):
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
print("BF16 values around 1000:", ", ".join(f"{v:g}" for v in neighbours(1000.0, "bfloat16")))
weights, kept = (0.01, 0.5, 1.0, 2.0), {}
for w in weights:
    for name in ("bfloat16", "float32"):
        weight = torch.tensor(w, dtype=FORMATS[name].dtype, device=device)
        kept[w, name] = ((weight + 1e-7) - weight).item()
    print(
        f"weight {w:>4}: + 1e-7 moves BF16 by {kept[w, 'bfloat16']:.3g}, "
        f"FP32 by {kept[w, 'float32']:.3g}"
    )
assert (torch.tensor(1000.0, dtype=torch.bfloat16) + 0.001).item() == 1000.0
assert all(kept[w, "bfloat16"] == 0 for w in weights) and kept[2.0, "float32"] == 0
# --8<-- [end:swamping]


# --8<-- [start:number_line]
def plot_number_line(centre=1000.0, half_width=10.0):
    fig, ax = plt.subplots(figsize=(7, 2.4))
    for row, name in enumerate(("bfloat16", "float16", "float32")):
        step = ulp(centre, name)
        ticks = torch.arange(centre - half_width, centre + half_width + step / 2, step)
        if len(ticks) < 200:
            ax.plot(ticks, [row] * len(ticks), "|", markersize=14)
        else:
            ax.plot([centre - half_width, centre + half_width], [row, row], linewidth=6)
        ax.text(centre + half_width * 1.05, row, f"spacing {step:g}", va="center", fontsize="small")
    for x in (1003.0, 1000.001):
        ax.axvline(x, color="grey", linestyle=":", linewidth=1)
    ax.set_yticks([0, 1, 2], ["BF16", "FP16", "FP32"])
    ax.set_ylim(-0.7, 2.7)
    ax.set_xlim(centre - half_width * 1.05, centre + half_width * 1.35)
    ax.set_xlabel("value")
    ax.set_title(f"Representable values around {centre:g} (dotted: 1003 and 1000.001)")
    return fig


fig = plot_number_line()
# --8<-- [end:number_line]


# --8<-- [start:recipe]
def student(seed: int = 1) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)


teacher = student(seed=0)
x = torch.randn(256, 8, generator=torch.Generator().manual_seed(2)).to(device)
y = teacher(x).detach()
mw = MasterWeights(student(), dtype=torch.bfloat16)
optimizer = torch.optim.Adam(mw.params, lr=1e-3)
loss = (mw.model(x.bfloat16()).float() - y).pow(2).mean()
loss.backward()
mw.grads_to_master()
optimizer.step()
mw.master_to_model()
mw.zero_grad()
print(
    f"model weights {mw.model[0].weight.dtype}, masters {mw.params[0].dtype}, "
    f"Adam state {optimizer.state[mw.params[0]]['exp_avg'].dtype}; loss {loss.item():.5f}"
)
# --8<-- [end:recipe]

# --8<-- [start:autocast]
ref = student()
ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-3)
mw = MasterWeights(student())
optimizer = torch.optim.Adam(mw.params, lr=1e-3)
for _ in range(20):
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        out = ref(x)
    (out.float() - y).pow(2).mean().backward()
    ref_opt.step()
    ref_opt.zero_grad()
    (mw.model(x.bfloat16()).float() - y).pow(2).mean().backward()
    mw.grads_to_master()
    optimizer.step()
    mw.master_to_model()
    mw.zero_grad()
gap = max((m - p).abs().max().item() for m, p in zip(mw.params, ref.parameters()))
print(f"after 20 steps, largest |master - autocast weight| = {gap}")
assert gap == 0.0
# --8<-- [end:autocast]


# --8<-- [start:stall_train]
def train(master: bool, steps: int = 200):
    if master:
        mw = MasterWeights(student())
        model, params = mw.model, mw.params
    else:
        model = student().bfloat16()
        params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=1e-3)
    losses, frozen = [], []
    for _ in range(steps):
        before = [p.detach().clone() for p in params]
        loss = (model(x.bfloat16()).float() - y).pow(2).mean()
        loss.backward()
        if master:
            mw.grads_to_master()
        optimizer.step()
        if master:
            mw.master_to_model()
        optimizer.zero_grad()
        model.zero_grad()
        losses.append(loss.item())
        same = sum((a == b).sum().item() for a, b in zip(before, params))
        frozen.append(same / sum(p.numel() for p in params))
    return losses, frozen


# --8<-- [end:stall_train]

# --8<-- [start:stall]
pure_losses, pure_frozen = train(master=False)
master_losses, master_frozen = train(master=True)
late = slice(100, 200)
print(
    f"pure BF16:      final loss {pure_losses[-1]:.5f}, "
    f"{sum(pure_frozen[late]) / 100:.0%} of updates in steps 101-200 rounded to nothing"
)
print(
    f"FP32 masters:   final loss {master_losses[-1]:.5f}, "
    f"{sum(master_frozen[late]) / 100:.2%} of master updates exactly zero"
)
assert master_losses[-1] < 0.8 * pure_losses[-1]
# --8<-- [end:stall]


# --8<-- [start:stall_figure]
def plot_stall(pure_losses, master_losses):
    fig, ax = plt.subplots()
    ax.plot(pure_losses, label="pure BF16 (weights and Adam state in BF16)")
    ax.plot(master_losses, label="BF16 model + FP32 master weights")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (MSE)")
    ax.set_title("Same model, same data, same Adam learning rate 1e-3")
    ax.legend()
    return fig


fig = plot_stall(pure_losses, master_losses)
half = len(pure_losses) // 2  # together through the first quarter, apart in the second half
assert all(abs(p / m - 1) < 0.1 for p, m in zip(pure_losses[: half // 2], master_losses))
assert pure_losses[half] / pure_losses[-1] < master_losses[half] / master_losses[-1]
# --8<-- [end:stall_figure]


# --8<-- [start:bytes_per_param]
def bytes_per_param(master: bool):
    model = student()
    if master:
        mw = MasterWeights(model)
        model, params = mw.model, mw.params
    else:
        mw, params = None, list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=1e-3)
    inputs = x.bfloat16() if master else x
    (model(inputs).float() - y).pow(2).mean().backward()
    if master:
        mw.grads_to_master()
    optimizer.step()
    n = sum(p.numel() for p in params)
    return {k: v / n for k, v in training_state_bytes(model, optimizer, mw).items()}


# --8<-- [end:bytes_per_param]

# --8<-- [start:memory_table]
fp32, mixed = bytes_per_param(master=False), bytes_per_param(master=True)
parts = {
    "weights": "weights used in forward/backward",
    "grads": "their gradients",
    "master": "FP32 master weights",
    "exp_avg": "Adam first moment",
    "exp_avg_sq": "Adam second moment",
}
total32, total_mixed = (sum(d[k] for k in parts) for d in (fp32, mixed))
print("| bytes per parameter | FP32 + Adam | BF16 + FP32 master + Adam |\n|:--|--:|--:|")
for key, label in parts.items():
    print(f"| {label} | {fp32[key]:g} | {mixed[key]:g} |")
print(f"| **total** | **{total32:g}** | **{total_mixed:g}** |")
print(f"| FP32 master gradients (during the step) | - | {mixed['master_grads']:g} |")
assert total32 == total_mixed == 16
# --8<-- [end:memory_table]

# --8<-- [start:roofline]
for gpu in GPUS:
    bf16, fp32_rate = peak_flops(gpu, "bf16"), peak_flops(gpu, "fp32")
    ridge = ridge_point(gpu, "bf16")
    print(
        f"{gpu:<14} BF16 {bf16 / 1e12:6.1f} TFLOP/s = {bf16 / fp32_rate:4.1f} x FP32; "
        f"ridge point {ridge:3.0f} FLOP/byte: an n x n matmul needs n >= {3 * ridge:4.0f}"
    )
# --8<-- [end:roofline]

# --8<-- [start:fp8]
for name in ("float8_e4m3fn", "float8_e5m2"):
    f = FORMATS[name]
    print(
        f"{f.label}: largest {f.max:g}, smallest subnormal {f.min_subnormal:g}, "
        f"1000 -> {stored_value(1000.0, name):g}, 1e-3 -> {stored_value(1e-3, name):g}"
    )
acts = (torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 1e-3).to(device)
plain = acts.to(torch.float8_e4m3fn).float()
amax_scale = FORMATS["float8_e4m3fn"].max / acts.abs().max()
scaled = (acts * amax_scale).to(torch.float8_e4m3fn).float() / amax_scale
errors = {}
for label, q in (("no scale", plain), ("per-tensor amax scale", scaled)):
    errors[label] = ((q - acts).norm() / acts.norm()).item()
    print(
        f"E4M3, {label:<22} relative error {errors[label]:.1%}, zeros {(q == 0).float().mean():.0%}"
    )
assert errors["per-tensor amax scale"] < errors["no scale"]
# --8<-- [end:fp8]
