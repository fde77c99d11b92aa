# --8<-- [start:imports]
import contextlib

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from gradflow_ref.accumulation import (
    accumulate_grad_,
    big_batch_grad_,
    ddp_accumulation,
    divisor_bug_update_ratio,
    flat_grad,
    grad_accum_steps,
    gradient_noise,
    make_micro_batches,
    make_model,
    split_micro_batches,
)
from gradflow_ref.clipping import angle_between
from gradflow_ref.pipeline import WarmupCosine

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
# --8<-- [end:imports]

# --8<-- [start:equivalence]
model = make_model().to(device)
x, y = (t.to(device) for t in make_micro_batches([32])[0])

big_batch_grad_(model, [(x, y)])
big = flat_grad(model).clone()

micro_batches = split_micro_batches(x, y, accum_steps=4)
accumulate_grad_(model, micro_batches, normalization="micro_mean")
accumulated = flat_grad(model).clone()

print(
    f"one batch of 32 vs 4 micro-batches of 8: largest difference "
    f"{(big - accumulated).abs().max():.1e} (float64)"
)
assert torch.allclose(big, accumulated, rtol=1e-12, atol=1e-15)
# --8<-- [end:equivalence]

# --8<-- [start:divisor_bug]
accumulate_grad_(model, micro_batches, normalization="none")
forgot = flat_grad(model).clone()
ratio = forgot.norm() / big.norm()
print(f"without the divisor the gradient is {ratio:.4f}x too large (accum_steps = 4)")
for optimizer in ("sgd", "adamw"):
    print(
        f"{optimizer:>5}: the first update moves the weights "
        f"{divisor_bug_update_ratio(optimizer, accum_steps=4):.4f}x as far"
    )
assert abs(ratio - 4) < 1e-12
# --8<-- [end:divisor_bug]

# --8<-- [start:unequal_tokens]
uneven = [(x.to(device), y.to(device)) for x, y in make_micro_batches([2, 30, 5, 27], seed=1)]
big_batch_grad_(model, uneven)
truth = flat_grad(model).clone()
results = {}
for normalization in ("global", "micro_mean"):
    accumulate_grad_(model, uneven, normalization=normalization)
    results[normalization] = flat_grad(model).clone()
    error = (results[normalization] - truth).norm() / truth.norm()
    print(
        f"{normalization:>10}: {error:.1%} off the big-batch gradient, "
        f"turned {angle_between(truth, results[normalization]):.1f} degrees"
    )
assert (results["global"] - truth).abs().max() < 1e-15
# --8<-- [end:unequal_tokens]

# --8<-- [start:clip_once]
batches = [(x.to(device), y.to(device)) for x, y in make_micro_batches([8, 8, 8, 8], seed=2)]
big_batch_grad_(model, batches, max_norm=0.1)
clipped_big = flat_grad(model).clone()
norms = {}
for clip in ("once", "each"):
    accumulate_grad_(model, batches, max_norm=0.1, clip=clip)
    g = flat_grad(model)
    norms[clip] = g.norm().item()
    print(
        f"clip {clip:>4}: norm {g.norm():.4f}, {angle_between(clipped_big, g):5.1f} degrees "
        f"from the clipped big batch"
    )
assert abs(norms["once"] - norms["each"]) < 1e-6 and angle_between(clipped_big, g) > 5
# --8<-- [end:clip_once]

# --8<-- [start:schedule]
accum_steps, warmup, total = 4, 10, 100
lrs, at = {}, {}
for where in ("per optimizer step", "per micro-batch"):
    scheduler = WarmupCosine(torch.optim.AdamW(model.parameters(), lr=1e-3), warmup, total)
    lrs[where] = []
    for _ in range(total):
        lrs[where].append(scheduler.get_last_lr()[0])
        for _ in range(accum_steps if where == "per micro-batch" else 1):
            scheduler.step()
    at[where] = scheduler.last_step
    zeros = sum(lr == 0 for lr in lrs[where])
    print(f"scheduler.step() {where}: at schedule step {at[where]}, {zeros} steps at lr 0")
assert at == {"per optimizer step": total, "per micro-batch": accum_steps * total}
# --8<-- [end:schedule]

# --8<-- [start:noise_figure]
micro_tokens, draws = 4, 24
curve = gradient_noise(ns=(1, 2, 4, 8, 16), micro_batch_tokens=micro_tokens, n_seeds=draws)
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
assert all(abs(e / r - 1) < 0.1 for e, r in zip(curve.rel_error, curve.reference))
assert curve.rel_error[0] > 1
# --8<-- [end:noise_figure]

# --8<-- [start:effective_batch]
B, T, total = 64, 1024, 524288
for world_size in (1, 2, 8):
    steps = grad_accum_steps(total, B, T, world_size)
    print(
        f"world_size {world_size}: {B} x {T} x {world_size} x {steps} micro-steps "
        f"= {B * T * world_size * steps:,} tokens per optimizer step"
    )
assert 64 * 1024 * 8 == 524288 == 2**19
# --8<-- [end:effective_batch]


# --8<-- [start:no_sync]
def accumulate(model, micro_batches, no_sync=True):
    for k, (x, y) in enumerate(micro_batches):
        last = k == len(micro_batches) - 1
        with model.no_sync() if no_sync and not last else contextlib.nullcontext():
            loss = F.cross_entropy(model(x), y) / len(micro_batches)
            loss.backward()


# --8<-- [end:no_sync]


# --8<-- [start:ddp_run]
world_size, accum_steps = 2, 4
ddp = ddp_accumulation(world_size=world_size, accum_steps=accum_steps)
diff = ddp.max_abs_diff
allreduces = {True: ddp.allreduces_no_sync, False: ddp.allreduces_sync_every_step}
print(f"{world_size} ranks x {accum_steps} micro-batches vs one process: max difference {diff:.0e}")
print(f"all-reduces per step: {allreduces[False]} without no_sync(), {allreduces[True]} with it")
assert diff < 1e-15 and allreduces == {True: 1, False: accum_steps}
# --8<-- [end:ddp_run]
