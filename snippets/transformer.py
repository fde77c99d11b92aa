# --8<-- [start:imports]
import math

import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector

from gradflow_ref.transformer import Transformer, TransformerConfig, get_batch, shakespeare

device = "cuda" if torch.cuda.is_available() else "cpu"
data = shakespeare()
# --8<-- [end:imports]


# --8<-- [start:profile]
def grad_profile(n_layers, norm, depth_init, seed=0, qk_norm=False):
    torch.manual_seed(seed)
    switches = dict(norm=norm, depth_init=depth_init, qk_norm=qk_norm)
    cfg = TransformerConfig(n_layers=n_layers, seq_len=16, **switches)
    model = Transformer(cfg).to(device)
    stream = []
    for block in model.blocks:
        block.register_forward_pre_hook(lambda module, args: stream.append(args[0]))
    x, y = get_batch(data, 4, 16, torch.Generator().manual_seed(seed))
    loss = F.cross_entropy(model(x.to(device)).flatten(0, 1), y.to(device).flatten())
    return torch.stack([g.norm() for g in torch.autograd.grad(loss, stream)]).cpu()


# --8<-- [end:profile]


# --8<-- [start:depth_init]
def depth_scaled_init_(model, n_layers, residual=("attn.proj.weight", "mlp.2.weight")):
    for name, p in model.named_parameters():
        if p.dim() == 2:
            std = 0.02 / math.sqrt(2 * n_layers) if name.endswith(residual) else 0.02
            torch.nn.init.normal_(p, std=std)


torch.manual_seed(0)
model = Transformer(TransformerConfig(n_layers=48, depth_init=False)).to(device)
depth_scaled_init_(model, n_layers=48)
proj_std = torch.cat([block.attn.proj.weight.flatten() for block in model.blocks]).std().item()
print(f"attn.proj std {proj_std:.5f}, 0.02 / sqrt(2 * 48) = {0.02 / math.sqrt(96):.5f}")
# --8<-- [end:depth_init]

# --8<-- [start:residual]
depths, settings = [6, 12, 24, 48], [("pre", True), ("pre", False), ("post", True), ("post", False)]
profiles = {(norm, on, n): grad_profile(n, norm, on) for norm, on in settings for n in depths}


def first_over_last(p):
    return (p[0] / p[-1]).item()


print(f"{'block 1 / block L':>26}" + "".join(f"{f'L={n}':>8}" for n in depths))
for norm, on in settings:
    ratios = "".join(f"{first_over_last(profiles[norm, on, n]):8.2f}" for n in depths)
    print(f"{norm + '-LN, depth init ' + ('on' if on else 'off'):>26}{ratios}")
# --8<-- [end:residual]


# --8<-- [start:seeds]
def spread(values):
    t = torch.as_tensor(values, dtype=torch.float64)
    text = [f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}" for x in (t.median(), t.min(), t.max())]
    return "{} ({}{}{})".format(text[0], text[1], " to " if t.min() < 0 else "-", text[2])


deep_no_init = [first_over_last(profiles["pre", False, 48])]
deep_no_init += [first_over_last(grad_profile(48, "pre", False, seed)) for seed in (1, 2)]
post_inner = max(p[1:].max() / p[1:].min() for key, p in profiles.items() if key[0] == "post")
print(f"pre-LN, depth init off, L=48, 3 seeds: {spread(deep_no_init)}")
print(f"post-LN, blocks 2 to L: largest / smallest gradient {post_inner:.3f}")
# --8<-- [end:seeds]


# --8<-- [start:qk_norm]
def causal_attention(q, k, v, q_norm=None, k_norm=None):
    if q_norm is not None:
        q, k = q_norm(q), k_norm(k)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


torch.manual_seed(0)
head_dim = 16
q_norm = torch.nn.LayerNorm(head_dim).to(device)
k_norm = torch.nn.LayerNorm(head_dim).to(device)
q, k, v = (torch.randn(2, 2, 16, head_dim).to(device) for _ in range(3))
out = causal_attention(q, k, v, q_norm, k_norm)
for scale in (1.0, 30.0):
    raw = (scale * q) @ (scale * k).transpose(-2, -1) / math.sqrt(head_dim)
    normed = q_norm(scale * q) @ k_norm(scale * k).transpose(-2, -1) / math.sqrt(head_dim)
    print(f"q, k x{scale:<4g}: largest logit {raw.amax():8.1f} raw, {normed.amax():.2f} QK-normed")
# --8<-- [end:qk_norm]


# --8<-- [start:lm_loss]
def lm_loss(logits, targets, z_loss=1e-4):
    log_z = logits.logsumexp(dim=-1)
    ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    return ce + z_loss * log_z.square().mean(), ce, log_z.mean()


