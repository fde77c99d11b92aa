# --8<-- [start:imports]
import torch
from torch import nn
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from torch.utils.checkpoint import checkpoint_sequential

from gradflow_ref.checkpointing import SavedTensorMeter, count_forwards
from gradflow_ref.hardware import gpu
from gradflow_ref.memory import GPT, MemoryConfig, training_memory
from gradflow_ref.pipeline import PipelineConfig, Trainer

device = "cuda" if torch.cuda.is_available() else "cpu"
gen = torch.Generator().manual_seed(0)
teacher = torch.randn(16, 4, generator=gen)


def make_model():
    torch.manual_seed(0)
    widths = [16, 64, 64, 64]
    layers = [m for a, b in zip(widths, widths[1:]) for m in (nn.Linear(a, b), nn.GELU())]
    return nn.Sequential(*layers, nn.Linear(64, 4)).to(device)


def make_batch(rows=64):
    x = torch.randn(rows, 16, generator=gen)
    return x.to(device), (x @ teacher).argmax(-1).to(device)


# --8<-- [end:imports]

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
assert cast_back and zeroed and not report.skipped and report.grad_norm < cfg.max_norm
# --8<-- [end:one_step]

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

# --8<-- [start:plain_check]
gen.manual_seed(5)
ref_cfg = PipelineConfig(lr, min_lr, warmup, total, max_norm=max_norm, dtype=dtype)
ref_cfg.segments = segments
reference = Trainer(make_model(), ref_cfg)
for _ in range(steps):
    reference.step([make_batch() for _ in range(accum)])
gap = max((p - m).abs().max().item() for p, m in zip(model.parameters(), reference.master.params))
tolerance = 1e-6
print(f"largest difference from Trainer's FP32 master weights: {gap:.1e}")
assert gap <= tolerance
# --8<-- [end:plain_check]


# --8<-- [start:ordering_bugs]
bug_steps, bug_micro, bug_clip, bug_scale = 4, 3, 0.1, 2.0**20


def run_steps(bug, dtype):
    gen.manual_seed(3)
    cfg = PipelineConfig(1e-2, 1e-3, 2, 8, max_norm=bug_clip, dtype=dtype, segments=3, bug=bug)
    cfg.init_scale = bug_scale
    trainer = Trainer(make_model(), cfg)
    batches = [[make_batch(16) for _ in range(bug_micro)] for _ in range(bug_steps)]
    return trainer, [trainer.step(micro) for micro in batches]


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
assert all(reps[0].skipped == (bugs[bug] == f16) for bug in bugs for reps in bug_runs[bug])
assert all(r.skipped or r.grad_norm > bug_clip for r in bug_runs["clip_scaled"][1])
# --8<-- [end:ordering_bugs]

# --8<-- [start:memory_7b]
GB = 1e9
shape = dict(n_params=7_000_000_000, n_layers=32, hidden=4096, n_heads=32, seq_len=4096)
shape |= dict(micro_batch=1, vocab=32000, dropout=False, stores_scores=False)
trainer_layout = dict(grad_dtype=torch.float32)
mixed = training_memory(MemoryConfig(**shape, **trainer_layout))
ckpt = training_memory(MemoryConfig(**shape, **trainer_layout, checkpointing="full"))
rows = {
    "model weights, BF16": mixed.weights,
    "master weights, FP32": mixed.master_weights,
    "gradients, FP32": mixed.gradients,
    "AdamW m and v, FP32": mixed.optimizer_states,
    "activations, no checkpointing": mixed.activations,
    "activations, full checkpointing": ckpt.activations,
}
for name, nbytes in rows.items():
    print(f"{name:<32} {nbytes / GB:6.1f} GB")
state = mixed.total - mixed.activations
h100 = gpu("H100 SXM").memory_bytes
print(f"state {state / GB:.0f} GB = {state // shape['n_params']} bytes per parameter")
print(f"with checkpointing {ckpt.total / GB:.1f} GB; fits one H100 SXM: {ckpt.total <= h100}")
bf16_grads = training_memory(MemoryConfig(**shape, grad_dtype=torch.bfloat16))
alt_state = bf16_grads.total - bf16_grads.activations
print(f"alternative, BF16 gradients: {alt_state // shape['n_params']} bytes per parameter")
assert state == 18 * shape["n_params"] and alt_state == 16 * shape["n_params"]
assert state > h100 and ckpt.total > h100
# --8<-- [end:memory_7b]

# --8<-- [start:validation]
mask_bytes = 1 if device == "cuda" else 2
small = MemoryConfig(2, 64, 4, seq_len=32, micro_batch=2, vocab=96, mask_bytes=mask_bytes)
torch.manual_seed(0)
gpt = GPT(small).to(device, torch.bfloat16)
idx = torch.randint(0, small.vocab, (small.micro_batch, small.seq_len), generator=gen)
idx = idx.to(device)
with SavedTensorMeter() as meter:
    gpt(idx, idx).backward()
