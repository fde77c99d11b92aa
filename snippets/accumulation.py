# --8<-- [start:loop]
import torch
import torch.nn.functional as F

import gradflow_ref.accumulation as ref

device = "cuda" if torch.cuda.is_available() else "cpu"
model = ref.make_model().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
inputs, labels = (t.to(device) for t in ref.make_micro_batches([32])[0])
grad_accum_steps = 4
micro_batches = list(zip(inputs.chunk(grad_accum_steps), labels.chunk(grad_accum_steps)))

optimizer.zero_grad()
for x, y in micro_batches:
    loss = F.cross_entropy(model(x), y) / grad_accum_steps
    loss.backward()
optimizer.step()
# --8<-- [end:loop]


# --8<-- [start:ddp_step]
import contextlib


def train_step(ddp_model, optimizer, scheduler, micro_batches, max_norm=1.0):
    optimizer.zero_grad()
    for k, (x, y) in enumerate(micro_batches):
        last = k == len(micro_batches) - 1
        with contextlib.nullcontext() if last else ddp_model.no_sync():
            loss = F.cross_entropy(ddp_model(x), y) / len(micro_batches)
            loss.backward()
    torch.nn.utils.clip_grad_norm_(ddp_model.parameters(), max_norm)
    optimizer.step()
    scheduler.step()


# --8<-- [end:ddp_step]

# --8<-- [start:equivalence]
twin = ref.make_model().to(device)
F.cross_entropy(twin(inputs), labels).backward()
big = torch.cat([p.grad.flatten() for p in twin.parameters()])
accumulated = torch.cat([p.grad.flatten() for p in model.parameters()])
print(
    f"one batch of {len(inputs)} vs {grad_accum_steps} micro-batches: largest difference "
    f"{(big - accumulated).abs().max():.1e} (float64)"
)
assert torch.allclose(big, accumulated, rtol=1e-12, atol=1e-15)
# --8<-- [end:equivalence]

# --8<-- [start:inside]
ref.accumulate_grad_(twin, micro_batches, normalization="micro_mean")
print(f"largest difference from the loop: {(ref.flat_grad(twin) - accumulated).abs().max():.1e}")
# --8<-- [end:inside]

# --8<-- [start:divisor_bug]
ref.accumulate_grad_(twin, micro_batches, normalization="none")
ratio = ref.flat_grad(twin).norm() / big.norm()
print(f"without the divisor the gradient is {ratio:.4f}x too large")
for name in ("sgd", "adamw"):
    moved = ref.divisor_bug_update_ratio(name, accum_steps=grad_accum_steps)
    print(f"{name:>5}: the first update moves the weights {moved:.4f}x as far")
# --8<-- [end:divisor_bug]

# --8<-- [start:unequal_tokens]
from gradflow_ref.clipping import angle_between

uneven = [(x.to(device), y.to(device)) for x, y in ref.make_micro_batches([2, 30, 5, 27], seed=1)]
ref.big_batch_grad_(twin, uneven)
truth = ref.flat_grad(twin).clone()
n_tokens = sum(len(y) for _, y in uneven)
twin.zero_grad()
for x, y in uneven:
    loss = F.cross_entropy(twin(x), y, reduction="sum") / n_tokens
    loss.backward()
results = {"sum / all tokens": ref.flat_grad(twin).clone()}
ref.accumulate_grad_(twin, uneven, normalization="micro_mean")
results["mean / N"] = ref.flat_grad(twin).clone()
for name, g in results.items():
    error = (g - truth).norm() / truth.norm()
    print(f"{name:>16}: {error:.1%} off the big batch, {angle_between(truth, g):.1f} degrees")
# --8<-- [end:unequal_tokens]

# --8<-- [start:clip_once]
clip_batches = [(x.to(device), y.to(device)) for x, y in ref.make_micro_batches([8] * 4, seed=2)]
ref.big_batch_grad_(twin, clip_batches, max_norm=0.1)
clipped_big = ref.flat_grad(twin).clone()
ref.accumulate_grad_(twin, clip_batches[-1:])
last_alone = ref.flat_grad(twin).clone()
clipped = {}
for clip in ("once", "each"):
    ref.accumulate_grad_(twin, clip_batches, max_norm=0.1, clip=clip)
    clipped[clip] = ref.flat_grad(twin).clone()
    to_big, to_last = (angle_between(g, clipped[clip]) for g in (clipped_big, last_alone))
    print(
        f"clip {clip}: {to_big:.1f} degrees off the clipped big batch, {to_last:.1f} off the last"
    )
# --8<-- [end:clip_once]

# --8<-- [start:schedule]
from gradflow_ref.pipeline import WarmupCosine

warmup_steps, max_steps = 10, 100
lrs, schedule_at = {}, {}
for where in ("per optimizer step", "per micro-batch"):
    scheduler = WarmupCosine(torch.optim.AdamW(twin.parameters()), warmup_steps, max_steps)
    lrs[where] = []
    for _ in range(max_steps):
        lrs[where].append(scheduler.get_last_lr()[0])
        for _ in range(grad_accum_steps if where == "per micro-batch" else 1):
            scheduler.step()
    schedule_at[where] = scheduler.last_step
    zeros = sum(lr == 0 for lr in lrs[where])
    print(f"scheduler.step() {where}: at schedule step {schedule_at[where]}, {zeros} steps at lr 0")
# --8<-- [end:schedule]

# --8<-- [start:noise_figure]
import matplotlib.pyplot as plt

micro_tokens, draws = 4, 24
curve = ref.gradient_noise(ns=(1, 2, 4, 8, 16), micro_batch_tokens=micro_tokens, n_seeds=draws)
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.loglog(curve.ns, curve.rel_error, "o-", color="C0", label=f"measured ({draws} draws per N)")
ax.loglog(curve.ns, curve.reference, "--", color="0.5", label=r"$1/\sqrt{N}$ from N = 1")
ax.minorticks_off()
ax.set_xticks(curve.ns, [str(n) for n in curve.ns])
ax.set_yticks([0.5, 1, 2], ["0.5", "1", "2"])
ax.set_xlabel(f"micro-batches accumulated, N ({micro_tokens} tokens each)")
ax.set_ylabel("relative gradient error")
ax.legend(frameon=False)
fig.tight_layout()
assert curve.rel_error[0] > 1 and all(
    abs(e / r - 1) < 0.1 for e, r in zip(curve.rel_error, curve.reference)
)
# --8<-- [end:noise_figure]

# --8<-- [start:effective_batch]
total_batch_size, B, T = 524288, 64, 1024
micro_steps = {}
for world_size in (1, 2, 8):
    assert total_batch_size % (B * T * world_size) == 0
    micro_steps[world_size] = total_batch_size // (B * T * world_size)
    print(f"world_size {world_size}: {micro_steps[world_size]} x {B} x {T} tokens per GPU")
# --8<-- [end:effective_batch]

# --8<-- [start:ddp_run]
ddp = ref.ddp_accumulation(world_size=2, accum_steps=4)
print(f"largest difference from one process: {ddp.max_abs_diff:.0e}")
every, last = ddp.allreduces_sync_every_step, ddp.allreduces_no_sync
print(f"all-reduces per step: {every} without no_sync(), {last} with it")
# --8<-- [end:ddp_run]