# --8<-- [end:lm_loss]

# --8<-- [start:z_loss]
logits = torch.randn(4, 16, 256).to(device)
targets = torch.randint(256, (4, 16)).to(device)
for shift in (0.0, 20.0):
    total, ce, log_z = lm_loss(logits + shift, targets)
    print(f"logits + {shift:>2g}: cross-entropy {ce:.4f}, log Z {log_z:5.2f}, total {total:.4f}")
# --8<-- [end:z_loss]


# --8<-- [start:first_step]
torch.manual_seed(0)
model = Transformer(TransformerConfig(n_layers=1, seq_len=16)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=0.1, betas=(0.9, 0.95), weight_decay=0.1)
x, y = get_batch(data, 8, 16, torch.Generator().manual_seed(0))
before = parameters_to_vector(model.parameters()).detach()
std_before = model.blocks[0].attn.qkv.weight.std().item()
F.cross_entropy(model(x.to(device)).flatten(0, 1), y.to(device).flatten()).backward()
opt.step()
step_size = (parameters_to_vector(model.parameters()) - before).abs().detach().cpu()
at_lr = ((step_size / 0.1 - 1).abs() < 0.01).float().mean().item()
std_after = model.blocks[0].attn.qkv.weight.std().item()
print(f"weights that moved by lr (within 1%) on step 1: {at_lr:.1%}")
print(f"attention weights' std: {std_before:.4f} at init, {std_after:.4f} after one step")
# --8<-- [end:first_step]


# --8<-- [start:groups]
def adamw_groups(model, lr, width_mult=1.0):
    hidden, embeddings, gains = [], [], []
    for name, p in model.named_parameters():
        if p.dim() < 2:
            gains.append(p)
        elif name.startswith("blocks."):
            hidden.append(p)
        else:
            embeddings.append(p)
    return [
        dict(params=hidden, lr=lr / width_mult, weight_decay=0.1 * width_mult),
        dict(params=embeddings, lr=lr, weight_decay=0.1),
        dict(params=gains, lr=lr, weight_decay=0.0),
    ]


def warmup_cosine(step, warmup, steps):
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))


split = int(0.9 * len(data))
train_data, val_data = data[:split], data[split:]
val_windows = val_data[torch.arange(0, len(val_data) - 64, 64)[:, None] + torch.arange(65)]


def val_loss(model, width_mult=1.0):
    with torch.no_grad():
        v = val_windows.to(device)
        logits = model(v[:, :-1]) / width_mult
        return F.cross_entropy(logits.flatten(0, 1), v[:, 1:].flatten()).item()


# --8<-- [end:groups]


# --8<-- [start:train]
def train(lr, seed, steps=300, warmup=10, z_loss=0.0, width=64, mup=False, **switches):
    torch.manual_seed(seed)
    cfg = TransformerConfig(hidden=width, n_heads=width // 16, n_layers=2, seq_len=64, **switches)
    model = Transformer(cfg).to(device)
    mult = width / 64 if mup else 1.0
    groups = adamw_groups(model, lr, mult)
    with torch.no_grad():
        for p in groups[0]["params"]:
            p.mul_(mult**-0.5)
    opt = torch.optim.AdamW(groups, betas=(0.9, 0.95))
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine(s, warmup, steps))
    batches, log = torch.Generator().manual_seed(seed), []
    for _ in range(steps):
        x, y = get_batch(train_data, 16, 64, batches)
        loss, ce, log_z = lm_loss(model(x.to(device)) / mult, y.to(device), z_loss)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
        max_logit = torch.stack([block.attn.max_logit for block in model.blocks]).max()
        log.append(torch.stack([ce.detach(), max_logit, log_z.detach()]))
    log = dict(zip(["loss", "max_logit", "log_z"], torch.stack(log).T.cpu()))
    return log | {"val": val_loss(model, mult)}


# --8<-- [end:train]

# --8<-- [start:first_losses]
log = train(1e-3, seed=0, steps=5)
print("first 5 losses:", " ".join(f"{x:.4f}" for x in log["loss"].tolist()))
# --8<-- [end:first_losses]


# --8<-- [start:reference]
torch.manual_seed(0)
ref_model = Transformer(TransformerConfig(n_layers=1, seq_len=16, qk_norm=True)).to(device)
ref_model(get_batch(data, 2, 16, torch.Generator().manual_seed(1))[0].to(device))
print(ref_model.blocks[0].attn)
print(f"largest logit {ref_model.blocks[0].attn.max_logit:.3f}")
# --8<-- [end:reference]
