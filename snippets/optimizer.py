# --8<-- [start:imports]
import copy
import math

import torch
import torch.nn.functional as F

import gradflow_ref.optimizer as ref
from gradflow_ref.master import training_state_bytes
from gradflow_ref.transformer import Transformer, TransformerConfig, get_batch, shakespeare

device = "cuda" if torch.cuda.is_available() else "cpu"
data = shakespeare()
# --8<-- [end:imports]

# --8<-- [start:practice]
torch.manual_seed(0)
cfg = TransformerConfig(hidden=32, n_layers=1, seq_len=16)
model = Transformer(cfg).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
x, y = (t.to(device) for t in get_batch(data, 16, 16, torch.Generator().manual_seed(0)))
with torch.autocast(device, dtype=torch.bfloat16):
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
loss.backward()
opt.step()
opt.zero_grad(set_to_none=True)
weight = model.blocks[0].mlp[0].weight
print(f"weights {weight.dtype}, moments {opt.state[weight]['exp_avg'].dtype}")
# --8<-- [end:practice]

# --8<-- [start:vanish]
w32 = torch.tensor(1.0, device=device)
w16 = torch.tensor(1.0, device=device, dtype=torch.bfloat16)
for _ in range(1000):
    w32 += 1e-4
    w16 += 1e-4
print(f"FP32 {w32.item():.5f}   BF16 {w16.item():.5f}")
# --8<-- [end:vanish]


# --8<-- [start:sr]
def stochastic_bf16(x):
    bits = x.view(torch.int32)
    noise = torch.randint(0, 1 << 16, x.shape, dtype=torch.int32).to(x.device)
    return ((bits + noise) & -65536).view(torch.float32).to(torch.bfloat16)


torch.manual_seed(0)
x = torch.full((100_000,), 1.001, device=device)
r = stochastic_bf16(x).float()
up = (r > 1).float().mean().item()
share = (x[0].item() - 1) / 2**-7
z = (up - share) / (share * (1 - share) / len(x)) ** 0.5
chance = math.erfc(abs(z) / 2**0.5)
print(f"values {sorted(set(r.tolist()))}, rounded up {up:.4f}, expected {share:.4f}")
print(f"{z:+.2f} standard errors; unbiased rounding lands this far off in {chance:.1%} of draws")
# --8<-- [end:sr]


# --8<-- [start:kahan]
def kahan_add_(w, comp, update):
    exact = w.float() + (update.float() + comp.float())
    rounded = exact.to(torch.bfloat16)
    comp.copy_(exact - rounded.float())
    w.copy_(rounded)


kahan_final = {}
for update, steps in ((1e-4, 1000), (5e-6, 2000)):
    w_kahan = torch.ones(1, device=device, dtype=torch.bfloat16)
    comp = torch.zeros_like(w_kahan)
    for _ in range(steps):
        kahan_add_(w_kahan, comp, torch.full((1,), update, device=device))
    kahan_final[update] = w_kahan.item()
    print(f"1 + {steps} x {update:g}: exact {1 + steps * update:.5f}, Kahan {w_kahan.item():.5f}")
# --8<-- [end:kahan]

# --8<-- [start:gpt]
x_eval, y_eval = (t.to(device) for t in get_batch(data, 32, 16, torch.Generator().manual_seed(9)))


def eval_loss(model):
    with torch.no_grad():
        return F.cross_entropy(model(x_eval).flatten(0, 1), y_eval.flatten()).item()


def train(model, opt, steps, seed):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x, y = (t.to(device) for t in get_batch(data, 8, 16, gen))
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        opt.step()
        size = sum(training_state_bytes(model, opt).values())
        opt.zero_grad(set_to_none=True)
    return size / sum(p.numel() for p in model.parameters())


def finish(base, seed, rounding):
    model = copy.deepcopy(base).bfloat16()
    start = [p.detach().clone() for p in model.parameters()]
    opt = ref.AdamW(model.parameters(), 3e-5, (0.9, 0.95), 1e-8, 0.1, rounding=rounding, seed=seed)
    size = train(model, opt, 6, 1000 + seed)
    moved = torch.cat([(p != s).flatten() for p, s in zip(model.parameters(), start)])
    return {"loss": eval_loss(model), "moved": moved.float().mean().item(), "bytes": size}


torch.manual_seed(0)
base = Transformer(cfg).to(device)
train(base, torch.optim.AdamW(base.parameters(), 3e-3, (0.9, 0.95), weight_decay=0.1), 30, 0)
# --8<-- [end:gpt]


# --8<-- [start:gpt_runs]
def show(xs):
    return " ".join(f"{x:+.4f}" for x in xs)