predicted = training_memory(small)
weights = sum(p.numel() * p.element_size() for p in gpt.parameters())
grads = sum(p.grad.numel() * p.grad.element_size() for p in gpt.parameters())
print(f"weights    : {weights} bytes counted, {predicted.weights} predicted")
print(f"gradients  : {grads} bytes counted, {predicted.gradients} predicted")
print(
    f"activations: {meter.bytes} bytes saved for backward, {predicted.activations} predicted "
    f"({meter.bytes / predicted.activations - 1:+.2%})"
)
assert weights == predicted.weights and grads == predicted.gradients
assert abs(meter.bytes / predicted.activations - 1) < 0.01
# --8<-- [end:validation]

# --8<-- [start:sharding]
from gradflow_ref.sharding import sharded_memory

thirteen = dict(shape, n_params=13_000_000_000, n_layers=40, hidden=5120, n_heads=40)
models = {"7B": shape, "13B": thirteen}
models = {k: MemoryConfig(**s, **trainer_layout, checkpointing="full") for k, s in models.items()}
n_gpus, per_gpu = 8, {}
for name, model_cfg in models.items():
    per_gpu[name] = [sharded_memory(model_cfg, n_gpus, stage).total for stage in range(4)]
    cells = "  ".join(f"stage {s}: {b / GB:5.1f}" for s, b in enumerate(per_gpu[name]))
    print(f"{name:>3} on {n_gpus} GPUs, GB per GPU, {cells}")
fits_13b = [b <= h100 for b in per_gpu["13B"]]
assert fits_13b == [False, False, True, True]
# --8<-- [end:sharding]

# --8<-- [start:fsdp2]
from gradflow_ref.sharding import measure_fsdp2, predict_fsdp2

tiny = MemoryConfig(n_layers=2, hidden=64, n_heads=4, seq_len=16, vocab=101)
n_ranks = 2
ranks = measure_fsdp2(tiny, n_ranks=n_ranks)
shapes = [tuple(p.shape) for p in GPT(tiny).parameters()]
expected = [predict_fsdp2(shapes, n_ranks, rank) for rank in range(n_ranks)]
for rank, got in enumerate(ranks):
    print(
        f"rank {rank}: parameters {got.parameters:,} B, gradients {got.gradients:,} B, "
        f"AdamW states {got.optimizer_states:,} B"
    )
assert ranks == expected
# --8<-- [end:fsdp2]

# --8<-- [start:breaks_memory]
fp32_layout = dict(param_dtype=torch.float32, master_dtype=None, grad_dtype=torch.float32)
fp32 = training_memory(MemoryConfig(**shape, **fp32_layout, activation_dtype=torch.float32))
fp32_state = fp32.total - fp32.activations
gpt3 = MemoryConfig(n_layers=96, hidden=12288, n_heads=96, seq_len=2048, vocab=50257)
big_batch = MemoryConfig(**shape | {"micro_batch": 256}, checkpointing="full")
w16 = (0.02 * torch.randn(100_000, generator=gen)).to(device, torch.bfloat16)
lost = {u: (w16 + u == w16).float().mean().item() for u in (1e-7, 1e-5)}
print(f"FP32: state {fp32_state / GB:.0f} GB, activations {fp32.activations / GB:.1f} GB")
print(f"GPT-3 shape, one sequence: {training_memory(gpt3).activations / GB:.0f} GB of activations")
big_acts = training_memory(big_batch).activations
print(f"7B, {big_batch.micro_batch} sequences at once: {big_acts / GB:.0f} GB of activations")
print(f"BF16 weights ignore {lost[1e-7]:.1%} of 1e-7 updates and {lost[1e-5]:.1%} of 1e-5")
assert lost[1e-7] > 0.99 and big_acts > state
# --8<-- [end:breaks_memory]


# --8<-- [start:breaks_training]
def train(cfg, steps, spike_at=None):
    trainer, losses = Trainer(make_model(), cfg), []
    for step in range(steps):
        x, y = make_batch()
        losses.append(trainer.step([(x * spike if step == spike_at else x, y)]).loss)
    return losses


flat = dict(lr=1e-3, min_lr=1e-3, warmup_steps=1, total_steps=2)
clip_steps, spike_at, spike, sched_steps, last = 30, 10, 100, 40, 10
gen.manual_seed(1)
clipped = train(PipelineConfig(**flat), clip_steps, spike_at)
gen.manual_seed(1)
unclipped = train(PipelineConfig(**flat, max_norm=1e9), clip_steps, spike_at)
gen.manual_seed(2)
scheduled = train(PipelineConfig(3e-2, 3e-4, warmup_steps=5, total_steps=sched_steps), sched_steps)
gen.manual_seed(2)
constant = train(PipelineConfig(3e-2, 3e-2, warmup_steps=1, total_steps=2), sched_steps)
tail = {k: sum(v[-last:]) / last for k, v in (("scheduled", scheduled), ("constant", constant))}
print(f"final loss after one bad batch: clipped {clipped[-1]:.3f}, unclipped {unclipped[-1]:.3f}")
print(f"mean of the last {last} losses: " + ", ".join(f"{k} {v:.3f}" for k, v in tail.items()))
assert unclipped[-1] > clipped[-1] and tail["scheduled"] < tail["constant"]
# --8<-- [end:breaks_training]
