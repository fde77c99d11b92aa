# --8<-- [start:imports]
import json
from pathlib import Path

import torch
from torch import nn

import gradflow_ref
from gradflow_ref.checkpointing import SavedTensorMeter, count_forwards
from gradflow_ref.memory import GPT, MemoryConfig, training_memory
from gradflow_ref.pipeline import PipelineConfig, Trainer

GB = 1e9
gen = torch.Generator().manual_seed(0)
teacher = torch.randn(16, 4, generator=gen)


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(16, 64),
        nn.GELU(),
        nn.Linear(64, 64),
        nn.GELU(),
        nn.Linear(64, 64),
        nn.GELU(),
        nn.Linear(64, 4),
    )


def make_batch(rows=64):
    x = torch.randn(rows, 16, generator=gen)
    return x, (x @ teacher).argmax(-1)


# --8<-- [end:imports]

# --8<-- [start:one_step]
cfg = PipelineConfig(
    lr=1e-3, min_lr=1e-4, warmup_steps=10, total_steps=100, max_norm=1.0, segments=3
)
trainer = Trainer(make_model(), cfg)
micro_batches = [make_batch() for _ in range(4)]
before = [m.detach().clone() for m in trainer.master.params]
with count_forwards(list(trainer.model)) as counter:
    report = trainer.step(micro_batches)
layers = len(trainer.model)
with torch.no_grad():
    logits = trainer.model(micro_batches[0][0].to(cfg.dtype))
moved = max((m - b).abs().max().item() for m, b in zip(trainer.master.params, before))
cast_back = all(
    torch.equal(p, m.to(cfg.dtype))
    for p, m in zip(trainer.model.parameters(), trainer.master.params)
)
zeroed = all(p.grad is None for p in [*trainer.model.parameters(), *trainer.master.params])
print(
    f"1 forward   : weights and logits in {logits.dtype}, {cfg.segments} segments, "
    f"{counter.count - 4 * layers} layer forwards recomputed in backward"
)
print(f"2 loss      : float32, mean over 4 micro-batches = {report.loss:.4f}")
print(f"3 accumulate: gradients summed in {trainer.master.params[0].dtype} on the masters")
print(f"4 unscale   : loss scaling {'on' if trainer.scaler.is_enabled() else 'off (BF16)'}")
print(f"5 clip      : global norm {report.grad_norm:.3f} -> at most {cfg.max_norm}")
print(f"6 AdamW     : FP32 masters moved by up to {moved:.2e} at lr {report.lr:.1e}")
print(f"7 schedule  : next lr {trainer.schedule.get_last_lr()[0]:.1e}")
print(f"8 cast back : model == masters rounded to {cfg.dtype}: {cast_back}")
print(f"9 zero      : every gradient is None: {zeroed}")
assert cast_back and zeroed and not report.skipped
# --8<-- [end:one_step]


# --8<-- [start:ordering_bugs]
def run_steps(bug, dtype, steps=4):
    gen.manual_seed(3)
    cfg = PipelineConfig(
        lr=1e-2,
        min_lr=1e-3,
        warmup_steps=2,
        total_steps=8,
        max_norm=0.1,
        dtype=dtype,
        init_scale=2.0**20,
        segments=3,
        bug=bug,
    )
    trainer = Trainer(make_model(), cfg)
    reports = [trainer.step([make_batch(16) for _ in range(3)]) for _ in range(steps)]
    return trainer, reports


bug_runs = {}
for bug, dtype in (
    ("clip_scaled", torch.float16),
    ("clip_per_micro", torch.bfloat16),
    ("schedule_on_skip", torch.float16),
    ("no_zero", torch.bfloat16),
):
    good, good_reports = run_steps(None, dtype)
    bad, bad_reports = run_steps(bug, dtype)
    bug_runs[bug] = (good_reports, bad_reports)
    gap = max((a - b).abs().max().item() for a, b in zip(good.master.params, bad.master.params))
    detail = {
        "clip_scaled": f"the clip saw a norm of {bad_reports[-1].grad_norm:.3g}, "
        f"not {good_reports[-1].grad_norm:.3g}",
        "clip_per_micro": f"{len(good_reports) * 3} clips of partial sums instead of "
        f"{len(good_reports)}",
        "schedule_on_skip": f"{sum(r.skipped for r in bad_reports)} skipped steps, lr "
        f"{bad.schedule.get_last_lr()[0]:.2e} instead of "
        f"{good.schedule.get_last_lr()[0]:.2e}",
        "no_zero": f"last gradient norm {bad_reports[-1].grad_norm:.3f} instead of "
        f"{good_reports[-1].grad_norm:.3f}",
    }[bug]
    print(f"{bug:<17} {dtype}: masters off by up to {gap:.1e}; {detail}")
    assert gap > 0
