# --8<-- [start:setup]
import math
from dataclasses import replace

import matplotlib.pyplot as plt
import torch

from gradflow_ref.arena import RECIPES, ArenaConfig, Recipe, race, train

device = "cuda" if torch.cuda.is_available() else "cpu"
base = ArenaConfig(device=device)
print(
    f"{base.depth} Linear layers of width {base.width} with {base.activation}, plain SGD at lr "
    f"{base.lr}, batch {base.batch_size}, {base.steps} steps, on {device}"
)
# --8<-- [end:setup]

# --8<-- [start:race]
conditions = {
    "reference": base,
    "depth 48": replace(base, depth=48),
    "lr 1.0": replace(base, lr=1.0),
    "batch 1": replace(base, batch_size=1),
}
runs = {label: race(cfg) for label, cfg in conditions.items()}
ref = runs["reference"]
fp16_runs = race(replace(base, fp16=True), ("mixed", "full"))
runs["FP16"] = {name: fp16_runs.get(name, ref[name]) for name in RECIPES}
for label, race_runs in runs.items():
    failed = [f"{n} {r.status}" for n, r in race_runs.items() if r.status != "learns"]
    print(f"{label:<9} {', '.join(failed) or 'all six learn'}")
assert all(p["ckpt"].loss == p["baseline"].loss for p in runs.values())
assert all(r.status == "learns" for c in ("depth 48", "FP16") for r in runs[c].values())
# --8<-- [end:race]

# --8<-- [start:figure]
fig, axes = plt.subplots(2, 3, figsize=(9.6, 5.6), sharex=True, sharey=True)
styles = dict(zip(RECIPES, ["o-", "s--", "^-.", "v:", "x-", "D-"]))
for ax, (condition, panel) in zip(axes.flat, runs.items()):
    for i, (recipe, curve) in enumerate(panel.items()):
        points = [(s, v) for s, v in zip(curve.eval_steps, curve.eval_loss) if math.isfinite(v)]
        ax.plot(*zip(*points), styles[recipe], color=f"C{i}", markersize=3.5, label=recipe)
        if curve.status == "NaN/inf":
            ax.plot(curve.dead_at + 1, 2.5, "X", color=f"C{i}", markersize=9)
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
def table_cell(run):
    if run.status == "NaN/inf":
        return f"NaN at step {run.first_nonfinite}"
    return f"{run.final_loss:.3g}" + (" ↑" if run.status == "worse than start" else "")


print("| recipe | " + " | ".join(runs) + " | fails under |")
print("|:--" + "|--:" * len(runs) + "|:--|")
for recipe in RECIPES:
    row = [table_cell(panel[recipe]) for panel in runs.values()]
    fails = ", ".join(c for c, panel in runs.items() if panel[recipe].status != "learns")
    print(f"| {recipe} | " + " | ".join(row) + f" | {fails or 'none'} |")
# --8<-- [end:failure_table]

# --8<-- [start:reference]
big = train(replace(base, batch_size=base.batch_size * base.accum_steps), "baseline")
gap = max(abs(a - b) for a, b in zip(ref["accum"].eval_loss, big.eval_loss))
print(f"ckpt's losses equal the baseline's: {ref['ckpt'].loss == ref['baseline'].loss}")
print(f"accum vs baseline with batch {big.config.batch_size}: largest loss gap {gap:.1e}")
assert ref["ckpt"].loss == ref["baseline"].loss and gap < 1e-5
# --8<-- [end:reference]

# --8<-- [start:deep]
deep = runs["depth 48"]
peak = {name: max(run.grad_norm) for name, run in deep.items()}
print("largest gradient norm: " + ", ".join(f"{n} {v:.1f}" for n, v in peak.items()))
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    print(f"largest finite {str(dtype)[6:]:<8} {torch.finfo(dtype).max:.3e}")
assert all(run.status != "NaN/inf" for run in deep.values())
assert peak["mixed"] >= peak["baseline"]
# --8<-- [end:deep]

# --8<-- [start:high_lr]
hot = conditions["lr 1.0"]
pair = train(hot, Recipe(clip=True, accumulate=True))
adam = train(replace(hot, optimizer="adam", steps=3), "clip")
sgd = runs["lr 1.0"]["clip"]
print(f"clip + accum only: {pair.status}, loss {pair.eval_loss[0]:.3f} -> {pair.final_loss:.3f}")
step_bound = hot.lr * hot.max_norm
print(f"SGD  + clipping: largest step {max(sgd.update_norm):.3f} (lr x max_norm = {step_bound})")
print(f"Adam + clipping: first step   {adam.update_norm[0]:.1f}")
assert [n for n, r in runs["lr 1.0"].items() if r.status != "NaN/inf"] == ["clip", "full"]
assert max(sgd.update_norm) <= step_bound < adam.update_norm[0]
assert abs(adam.update_norm[0] / (hot.lr * math.sqrt(adam.n_params)) - 1) < 0.01
# --8<-- [end:high_lr]

# --8<-- [start:batch_one]
b1 = runs["batch 1"]
noise = {name: sum(run.grad_norm[:10]) / 10 for name, run in b1.items()}
for name, run in b1.items():
    print(
        f"{name:<9} mean gradient norm of steps 1-10 {noise[name]:5.2f}, loss {run.final_loss:.3g}"
    )
assert noise["accum"] < noise["baseline"]
# --8<-- [end:batch_one]

# --8<-- [start:fp16]
zeros = {}
for fmt, race_runs in [("BF16", ref), ("FP16", fp16_runs)]:
    for name in ("mixed", "full"):
        zeros[fmt, name] = max(race_runs[name].zero_frac)
        bad = sum(n > 0 for n in race_runs[name].nonfinite)
        print(f"{fmt} {name:<5} zero gradient entries {zeros[fmt, name]:.2%}, inf/NaN steps {bad}")
rms = ref["baseline"].grad_norm[0] / math.sqrt(ref["baseline"].n_params)
print(f"typical gradient entry {rms:.1e}; FP16 rounds below {2.0**-25:.1e} to zero")
z, saturates = torch.linspace(0, 10, 10001, device=device), {}
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    saturates[dtype] = z[torch.tanh(z.to(dtype)) == 1][0].item()
    print(f"tanh(z) == 1 in {str(dtype)[6:]:<8} from z = {saturates[dtype]:.2f}")
assert saturates[torch.bfloat16] < saturates[torch.float16]
assert zeros["FP16", "mixed"] < 1e-3 and all(r.status != "NaN/inf" for r in fp16_runs.values())
# --8<-- [end:fp16]
