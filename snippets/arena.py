# --8<-- [start:setup]
import math
from dataclasses import fields, replace

import matplotlib.pyplot as plt
import torch

from gradflow_ref.arena import RECIPES, ArenaConfig, Recipe, race, train

base = ArenaConfig()
print(
    f"student: {base.depth} Linear layers, width {base.width}, {base.activation}, "
    f"plain SGD at lr {base.lr}"
)
print(
    f"batch {base.batch_size}, {base.steps} steps, clip at max_norm {base.max_norm}, "
    f"{base.accum_steps} micro-batches, {base.n_segments} checkpoint segments"
)
print()
flags = [f.name for f in fields(Recipe)]
print(f"{'':<9}" + "".join(f"{f:>13}" for f in flags))
for name, recipe in RECIPES.items():
    print(f"{name:<9}" + "".join(f"{'yes' if getattr(recipe, f) else '-':>13}" for f in flags))
# --8<-- [end:setup]

# --8<-- [start:reference]
runs = {"reference": race(base)}
ref = runs["reference"]
for name, run in ref.items():
    print(
        f"{name:<9} held-out loss {run.eval_loss[0]:.3f} -> {run.final_loss:.4f}  "
        f"({run.samples} samples)"
    )
big = train(replace(base, batch_size=base.batch_size * base.accum_steps), "baseline")
gap = max(abs(a - b) for a, b in zip(ref["accum"].eval_loss, big.eval_loss))
print(
    f"accum vs baseline with batch {big.config.batch_size}: "
    f"largest held-out loss difference {gap:.1e}"
)
assert ref["ckpt"].loss == ref["baseline"].loss and gap < 1e-5
# --8<-- [end:reference]

# --8<-- [start:deep]
runs["depth 48"] = race(replace(base, depth=48))
for name, run in runs["depth 48"].items():
    print(
        f"{name:<9} {run.status:<7} loss {run.eval_loss[0]:.3f} -> {run.final_loss:.3f}, "
        f"largest gradient norm {max(run.grad_norm):5.2f}"
    )
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    print(f"largest finite {str(dtype)[6:]:<8} {torch.finfo(dtype).max:.3e}")
assert all(run.status != "NaN/inf" for run in runs["depth 48"].values())
# --8<-- [end:deep]

# --8<-- [start:high_lr]
hot = replace(base, lr=1.0)
runs["lr 1.0"] = race(hot)
for name, run in runs["lr 1.0"].items():
    if run.status == "NaN/inf":
        print(f"{name:<9} NaN/inf at step {run.first_nonfinite}")
    else:
        print(f"{name:<9} {run.status:<16} loss {run.eval_loss[0]:.3f} -> {run.final_loss:.3f}")
pair = train(hot, Recipe(clip=True, accumulate=True))
print(f"clip + accum only: {pair.status}, loss {pair.eval_loss[0]:.3f} -> {pair.final_loss:.3f}")
assert [n for n, r in runs["lr 1.0"].items() if r.status != "NaN/inf"] == ["clip", "full"]
# --8<-- [end:high_lr]

# --8<-- [start:adam]
adam = train(replace(hot, optimizer="adam", steps=3), "clip")
sgd = runs["lr 1.0"]["clip"]
print(
    f"SGD  + clipping: largest step {max(sgd.update_norm):.3f} "
    f"(cap: lr x max_norm = {hot.lr * hot.max_norm})"
)
print(f"Adam + clipping: first step   {adam.update_norm[0]:.1f}")
assert max(sgd.update_norm) <= hot.lr * hot.max_norm < adam.update_norm[0]
# --8<-- [end:adam]

# --8<-- [start:batch_one]
one = replace(base, batch_size=1)
runs["batch 1"] = race(one)
for name, run in runs["batch 1"].items():
    end = (
        f"NaN/inf at step {run.first_nonfinite}"
        if run.status == "NaN/inf"
        else f"loss {run.eval_loss[0]:.3f} -> {run.final_loss:.3g}"
    )
    print(
        f"{name:<9} {end:<24} mean gradient norm over the first 10 steps "
        f"{sum(run.grad_norm[:10]) / 10:5.2f}"
    )
# --8<-- [end:batch_one]

# --8<-- [start:fp16]
half = replace(base, fp16=True)
fp16_runs = race(half, ("mixed", "full"))
runs["FP16"] = {name: fp16_runs.get(name, ref[name]) for name in RECIPES}
for name, run in [
    ("mixed, BF16", ref["mixed"]),
    ("mixed, FP16", fp16_runs["mixed"]),
    ("full, BF16", ref["full"]),
    ("full, FP16", fp16_runs["full"]),
]:
    print(
        f"{name:<12} zero gradient entries {max(run.zero_frac):6.2%}, "
        f"steps with inf/NaN {sum(n > 0 for n in run.nonfinite)}, skipped {sum(run.skipped)}, "
        f"scale {run.loss_scale[-1]:g}, loss -> {run.final_loss:.4f}"
    )
rms = ref["baseline"].grad_norm[0] / math.sqrt(ref["baseline"].n_params)
print(f"typical gradient entry {rms:.1e}; FP16 rounds anything below {2.0**-25:.1e} to zero")
z = torch.linspace(0, 10, 10001)
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    print(
        f"tanh(z) is exactly 1 in {str(dtype)[6:]:<8} from z = "
        f"{z[torch.tanh(z.to(dtype)) == 1][0]:.2f}"
    )
# --8<-- [end:fp16]

# --8<-- [start:figure]
fig, axes = plt.subplots(2, 3, figsize=(9.6, 5.6), sharex=True, sharey=True)
styles = {
    "baseline": "o-",
    "clip": "s--",
    "mixed": "^-.",
    "accum": "v:",
    "ckpt": "x-",
    "full": "D-",
}
for ax, (condition, race_runs) in zip(axes.flat, runs.items()):
    for i, (name, run) in enumerate(race_runs.items()):
        finite = [(s, v) for s, v in zip(run.eval_steps, run.eval_loss) if math.isfinite(v)]
        ax.plot(*zip(*finite), styles[name], color=f"C{i}", markersize=3.5, label=name)
        if run.status == "NaN/inf":
            ax.plot(run.dead_at + 1, 2.5, "X", color=f"C{i}", markersize=9)
    ax.set_title(condition)
    ax.set_yscale("log")
    ax.set_ylim(0.08, 3)
for ax in axes[1]:
    ax.set_xlabel("optimizer step")
for ax in axes[:, 0]:
    ax.set_ylabel("held-out loss")
axes.flat[-1].axis("off")
axes.flat[-1].legend(
    *axes.flat[0].get_legend_handles_labels(), loc="center", title="X = weights became inf/NaN"
)
fig.suptitle(f"Six recipes, five conditions: held-out loss every {base.eval_every} steps")
# --8<-- [end:figure]


# --8<-- [start:failure_table]
def cell(run):
    if run.status == "NaN/inf":
        return f"NaN at step {run.first_nonfinite}"
    return f"{run.final_loss:.3g}" + (" ↑" if run.status == "worse than start" else "")


header = ["recipe", *runs, "fails under"]
print("| " + " | ".join(header) + " |")
print("|:--" + "|--:" * len(runs) + "|:--|")
for name in RECIPES:
    failed = [c for c, race_runs in runs.items() if race_runs[name].status != "learns"]
    cells = [cell(race_runs[name]) for race_runs in runs.values()]
    print(f"| {name} | " + " | ".join(cells) + f" | {', '.join(failed) or 'none of these'} |")
# --8<-- [end:failure_table]