# --8<-- [end:ordering_bugs]

# --8<-- [start:memory_7b]
shape = dict(
    n_params=7_000_000_000,
    n_layers=32,
    hidden=4096,
    n_heads=32,
    seq_len=4096,
    micro_batch=1,
    vocab=32000,
    dropout=False,
    stores_scores=False,
)
mixed = training_memory(MemoryConfig(**shape))
ckpt = training_memory(MemoryConfig(**shape, checkpointing="full"))
rows = [
    ("model weights", "BF16", mixed.weights),
    ("master weights", "FP32", mixed.master_weights),
    ("gradients", "BF16", mixed.gradients),
    ("AdamW m and v", "FP32", mixed.optimizer_states),
    ("activations, no checkpointing", "BF16", mixed.activations),
    ("activations, full checkpointing", "BF16", ckpt.activations),
]
for name, dtype, nbytes in rows:
    print(f"{name:<32} {dtype:>4} {nbytes / GB:6.1f} GB")
state = mixed.total - mixed.activations
print(
    f"{'state without activations':<32} {'':>4} {state / GB:6.1f} GB "
    f"= {state / shape['n_params']:.0f} bytes per parameter"
)
print(
    f"{'total with checkpointing':<32} {'':>4} {ckpt.total / GB:6.1f} GB "
    f"= {ckpt.total / 2**30:.1f} GiB"
)
pure = training_memory(MemoryConfig(**shape, master_dtype=None, state_dtype=torch.bfloat16))
pure_state = pure.total - pure.activations
print(
    f"pure BF16 (no master copy, BF16 AdamW states): {pure_state / shape['n_params']:.0f} "
    f"bytes per parameter; mixed precision needs {state / pure_state:.1f}x that"
)
assert state == 16 * shape["n_params"]
# --8<-- [end:memory_7b]

# --8<-- [start:validation]
small = MemoryConfig(
    n_layers=2, hidden=64, n_heads=4, seq_len=32, micro_batch=2, vocab=96, mask_bytes=2
)
torch.manual_seed(0)
gpt = GPT(small).to(torch.bfloat16)
idx = torch.randint(0, small.vocab, (small.micro_batch, small.seq_len), generator=gen)
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
from gradflow_ref.hardware import gpu
from gradflow_ref.sharding import sharded_memory

layout = dict(grad_dtype=torch.float32, checkpointing="full")
thirteen = dict(shape, n_params=13_000_000_000, n_layers=40, hidden=5120, n_heads=40)
n_gpus, h100 = 8, gpu("H100 SXM").memory_bytes
per_gpu = {}
for name, model in (("7B", shape), ("13B", thirteen)):
    cfg = MemoryConfig(**model, **layout)
    per_gpu[name] = [sharded_memory(cfg, n_gpus, stage).total for stage in range(4)]
    cells = "  ".join(f"stage {s}: {b / GB:5.1f}" for s, b in enumerate(per_gpu[name]))
    print(f"{name:>3} on {n_gpus} GPUs, GB per GPU, {cells}")
fits_13b = [b <= h100 for b in per_gpu["13B"]]
assert fits_13b == [False, False, True, True]
# --8<-- [end:sharding]

# --8<-- [start:fsdp2]
from gradflow_ref.memory import GPT
from gradflow_ref.sharding import measure_fsdp2, predict_fsdp2

tiny = MemoryConfig(n_layers=2, hidden=64, n_heads=4, seq_len=16, vocab=101)
ranks = measure_fsdp2(tiny, n_ranks=2)
shapes = [tuple(p.shape) for p in GPT(tiny).parameters()]
predicted = [predict_fsdp2(shapes, 2, rank) for rank in range(2)]
for rank, got in enumerate(ranks):
    print(
        f"rank {rank}: parameters {got.parameters:,} B, gradients {got.gradients:,} B, "
        f"AdamW states {got.optimizer_states:,} B"
    )
assert ranks == predicted
# --8<-- [end:fsdp2]

