# --8<-- [start:imports]
import copy

import torch
import torch.nn.functional as F

from gradflow_ref.transformer import Transformer, TransformerConfig, get_batch, shakespeare

device = "cuda" if torch.cuda.is_available() else "cpu"
data = shakespeare()
# --8<-- [end:imports]

# --8<-- [start:plain]
torch.manual_seed(0)
model = Transformer(TransformerConfig(seq_len=16)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
warmup = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 5))
gen = torch.Generator().manual_seed(0)
log = []
for _ in range(10):
    x, y = (t.to(device) for t in get_batch(data, 8, 16, gen))
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    layers = {name: p.grad.norm().item() for name, p in model.named_parameters()}
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0).item()
    before = [p.detach().clone() for p in model.parameters()]
    opt.step()
    warmup.step()
    moved = sum((p.detach() - b).square().sum() for p, b in zip(model.parameters(), before))
    ratio = (moved / sum(b.square().sum() for b in before)).sqrt().item()
    log.append({"loss": loss.item(), "norm": norm, "ratio": ratio, "layers": layers})
for key in ("loss", "norm", "ratio"):
    print(f"{key}: step 1 {log[0][key]:.4f}, step {len(log)} {log[-1][key]:.4f}")
print(f"clipped steps: {sum(r['norm'] > 1.0 for r in log)} of {len(log)}")
# --8<-- [end:plain]

# --8<-- [start:layers]
last = log[-1]["layers"]
for name in sorted(last, key=last.get, reverse=True)[:4]:
    print(f"{name:24s} {last[name]:.4f}")
# --8<-- [end:layers]

# --8<-- [start:monitor]
import gradflow_ref.diagnosis as ref

torch.manual_seed(0)
model = Transformer(TransformerConfig(seq_len=16)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
mon = ref.Monitor(model, max_norm=1.0)
gen = torch.Generator().manual_seed(0)
for _ in range(4):
    x, y = (t.to(device) for t in get_batch(data, 8, 16, gen))
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    mon.grads(loss)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    opt.step()
    record = mon.step()
print(
    f"step {record.step + 1}: loss {record.loss:.3f}, grad norm {record.grad_norm:.3f}, "
    f"clipped {record.clipped}, skipped {record.skipped}, scale {record.loss_scale:g}"
)
# --8<-- [end:monitor]


# --8<-- [start:fp16]
def fp16_steps(scaler, loss_scale=2.0**18, steps=4):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(seq_len=16)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    mon = ref.Monitor(model, max_norm=1.0, scaler=scaler)
    gen = torch.Generator().manual_seed(0)
    for step in range(steps):
        opt.param_groups[0]["lr"] = 1e-2 * min(1.0, (step + 1) / 5)
        x, y = (t.to(device) for t in get_batch(data, 8, 16, gen))
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
        mon.grads(loss, scale=loss_scale if scaler is None else None)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step() if scaler is None else (scaler.step(opt), scaler.update())
        mon.step()
    return mon.records


# --8<-- [end:fp16]

# --8<-- [start:fp16_compare]
static = fp16_steps(scaler=None)
dynamic = fp16_steps(scaler=torch.amp.GradScaler(device, init_scale=2.0**18))
for name, records in (("fixed scale", static), ("GradScaler", dynamic)):
    print(f"{name:12s} losses {[round(r.loss, 3) for r in records]}")
    print(f"{'':12s} scales {[r.loss_scale for r in records]}")
first = next(r for r in static if r.nonfinite_grad)
print(f"step {first.step + 1}: first inf/NaN gradient in {first.nonfinite_grad}")
print(f"step {first.step + 2}: first inf/NaN output of {static[first.step + 1].nonfinite_forward}")
# --8<-- [end:fp16_compare]


# --8<-- [start:rollback]
def guarded_run(lr, steps=12, spike=1.5):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(seq_len=16)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    gen, best, cut, events = torch.Generator().manual_seed(0), float("inf"), 1.0, []
    for step in range(steps):
        if step % 5 == 0:
            saved = copy.deepcopy({"model": model.state_dict(), "opt": opt.state_dict()})
        opt.param_groups[0]["lr"] = lr * cut * min(1.0, (step + 1) / 8)
        x, y = (t.to(device) for t in get_batch(data, 8, 16, gen))
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        if not loss.item() <= spike * best:
            model.load_state_dict(saved["model"])
            opt.load_state_dict(saved["opt"])
            cut = cut / 10
            events.append(f"step {step + 1}: loss {loss.item():.2f}, rolled back, lr / 10")
            continue
        best = min(best, loss.item())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
    return loss.item(), events


# --8<-- [end:rollback]


# --8<-- [start:rollback_run]
final, events = guarded_run(lr=1.0)
print(*events, sep="\n")
print(f"loss at the last step {final:.3f}")
# --8<-- [end:rollback_run]

# --8<-- [start:divisor]
torch.manual_seed(0)
model = Transformer(TransformerConfig(seq_len=16)).to(device)
micro = [tuple(t.to(device) for t in get_batch(data, 2, 16, gen)) for _ in range(4)]
norms = {}
for divisor in (len(micro), 1):
    model.zero_grad(set_to_none=True)
    for x, y in micro:
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        (loss / divisor).backward()
    norms[divisor] = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]).item()
print(f"grad norm with the divisor {norms[4]:.4f}, without {norms[1]:.4f}")
# --8<-- [end:divisor]
