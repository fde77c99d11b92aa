# --8<-- [start:setup]
import math

import torch

from gradflow_ref import fp8, roofline
from gradflow_ref.hardware import GPUS, peak_flops, ridge_point

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
# --8<-- [end:setup]

# --8<-- [start:ridge]
for name in GPUS:
    peak, ridge = peak_flops(name, "bf16"), ridge_point(name, "bf16")
    print(f"{name:14} BF16 peak {peak / 1e12:6.1f} TFLOP/s, ridge {ridge:6.1f} FLOP/byte")
ridge_a100 = ridge_point("A100 80GB SXM", "bf16")
ridge_h100 = ridge_point("H100 SXM", "bf16")
ridge_h200 = ridge_point("H200 SXM", "bf16")
assert ridge_h200 < ridge_h100
# --8<-- [end:ridge]

# --8<-- [start:roofline]
hidden, mlp, tokens = 4096, 11008, 4096
decode = roofline.Matmul(m=1, n=mlp, k=hidden, dtype_bytes=2)
prefill = roofline.Matmul(m=tokens, n=mlp, k=hidden, dtype_bytes=2)
for label, mm in (("1 token", decode), (f"{tokens} tokens", prefill)):
    b = roofline.matmul_bound(mm, "H100 SXM", "bf16")
    print(
        f"{label:12} {mm.intensity:7.1f} FLOP/byte  {b.attainable_flops / 1e12:6.1f} TFLOP/s  "
        f"{b.time_s * 1e6:8.2f} us  {b.bound}-bound"
    )
bound_decode = roofline.matmul_bound(decode, "H100 SXM", "bf16")
bound_prefill = roofline.matmul_bound(prefill, "H100 SXM", "bf16")
assert bound_decode.bound == "memory" and bound_prefill.bound == "compute"
for gpu in GPUS:
    one, many = (roofline.matmul_bound(mm, gpu, "bf16") for mm in (decode, prefill))
    assert one.bound == "memory" and one.attainable_flops < 0.01 * peak_flops(gpu, "bf16")
    assert many.bound == "compute"
# --8<-- [end:roofline]

# --8<-- [start:attention_io]
sram, head_dim, seq, longest = 192 * 1024, 64, 4096, 2**20
io = {}
for n in (1024, seq, 16384, longest):
    standard = roofline.attention_hbm_bytes(n, head_dim)
    flash = roofline.flash_attention_hbm_bytes(n, head_dim, sram)
    io[n] = standard / flash
    mib = f"standard {standard / 2**20:9,.0f} MiB, flash {flash / 2**20:9,.1f} MiB"
    print(f"N={n:9,}: {mib}, {io[n]:.1f}x fewer")
io_ratio = io[seq]
assert 1 < io[1024] < io_ratio < io[longest] < 1.2 * io_ratio  # grows, then levels off
# --8<-- [end:attention_io]


# --8<-- [start:attention_memory]
def naive_attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return scores.softmax(dim=-1) @ v


seq_memory = {}
for n in (512, 1024, 2048):
    q, k, v = (torch.randn(1, 4, n, 64) for _ in range(3))
    naive = roofline.peak_tensor_bytes(naive_attention, q, k, v)
    fused = roofline.peak_tensor_bytes(torch.nn.functional.scaled_dot_product_attention, q, k, v)
    seq_memory[n] = (naive, fused)
    print(
        f"N={n:5} naive {naive / 2**20:6.1f} MiB, SDPA {fused / 2**20:5.2f} MiB (CPU, peak tensors)"
    )
assert all(naive > 10 * fused for naive, fused in seq_memory.values())
# --8<-- [end:attention_memory]

# --8<-- [start:fp8_formats]
e4m3, e5m2 = fp8.FORMATS["e4m3"], fp8.FORMATS["e5m2"]
for f in (e4m3, e5m2):
    print(
        f"{f.name}: max {f.max:g}, min normal {f.min_normal:.3g}, "
        f"min subnormal {f.min_subnormal:.3g}, spacing at 1 {f.spacing_at_one:g}"
    )
    from_torch = torch.arange(256, dtype=torch.uint8).view(f.dtype).float().tolist()
    ours = fp8.values(f)
    assert all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(ours, from_torch))
    assert f.max == torch.finfo(f.dtype).max and f.min_normal == torch.finfo(f.dtype).tiny
binades = {f.name: math.log2(f.max / f.min_subnormal) for f in (e4m3, e5m2)}
# --8<-- [end:fp8_formats]

# --8<-- [start:fp8_tensors]
width = 256
model = torch.nn.Sequential(
    torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)
).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
gain = torch.ones(width, device=device)
outliers = torch.randperm(width)[:4]
gain[outliers] = 100.0
teacher = torch.randn(width, width).to(device) / width**0.5
acts, grads = [], []
for _ in range(12):
    x = torch.randn(128, width).to(device) * gain
    loss = torch.nn.functional.mse_loss(model(x), x @ teacher)
    opt.zero_grad()
    loss.backward()
    opt.step()
    acts.append(x)
    grads.append(model[0].weight.grad.clone())
