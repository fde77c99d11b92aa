# --8<-- [start:setup]
import math

import torch

from gradflow_ref import fp8, roofline
from gradflow_ref.hardware import GPUS, on_chip, peak_flops, ridge_point
from gradflow_ref.precision import get_format

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
a100 = on_chip("A100 80GB SXM")
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
bounds = {}
for gpu in GPUS:
    for m, mm in ((1, decode), (tokens, prefill)):
        b = bounds[gpu, m] = roofline.matmul_bound(mm, gpu, "bf16")
        print(
            f"{gpu:14} {m:5} tokens {b.intensity:7.1f} FLOP/byte  "
            f"{b.attainable_flops / 1e12:6.1f} TFLOP/s  {b.time_s * 1e6:8.2f} us  {b.bound}-bound"
        )
bound_decode, bound_prefill = bounds["H100 SXM", 1], bounds["H100 SXM", tokens]
assert bound_decode.bound == "memory" and bound_prefill.bound == "compute"
# --8<-- [end:roofline]

# --8<-- [start:attention_io]
sram = a100.shared_max_kib_per_sm * 1024
head_dim, seq, longest = 64, 4096, 2**20
io = {}
for n in (1024, seq, 16384, longest):
    standard = roofline.attention_hbm_bytes(n, head_dim)
    flash = roofline.flash_attention_hbm_bytes(n, head_dim, sram)
    io[n] = standard / flash
    mib = f"standard {standard / 2**20:9,.0f} MiB, flash {flash / 2**20:9,.1f} MiB"
    print(f"N={n:9,}: {mib}, {io[n]:.1f}x fewer")
io_ratio = io[seq]
assert 1 < io[1024] < io_ratio < io[longest] < 1.2 * io_ratio
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
e4m3, e5m2 = get_format("e4m3"), get_format("e5m2")
big = torch.tensor([1000.0, 1e5])
for name, f in (("e4m3", e4m3), ("e5m2", e5m2)):
    print(
        f"{name}: max {f.max:g}, min normal {f.min_normal:.3g}, "
        f"min subnormal {f.min_subnormal:.3g}, spacing at 1 {f.eps:g}; "
        f"1000 and 1e5 are stored as {big.to(f.dtype).float().tolist()}"
    )
binades = {name: math.log2(f.max / f.min_subnormal) for name, f in (("e4m3", e4m3), ("e5m2", e5m2))}
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
    nonzero = t != 0
    rel = ((t - q) / t).abs().where(nonzero, 0)
    return float(rel.sum() / nonzero.sum())


def measure(label, tensors, fmt):
    methods = {
        "delayed": fp8.DelayedScaling(fmt, history=4),
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
        print(f"{label:11} {fmt} {name:8} mean relative error {err:.2%}, flushed {zero:.3%}")
    return out


results = {}
for label, tensors in (("activations", acts), ("gradients", grads)):
    for fmt in ("e4m3", "e5m2"):
        results[label, fmt] = measure(label, tensors, fmt)
amax = [g.abs().max().item() for g in grads]
too_small = sum(max(amax[max(0, t - 4) : t]) > amax[t] for t in range(1, len(amax)))
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
