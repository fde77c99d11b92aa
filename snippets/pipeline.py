# --8<-- [start:imports]
import torch
from torch import nn
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from torch.utils.checkpoint import checkpoint_sequential

from gradflow_ref.checkpointing import count_forwards
from gradflow_ref.memory import MemoryConfig, training_memory
from gradflow_ref.pipeline import PipelineConfig, StepReport, Trainer

device = "cuda" if torch.cuda.is_available() else "cpu"
gen = torch.Generator().manual_seed(0)
teacher = torch.randn(16, 4, generator=gen)


def make_model(seed=0):
    torch.manual_seed(seed)
    widths = [16, 64, 64, 64]
    layers = [m for a, b in zip(widths, widths[1:]) for m in (nn.Linear(a, b), nn.GELU())]
    return nn.Sequential(*layers, nn.Linear(64, 4)).to(device)


def make_batch(rows=64):
    x = torch.randn(rows, 16, generator=gen)
    return x.to(device), (x @ teacher).argmax(-1).to(device)


# --8<-- [end:imports]

# --8<-- [start:plain_loop]
dtype, steps, accum, segments = torch.bfloat16, 12, 4, 3
lr, min_lr, warmup, total, max_norm = 1e-3, 1e-4, 10, 100, 1.0
gen.manual_seed(5)
model = make_model()
opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
ramp = LinearLR(opt, 1 / warmup, total_iters=warmup - 1)
decay = CosineAnnealingLR(opt, T_max=total - warmup, eta_min=min_lr)
schedule = SequentialLR(opt, [ramp, decay], milestones=[warmup])
scaler = torch.amp.GradScaler(device, enabled=dtype == torch.float16)
for _ in range(steps):
    for x, y in [make_batch() for _ in range(accum)]:
        with torch.autocast(device, dtype=dtype):
            logits = checkpoint_sequential(model, segments, x, use_reentrant=False)
        scaler.scale(nn.functional.cross_entropy(logits.float(), y) / accum).backward()
    scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scale = scaler.get_scale()
    scaler.step(opt)
    scaler.update()
    if scaler.get_scale() >= scale:
        schedule.step()
    opt.zero_grad(set_to_none=True)
print(f"after {steps} steps: gradient norm {norm:.3f}, next lr {schedule.get_last_lr()[0]:.2e}")
# --8<-- [end:plain_loop]

# --8<-- [start:one_step]
cfg = PipelineConfig(lr=1e-3, min_lr=1e-4, warmup_steps=10, total_steps=100, segments=3)
trainer = Trainer(make_model(), cfg)
micro_batches = [make_batch() for _ in range(4)]
before = [m.detach().clone() for m in trainer.master.params]
with count_forwards(list(trainer.model)) as counter:
    report = trainer.step(micro_batches)
layers = len(trainer.model)
recomputed = counter.count - len(micro_batches) * layers
moved = max((m - b).abs().max().item() for m, b in zip(trainer.master.params, before))
pairs = list(zip(trainer.model.parameters(), trainer.master.params))
cast_back = all(torch.equal(p, m.to(cfg.dtype)) for p, m in pairs)
zeroed = all(p.grad is None and m.grad is None for p, m in pairs)
print(f"loss {report.loss:.4f}, gradient norm {report.grad_norm:.3f}, clip at {cfg.max_norm}")
print(f"lr {report.lr:.1e} this step, {trainer.schedule.get_last_lr()[0]:.1e} next")
print(f"{recomputed} layer forwards recomputed, masters moved by up to {moved:.2e}")
print(f"model == masters in {cfg.dtype}: {cast_back}; gradients freed: {zeroed}")
# --8<-- [end:one_step]

# --8<-- [start:plain_check]
gen.manual_seed(5)
ref_cfg = PipelineConfig(lr, min_lr, warmup, total, max_norm=max_norm, dtype=dtype)
ref_cfg.segments = segments
reference = Trainer(make_model(), ref_cfg)
for _ in range(steps):
    reference.step([make_batch() for _ in range(accum)])
gap = max((p - m).abs().max().item() for p, m in zip(model.parameters(), reference.master.params))
print(f"largest difference from Trainer's FP32 master weights: {gap:.1e}")
# --8<-- [end:plain_check]