# --8<-- [start:what_breaks]
fp32 = training_memory(
    MemoryConfig(
        **shape,
        param_dtype=torch.float32,
        master_dtype=None,
        grad_dtype=torch.float32,
        activation_dtype=torch.float32,
    )
)
weights = (0.02 * torch.randn(100_000, generator=gen)).to(torch.bfloat16)
lost = {
    u: ((weights + u).to(torch.bfloat16) == weights).float().mean().item() for u in (1e-7, 1e-5)
}
gpt3 = MemoryConfig(n_layers=96, hidden=12288, n_heads=96, seq_len=2048, vocab=50257)
big_batch = MemoryConfig(**shape | {"micro_batch": 256}, checkpointing="full")


def train(cfg, steps, spike_at=None):
    trainer, losses = Trainer(make_model(), cfg), []
    for step in range(steps):
        x, y = make_batch()
        losses.append(trainer.step([(x * 100 if step == spike_at else x, y)]).loss)
    return losses


gen.manual_seed(1)
clipped = train(PipelineConfig(lr=1e-3, min_lr=1e-3, warmup_steps=1, total_steps=2), 30, 10)
gen.manual_seed(1)
unclipped = train(
    PipelineConfig(lr=1e-3, min_lr=1e-3, warmup_steps=1, total_steps=2, max_norm=1e9), 30, 10
)
gen.manual_seed(2)
scheduled = train(PipelineConfig(lr=3e-2, min_lr=3e-4, warmup_steps=5, total_steps=40), 40)
gen.manual_seed(2)
constant = train(PipelineConfig(lr=3e-2, min_lr=3e-2, warmup_steps=1, total_steps=2), 40)
rows = [
    (
        "mixed precision",
        f"state {(fp32.total - fp32.activations) / GB:.0f} GB either way; "
        f"activations {fp32.activations / GB:.1f} GB instead of {mixed.activations / GB:.1f} GB",
        "calculated",
    ),
    (
        "master weights",
        f"BF16 weights ignore {lost[1e-7]:.1%} of 1e-7 updates and "
        f"{lost[1e-5]:.1%} of 1e-5 updates",
        "measured",
    ),
    (
        "checkpointing",
        f"{mixed.activations / GB:.1f} GB of activations instead of "
        f"{ckpt.activations / GB:.1f} GB; a 96-layer GPT-3 at 2048 tokens: "
        f"{training_memory(gpt3).activations / GB:.0f} GB",
        "calculated",
    ),
    (
        "clipping",
        f"loss {unclipped[-1]:.3f} instead of {clipped[-1]:.3f} twenty steps after one bad batch",
        "measured",
    ),
    (
        "accumulation",
        f"{training_memory(big_batch).activations / GB:.0f} GB of activations "
        "for 256 x 4096 tokens in one pass",
        "calculated",
    ),
    (
        "LR schedule",
        f"mean loss of the last 10 steps {sum(constant[-10:]) / 10:.3f} "
        f"instead of {sum(scheduled[-10:]) / 10:.3f}",
        "measured",
    ),
]
print("| Without | What happens | How we know |\n|:--|:--|:--|")
for row in rows:
    print("| " + " | ".join(row) + " |")
assert lost[1e-7] > 0.99 and unclipped[-1] > clipped[-1]
# --8<-- [end:what_breaks]

# --8<-- [start:gpu_table]
results = Path(gradflow_ref.__file__).resolve().parents[1] / "results"
runs = [json.loads(p.read_text()) for p in sorted(results.glob("bench-*.json"))]
gpu_runs = [r for r in runs if r["device_type"] == "cuda"]
for run in gpu_runs:
    step, prec = run["pipeline"], run["precision"]
    print(
        f"{run['device']}, torch {run['torch']}, {run['date']}: {step['depth']} layers of "
        f"width {step['width']}, {step['micro_batches']} micro-batches of {step['rows']} rows"
    )
    for key in ("no_checkpointing", "checkpointing"):
        print(
            f"  {key:<17}: {step[key]['step_seconds'] * 1e3:7.2f} ms per step, "
            f"{step[key]['peak_bytes'] / 2**20:8.1f} MiB peak"
        )
    print(
        f"  forward + backward: FP32 {prec['float32'] * 1e3:.2f} ms, "
        f"BF16 {prec['bfloat16'] * 1e3:.2f} ms ({prec['float32'] / prec['bfloat16']:.1f}x)"
    )
if not gpu_runs:
    print(
        "No GPU benchmark is committed: every figure on this page was measured on the "
        "build machine's CPU."
    )
# --8<-- [end:gpu_table]
