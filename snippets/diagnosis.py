# --8<-- [start:imports]
import copy
import math
import statistics
from collections import deque

import torch
import torch.nn.functional as F

from gradflow_ref.transformer import Transformer, TransformerConfig, get_batch, shakespeare

device = "cuda" if torch.cuda.is_available() else "cpu"
data = shakespeare()
train_data, held_out = data[: int(0.9 * len(data))], data[int(0.9 * len(data)) :]
windows = torch.arange(0, len(held_out) - 64, 64)[:, None] + torch.arange(65)
val = held_out[windows].to(device)
# --8<-- [end:imports]


# --8<-- [start:train]
def lr_factor(step, warmup, steps):
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup)))


def train(
    seed, lr=3e-3, steps=300, warmup=10, qk_norm=False, accum=1, divide=True, corrupt=(), guard=None
):
    torch.manual_seed(seed)
    cfg = TransformerConfig(hidden=64, n_heads=4, seq_len=64, qk_norm=qk_norm)
    model = Transformer(cfg).to(device)
    names, params = zip(*model.named_parameters())
    groups = [
        {"params": [p for p in params if p.dim() == 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))
    skip_spikes = SkipSpikes() if guard == "skip" else None
    rollback = Rollback(model, opt) if guard == "rollback" else None
    batches, peak = torch.Generator().manual_seed(seed), lr
    log = {key: [] for key in ("loss", "norm", "logit", "skipped", "layers", "ratio")}
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = peak * lr_factor(step, warmup, steps)
        opt.zero_grad(set_to_none=True)
        loss = torch.zeros((), device=device)
        for _ in range(accum):
            x, y = (t.to(device) for t in get_batch(train_data, 16 // accum, 64, batches))
            if step in corrupt:
                y = torch.zeros_like(y)
            micro = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            (micro / accum if divide else micro).backward()
            loss += micro.detach() / accum
        norms = torch.stack(torch._foreach_norm([p.grad for p in params]))
        norm = torch.linalg.vector_norm(norms)
        torch.nn.utils.clip_grads_with_norm_(params, max_norm=1.0, total_norm=norm)
        skip = skip_spikes is not None and skip_spikes(loss.item())
        if rollback is not None and rollback(step, loss.item()):
            peak, skip = peak / 10, True
        before = [p.detach().clone() for p in params] if step % 10 == 0 else None
        if not skip:
            opt.step()
        if before is not None:
            moved = torch.stack([(p.detach() - b).norm() for p, b in zip(params, before)])
            log["ratio"].append(moved.norm() / torch.stack([b.norm() for b in before]).norm())
            log["layers"].append(norms)
        log["loss"].append(loss)
        log["norm"].append(norm)
        log["logit"].append(torch.stack([block.attn.max_logit for block in model.blocks]).max())
        log["skipped"].append(skip)
    with torch.no_grad():
        val_loss = F.cross_entropy(model(val[:, :-1]).flatten(0, 1), val[:, 1:].flatten())
    out = {key: torch.stack(log[key]).cpu() for key in ("loss", "norm", "logit", "ratio")}
    layers = dict(zip(names, torch.stack(log["layers"]).cpu().T))
    return out | {"skipped": torch.tensor(log["skipped"]), "layers": layers, "val": val_loss.item()}


# --8<-- [end:train]

# --8<-- [start:plain]
log = train(0, steps=20)
for key in ("loss", "norm", "logit"):
    print(f"{key:5s} step 1 {log[key][0]:.3f}, step 20 {log[key][-1]:.3f}")
print(f"clipped steps {int((log['norm'] > 1.0).sum())} of 20")
print(f"update / weight, steps 1 and 11: {log['ratio'][0]:.4f}, {log['ratio'][1]:.4f}")
# --8<-- [end:plain]

# --8<-- [start:layers]
last = {name: norms[-1].item() for name, norms in log["layers"].items()}
for name in sorted(last, key=last.get, reverse=True)[:4]:
    print(f"{name:26s} {last[name]:.4f}")
# --8<-- [end:layers]


# --8<-- [start:hooks]
def watch_nonfinite(model):
    flags = []
    for name, module in model.named_modules():

        def on_output(module, args, out, name=name or "model"):
            if torch.is_tensor(out) and out.is_floating_point():
                flags.append((f"output of {name}", ~torch.isfinite(out).all()))

        module.register_forward_hook(on_output)
    for name, p in model.named_parameters():

        def on_grad(p, name=name):
            flags.append((f"gradient of {name}", ~torch.isfinite(p.grad).all()))

        p.register_post_accumulate_grad_hook(on_grad)
    return flags


def first_nonfinite(flags):
    bad = torch.stack([flag for _, flag in flags]).cpu()
    return next((name for (name, _), b in zip(flags, bad) if b), None)


# --8<-- [end:hooks]


# --8<-- [start:fp16]
def fp16_steps(scaler, steps=3, loss_scale=2.0**18):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(hidden=64, n_heads=4, seq_len=64)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95))
    flags, batches, out = watch_nonfinite(model), torch.Generator().manual_seed(0), []
    for _ in range(steps):
        flags.clear()
        x, y = (t.to(device) for t in get_batch(train_data, 16, 64, batches))
        with torch.autocast(device, dtype=torch.float16):
            loss = F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
        opt.zero_grad(set_to_none=True)
        if scaler is None:
            (loss * loss_scale).backward()
            for p in model.parameters():
                p.grad /= loss_scale
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scale = loss_scale if scaler is None else scaler.get_scale()
        first = first_nonfinite(flags) if not torch.isfinite(norm) else None
        opt.step() if scaler is None else (scaler.step(opt), scaler.update())
        out.append((loss.item(), scale, first))
    return out


# --8<-- [end:fp16]

# --8<-- [start:fp16_run]
static = fp16_steps(scaler=None)
dynamic = fp16_steps(scaler=torch.amp.GradScaler(device, init_scale=2.0**18))
for name, rows in (("fixed", static), ("GradScaler", dynamic)):
    for step, (loss, scale, first) in enumerate(rows, 1):
        print(f"{name:10s} step {step}: loss {loss:.3f}, scale {scale:g}, first inf/NaN: {first}")
# --8<-- [end:fp16_run]


# --8<-- [start:monitor]
import gradflow_ref.diagnosis as ref

torch.manual_seed(0)
model = Transformer(TransformerConfig(hidden=64, n_heads=4, seq_len=64)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95))
mon, batches = ref.Monitor(model, max_norm=1.0), torch.Generator().manual_seed(0)
for _ in range(3):
    x, y = (t.to(device) for t in get_batch(train_data, 16, 64, batches))
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    mon.grads(loss)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    opt.step()
    record = mon.step()