# --8<-- [start:step_with_bug]
def step_with_bug(trainer, micro_batches, bug=None):
    params, opt, scaler = trainer.master.params, trainer.optimizer, trainer.scaler
    lr, loss, max_norm = opt.param_groups[0]["lr"], 0.0, trainer.cfg.max_norm
    for x, y in micro_batches:
        loss += trainer.accumulate(x, y, len(micro_batches))
        if bug == "clip_per_micro":
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    if bug == "clip_scaled":
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    scaler.unscale_(opt)
    if bug not in ("clip_scaled", "clip_per_micro"):
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    scale = scaler.get_scale()
    scaler.step(opt)
    scaler.update()
    skipped = scaler.get_scale() < scale
    if not skipped or bug == "schedule_on_skip":
        trainer.schedule.step()
    trainer.master.master_to_model()
    if bug != "no_zero":
        trainer.master.zero_grad()
    return StepReport(loss, float(norm), lr, skipped, scaler.get_scale())


# --8<-- [end:step_with_bug]

# --8<-- [start:ordering_bugs]
bug_steps, bug_micro, bug_clip, bug_scale = 4, 3, 0.1, 2.0**20


def run_steps(bug, dtype):
    gen.manual_seed(3)
    cfg = PipelineConfig(1e-2, 1e-3, 2, 8, max_norm=bug_clip, dtype=dtype, segments=3)
    cfg.init_scale = bug_scale
    trainer = Trainer(make_model(), cfg)
    batches = [[make_batch(16) for _ in range(bug_micro)] for _ in range(bug_steps)]
    return trainer, [step_with_bug(trainer, micro, bug) for micro in batches]


f16, b16 = torch.float16, torch.bfloat16
bugs = {"clip_scaled": f16, "clip_per_micro": b16, "schedule_on_skip": f16, "no_zero": b16}
bug_runs, gaps = {}, {}
for bug, dtype in bugs.items():
    good, good_reports = run_steps(None, dtype)
    bad, bad_reports = run_steps(bug, dtype)
    bug_runs[bug] = (good_reports, bad_reports)
    pairs = zip(good.master.params, bad.master.params)
    gaps[bug] = max((a - b).abs().max().item() for a, b in pairs)
    print(f"{bug:<17} {dtype}: masters off by up to {gaps[bug]:.1e}")
assert all(gap > 0 for gap in gaps.values())
# --8<-- [end:ordering_bugs]

# --8<-- [start:breaks_memory]
GB = 1e9
shape = dict(n_params=7_000_000_000, n_layers=32, hidden=4096, n_heads=32, seq_len=4096)
shape |= dict(micro_batch=1, vocab=32000, dropout=False, stores_scores=False)
mixed = training_memory(MemoryConfig(**shape))
ckpt = training_memory(MemoryConfig(**shape, checkpointing="full"))
big_batch = MemoryConfig(**shape | {"micro_batch": 256}, checkpointing="full")
big_acts = training_memory(big_batch).activations
w16 = (0.02 * torch.randn(100_000, generator=gen)).to(device, torch.bfloat16)
lost = {u: (w16 + u == w16).float().mean().item() for u in (1e-7, 1e-5)}
print(f"7B activations: {mixed.activations / GB:.1f} GB")
print(f"every layer checkpointed: {ckpt.activations / GB:.1f} GB")
print(f"7B, {big_batch.micro_batch} sequences at once: {big_acts / GB:.0f} GB of activations")
print(f"BF16 weights ignore {lost[1e-7]:.1%} of 1e-7 updates and {lost[1e-5]:.1%} of 1e-5")
# --8<-- [end:breaks_memory]


# --8<-- [start:breaks_training]
def mean_late_loss(cfg, steps, seed, last=10):
    gen.manual_seed(seed)
    trainer = Trainer(make_model(seed), cfg)
    losses = [trainer.step([make_batch()]).loss for _ in range(steps)]
    return sum(losses[-last:]) / last


sched_steps, last, seeds = 40, 10, (1, 2, 3, 4, 5)
runs = {
    "scheduled": [
        mean_late_loss(PipelineConfig(3e-2, 3e-4, 5, sched_steps), sched_steps, s) for s in seeds
    ],
    "constant": [mean_late_loss(PipelineConfig(3e-2, 3e-2, 1, 2), sched_steps, s) for s in seeds],
}
for name, values in runs.items():
    print(f"{name:<9}: mean of the last {last} losses " + ", ".join(f"{v:.3f}" for v in values))
gains = [c - s for s, c in zip(runs["scheduled"], runs["constant"])]
print("constant minus scheduled, seed by seed: " + ", ".join(f"{g:+.3f}" for g in gains))
assert min(gains) > 0
# --8<-- [end:breaks_training]
