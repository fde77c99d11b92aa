# --8<-- [start:setup]
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
model = model.to(device)
x, y = torch.randn(64, 32, device=device), 3 * torch.randn(64, 1, device=device)
# --8<-- [end:setup]

# --8<-- [start:step]
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
warmup = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 100))
scaler = torch.amp.GradScaler(device)
accum_steps = 4
for xb, yb in zip(x.chunk(accum_steps), y.chunk(accum_steps)):
    with torch.autocast(device, dtype=torch.float16):
        loss = F.mse_loss(checkpoint(model, xb, use_reentrant=False), yb) / accum_steps
    scaler.scale(loss).backward()
scaler.unscale_(opt)
norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
scaler.step(opt)
scaler.update()
warmup.step()
opt.zero_grad(set_to_none=True)
print(f"norm {norm:.3f}, loss scale {scaler.get_scale():g}, next lr {warmup.get_last_lr()[0]:.1e}")
# --8<-- [end:step]

# --8<-- [start:transformer]
q, k, v = (100 * torch.randn(1, 2, 8, 16, device=device) for _ in range(3))
q_norm, k_norm = torch.nn.LayerNorm(16).to(device), torch.nn.LayerNorm(16).to(device)
attn = F.scaled_dot_product_attention(q_norm(q), k_norm(k), v, is_causal=True)
logits, targets = torch.randn(32, 256, device=device), torch.randint(256, (32,), device=device)
loss = F.cross_entropy(logits, targets) + 1e-4 * logits.logsumexp(dim=-1).square().mean()
print(f"attention output {tuple(attn.shape)}; loss with z-loss {loss:.4f}")
# --8<-- [end:transformer]