print(f"step {record.step + 1}: loss {record.loss:.3f}, grad norm {record.grad_norm:.3f}")
print(f"clipped {record.clipped}, layers {len(record.layer_norms)}, skipped {record.skipped}")
# --8<-- [end:monitor]


# --8<-- [start:skip]
class SkipSpikes:
    def __init__(self, factor=1.5, window=50):
        self.factor, self.kept = factor, deque(maxlen=window)

    def __call__(self, loss):
        full = len(self.kept) == self.kept.maxlen
        spike = full and not loss <= self.factor * statistics.median(self.kept)
        if not spike:
            self.kept.append(loss)
        return spike


# --8<-- [end:skip]


# --8<-- [start:rollback]
class Rollback:
    def __init__(self, model, opt, every=50, factor=1.5):
        self.model, self.opt, self.every, self.factor = model, opt, every, factor
        self.best = math.inf

    def __call__(self, step, loss):
        if step % self.every == 0:
            self.saved = copy.deepcopy((self.model.state_dict(), self.opt.state_dict()))
            self.saved_best = self.best
        if loss <= self.factor * self.best:
            self.best = min(self.best, loss)
            return False
        self.model.load_state_dict(self.saved[0])
        self.opt.load_state_dict(copy.deepcopy(self.saved[1]))
        self.best = self.saved_best
        return True


# --8<-- [end:rollback]