print(f"activation amax {acts[-1].abs().max():.3g}, median |x| {acts[-1].abs().median():.3g}")
print(f"gradient amax {grads[-1].abs().max():.3g}, median |g| {grads[-1].abs().median():.3g}")
# --8<-- [end:fp8_tensors]


# --8<-- [start:fp8_scaling]
def mean_rel_error(t, q):
    nonzero = t != 0  # a zero has no relative error: left out
    rel = ((t - q) / t).abs().where(nonzero, 0)
    return float(rel.sum() / nonzero.sum())


def measure(tensors, fmt):
    delayed = fp8.DelayedScaling(fmt, history=4)
    methods = {
        "delayed": delayed,
        "current": lambda t: fp8.current_scaling(t, fmt),
        "1x128": lambda t: fp8.block_scaling(t, fmt, (1, 128)),
        "128x128": lambda t: fp8.block_scaling(t, fmt, (128, 128)),
    }
    out = {}
    for name, quant in methods.items():
        pairs = [(t, quant(t)) for t in tensors]
        err = sum(mean_rel_error(t, q) for t, q in pairs) / len(pairs)
        zero = sum(fp8.flushed_to_zero(t, q) for t, q in pairs) / len(pairs)
        out[name] = (err, zero)
        print(f"  {fmt} {name:8} mean relative error {err:.2%}, flushed to zero {zero:.3%}")
    return out


results = {}
for label, tensors in (("activations", acts), ("gradients", grads)):
    for fmt in ("e4m3", "e5m2"):
        print(label)
        results[label, fmt] = measure(tensors, fmt)
assert results["activations", "e4m3"]["current"][0] < results["activations", "e5m2"]["current"][0]
assert results["gradients", "e5m2"]["current"][1] < results["gradients", "e4m3"]["current"][1]
flushed = {name: zero for name, (err, zero) in results["gradients", "e4m3"].items()}
assert min(flushed, key=flushed.get) == "1x128" and max(flushed, key=flushed.get) == "delayed"
assert results["activations", "e4m3"]["current"][1] < flushed["current"]
amax = [g.abs().max().item() for g in grads]
too_small = sum(max(amax[max(0, t - 4) : t]) > amax[t] for t in range(1, len(amax)))
assert amax[0] > amax[-1] and too_small > (len(amax) - 1) / 2
# --8<-- [end:fp8_scaling]

# --8<-- [start:training_time]
budgets = {"GPT-3 175B": 3.14e23, "Llama 3 405B": 3.8e25}
mfu = 0.4
years = {}
for model_name, flops in budgets.items():
    for gpu_name in GPUS:
        years[model_name, gpu_name] = roofline.training_days(flops, gpu_name, "bf16", mfu) / 365
        print(f"{model_name:13} on one {gpu_name:14} {years[model_name, gpu_name]:9,.0f} years")
# --8<-- [end:training_time]


# --8<-- [start:break_it]
def train(mode, steps=30):
    torch.manual_seed(0)
    layers = []
    for _ in range(10):
        layers += [torch.nn.Linear(64, 64), torch.nn.Tanh()]
    net = torch.nn.Sequential(*layers, torch.nn.Linear(64, 1)).to(device)
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(0.5)
    sgd = torch.optim.SGD(net.parameters(), lr=0.5)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp16 + GradScaler": torch.float16}
    low = dtype.get(mode)
    scaler = torch.amp.GradScaler(device, enabled=mode == "fp16 + GradScaler")
    x = torch.randn(128, 64).to(device)
    y = 1e-3 * torch.sin(x[:, :1])
    losses, bad = [], []
    for _ in range(steps):
        with torch.autocast(device, dtype=low or torch.float32, enabled=low is not None):
            loss = torch.nn.functional.mse_loss(net(x).float(), y)
        sgd.zero_grad()
        scaler.scale(loss).backward()
        g = torch.cat([p.grad.flatten() for p in net.parameters()])
        bad.append(float(((g == 0) | ~g.isfinite()).float().mean()))
        scaler.step(sgd)
        scaler.update()
        losses.append(loss.item())
    return losses, bad


runs = {mode: train(mode) for mode in ("fp32", "fp16", "fp16 + GradScaler", "bf16")}
for mode, (losses, bad) in runs.items():
    print(f"{mode:18} loss {losses[-1]:.3g}  zero or non-finite gradients {max(bad):.1%} at worst")
assert max(runs["fp16"][1]) > 10 * max(runs["fp16 + GradScaler"][1])
final = [losses[-1] for losses, _ in runs.values()]
assert max(final) / min(final) < 1.01
# --8<-- [end:break_it]