seeds = [0, 1, 2, 3, 4]
start = eval_loss(copy.deepcopy(base).bfloat16())
runs = {(m, s): finish(base, s, m) for m in ref.METHODS for s in seeds}
gain = {m: [start - runs[m, s]["loss"] for s in seeds] for m in ref.METHODS}
moved = {m: [runs[m, s]["moved"] for s in seeds] for m in ref.METHODS}
pairs = [("master", "nearest"), ("stochastic", "master"), ("kahan", "master")]
diff = {(a, b): [x - y for x, y in zip(gain[a], gain[b])] for a, b in pairs}
print(f"loss before {start:.4f}; loss gain in seeds {seeds}:")
for m in ref.METHODS:
    moves = f"{min(moved[m]):.0%} to {max(moved[m]):.0%}"
    print(f"{m:>10}: {show(gain[m])}, {runs[m, 0]['bytes']:.0f} bytes/param, moved {moves}")
for (a, b), d in diff.items():
    print(f"{a} - {b}: {show(d)}")
# --8<-- [end:gpt_runs]


# --8<-- [start:eps_widths]
def adam_sqrt_v(hidden, steps=3):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(hidden=hidden, n_layers=1, seq_len=16)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=0.0, betas=(0.9, 0.95), weight_decay=0.0)
    train(model, opt, steps, 0)
    v = torch.cat([st["exp_avg_sq"].flatten() for st in opt.state.values()])
    return (v / (1 - 0.95**steps)).sqrt()


widths = [16, 32, 64, 128, 256]
sqrt_v = {h: adam_sqrt_v(h) for h in widths}
for h, r in sqrt_v.items():
    cut = ", ".join(f"{(r < 9 * e).float().mean().item():.1%}" for e in (1e-8, 1e-6, 1e-4))
    print(f"width {h:>3}: median {r.median().item():.1e}; cut by eps 1e-8, 1e-6, 1e-4: {cut}")
# --8<-- [end:eps_widths]

# --8<-- [start:eps_dtypes]
for dtype in (torch.float16, torch.bfloat16):
    eps, g = (torch.tensor(v, dtype=dtype) for v in (1e-8, 1e-4))
    step = g / ((g * g).sqrt() + eps)
    print(f"{dtype}: eps {eps.item():.4g}, g*g {(g * g).item():.3g}, step {step.item():.4g}")
# --8<-- [end:eps_dtypes]


# --8<-- [start:moments]
def v_after(dtype, beta2, steps=1000):
    v = torch.tensor(1.0, dtype=dtype)
    for _ in range(steps):
        v = beta2 * v + (1 - beta2) * 0.25
    return v.item()


for beta2 in (0.95, 0.999):
    fp32, bf16 = v_after(torch.float32, beta2), v_after(torch.bfloat16, beta2)
    print(f"beta2 {beta2}: v in FP32 {fp32:.4f}, in BF16 {bf16:.4f}")
# --8<-- [end:moments]


# --8<-- [start:moments_run]
def bf16_step_ratio(seed, steps=100, betas2=(0.95, 0.999)):
    torch.manual_seed(seed)
    model = Transformer(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), 3e-3, (0.9, 0.95), weight_decay=0.1)
    v = {(b2, dt): 0.0 for b2 in betas2 for dt in (torch.float32, torch.bfloat16)}
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x, y = (t.to(device) for t in get_batch(data, 8, 16, gen))
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        g = torch.cat([p.grad.flatten() for p in model.parameters()])
        for b2, dt in v:
            v[b2, dt] = (b2 * v[b2, dt] + (1 - b2) * g * g).to(dt).float()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {b2: (v[b2, torch.float32] / v[b2, torch.bfloat16]).sqrt().cpu() for b2 in betas2}


ratios = [bf16_step_ratio(seed) for seed in seeds[:3]]
smaller = {b2: [(r[b2] < 0.99).float().mean().item() for r in ratios] for b2 in (0.95, 0.999)}
larger = {b2: [(r[b2] > 1.01).float().mean().item() for r in ratios] for b2 in (0.95, 0.999)}
for b2 in (0.95, 0.999):
    shares = [" ".join(f"{x:.1%}" for x in xs) for xs in (smaller[b2], larger[b2])]
    print(f"beta2 {b2}, BF16 v: step over 1% shorter {shares[0]}; over 1% longer {shares[1]}")
assert min(smaller[0.999]) > 10 * max(smaller[0.95] + larger[0.95])
# --8<-- [end:moments_run]

# --8<-- [start:decay]
lr, wd = 3e-4, 0.1
decayed = torch.nn.Parameter(torch.tensor([0.02, 0.5, 1.0], dtype=torch.bfloat16))
opt_bf16 = torch.optim.AdamW([decayed], lr=lr, weight_decay=wd)
for _ in range(1000):
    decayed.grad = torch.zeros_like(decayed)
    opt_bf16.step()
exact = [round(w * (1 - lr * wd) ** 1000, 5) for w in (0.02, 0.5, 1.0)]
print(f"BF16 weights after 1000 decay steps: {decayed.tolist()}; FP32 would hold {exact}")
# --8<-- [end:decay]
