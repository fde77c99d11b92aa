# --8<-- [start:setup]
import math
import statistics
from dataclasses import replace

import matplotlib.pyplot as plt
import torch

from gradflow_ref.arena import RECIPES, ArenaConfig, train

device = "cuda" if torch.cuda.is_available() else "cpu"
base = ArenaConfig(device=device)
seeds = (0, 1, 2)
print(
    f"{base.depth} Linear layers of width {base.width} with {base.activation}, plain SGD at lr "
    f"{base.lr}, batch {base.batch_size}, {base.steps} steps, seeds {seeds}, on {device}"
)
# --8<-- [end:setup]


# --8<-- [start:race]
def race_seeds(cfg, recipes=tuple(RECIPES)):
    return {name: [train(replace(cfg, seed=s), name) for s in seeds] for name in recipes}


conditions = {
    "reference": base,
    "lr 1.0": replace(base, lr=1.0),
    "batch 1": replace(base, batch_size=1),
    "FP16": replace(base, fp16=True),
}
runs = {label: race_seeds(cfg) for label, cfg in list(conditions.items())[:-1]}
runs["FP16"] = race_seeds(conditions["FP16"], ("mixed", "full"))
print(f"seeds that learned, of {len(seeds)}:".ljust(28) + "".join(f"{n:>9}" for n in RECIPES))
for label, panel in runs.items():
    learned = [sum(r.status == "learns" for r in panel[n]) if n in panel else "-" for n in RECIPES]
    print(f"{label:<28}" + "".join(f"{k:>9}" for k in learned))
finite = [n for n, rs in runs["lr 1.0"].items() if all(r.status != "NaN/inf" for r in rs)]
assert finite == ["clip", "full"]
# --8<-- [end:race]

# --8<-- [start:figure]
fig, axes = plt.subplots(2, 3, figsize=(9.6, 5.6), sharex=True, sharey=True)
styles = dict(zip(RECIPES, ["o-", "s-", "^-", "v-", "x--", "D-"]))
looks = {"baseline": {"lw": 3}, "ckpt": {"markersize": 7, "mew": 1.2, "lw": 1, "zorder": 3}}
scored = range(0, base.steps + 1, base.eval_every)
for ax, (condition, drawn) in zip(axes.flat, runs.items()):
    for recipe, seed_runs in drawn.items():
        colour = f"C{list(RECIPES).index(recipe)}"
        at = [
            [v for r in seed_runs for s, v in zip(r.eval_steps, r.eval_loss) if s == x]
            for x in scored
        ]
        band = [(x, min(v), max(v)) for x, v in zip(scored, at) if v and all(map(math.isfinite, v))]
        mid = [(x, statistics.median(v)) for x, v in zip(scored, at) if len(v) == len(seeds)]
        mid = [(x, m) for x, m in mid if math.isfinite(m)]
        if band and recipe != "ckpt":
            ax.fill_between(*zip(*band), color=colour, alpha=0.15, linewidth=0)
        look = {"markersize": 3.5, **looks.get(recipe, {})}
        ax.plot(*zip(*mid), styles[recipe], color=colour, label=recipe, **look)
        for dead in [r.dead_at for r in seed_runs if r.status == "NaN/inf"]:
            ax.plot(dead + 1, 2.5, "X", color=colour, markersize=9)
    ax.set_title(condition if condition != "FP16" else "FP16 (mixed, full)")
    ax.set_yscale("log")
    ax.set_ylim(0.08, 3)
for ax in [*axes[1], *axes[0, 1:]]:
    ax.set_xlabel("optimizer step")
    ax.tick_params(labelbottom=True)
for ax in axes[:, 0]:
    ax.set_ylabel("held-out loss")
axes.flat[-2].axis("off")
axes.flat[-1].axis("off")
axes.flat[-2].legend(
    *axes.flat[0].get_legend_handles_labels(), loc="center", title="X = weights became inf/NaN"
)
fig.suptitle(
    f"Median of {len(seeds)} seeds, band from lowest to highest; loss every {base.eval_every} steps"
)
# --8<-- [end:figure]


# --8<-- [start:failure_table]
def table_cell(seed_runs):
    if seed_runs is None:
        return "–"
    ends = sorted(r.final_loss for r in seed_runs if r.status != "NaN/inf")
    parts = [f"{ends[0]:.3g}" + (f"–{ends[-1]:.3g}" if len(ends) > 1 else "")] if ends else []
    for mark, status in (("↑", "worse than start"), ("NaN", "NaN/inf")):
        if n := sum(r.status == status for r in seed_runs):
            parts.append(f"{mark} {n}")
    return ", ".join(parts)


print("| recipe | " + " | ".join(runs) + " | fails under |")
print("|:--" + "|--:" * len(runs) + "|:--|")
for row_name in RECIPES:
    cells = [table_cell(panel.get(row_name)) for panel in runs.values()]
    fails = [
        f"{c} ({sum(r.status != 'learns' for r in panel[row_name])}/{len(seeds)})"
        for c, panel in runs.items()
        if row_name in panel and any(r.status != "learns" for r in panel[row_name])
    ]
    print(f"| {row_name} | " + " | ".join(cells) + f" | {', '.join(fails) or 'none'} |")
# --8<-- [end:failure_table]

# --8<-- [start:reference]
pairs = [(c, b) for p in list(runs.values())[:-1] for c, b in zip(p["ckpt"], p["baseline"])]
same = sum(f"{c.loss}{c.eval_loss}" == f"{b.loss}{b.eval_loss}" for c, b in pairs)
ref = runs["reference"]
big = train(replace(base, batch_size=base.batch_size * base.accum_steps), "baseline")
gap = max(abs(a - b) for a, b in zip(ref["accum"][0].eval_loss, big.eval_loss))
print(f"ckpt repeats the baseline's losses digit for digit in {same} of {len(pairs)} runs")
print(f"accum vs baseline with batch {big.config.batch_size}: largest loss gap {gap:.1e}")
assert same == len(pairs)
# --8<-- [end:reference]

# --8<-- [start:deep]
deep = train(replace(base, depth=48))
print(f"depth 48: largest gradient norm {max(deep.grad_norm):.1f}, {deep.status}")
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    print(f"largest finite {str(dtype)[6:]:<8} {torch.finfo(dtype).max:.3e}")
# --8<-- [end:deep]

# --8<-- [start:high_lr]
hot = conditions["lr 1.0"]
clipped = runs["lr 1.0"]["clip"]
adam = train(replace(hot, optimizer="adam", steps=3), "clip")
step_bound = hot.lr * hot.max_norm
largest = max(max(r.update_norm) for r in clipped)
print(f"SGD  + clipping: largest step {largest:.3f} of all seeds (lr x max_norm = {step_bound})")
print(f"Adam + clipping: first step   {adam.update_norm[0]:.1f}")
assert largest <= step_bound < adam.update_norm[0]
# --8<-- [end:high_lr]

# --8<-- [start:batch_one]
b1 = runs["batch 1"]
noise = {name: [sum(r.grad_norm[:10]) / 10 for r in b1[name]] for name in ("baseline", "accum")}
for name, runs_of_seeds in b1.items():
    ends = ", ".join(f"{r.final_loss:.3g}" for r in runs_of_seeds)
    print(f"{name:<9} final loss per seed: {ends}")
for name, norms in noise.items():
    print(f"{name:<9} mean gradient norm of steps 1-10: {min(norms):.2f} to {max(norms):.2f}")
assert max(noise["accum"]) < min(noise["baseline"])
# --8<-- [end:batch_one]

# --8<-- [start:fp16]
half = runs["FP16"]
zeros = {name: max(max(r.zero_frac) for r in half[name]) for name in half}
bad = sum(n > 0 for name in half for r in half[name] for n in r.nonfinite)
shift = max(abs(h.final_loss - b.final_loss) for n in half for h, b in zip(half[n], ref[n]))
print(f"FP16, unscaled: most zero gradient entries in a step {zeros['mixed']:.2%}")
print(f"FP16: steps with inf/NaN gradients {bad}; final loss moved vs BF16 by {shift:.1e}")
print(f"full's loss scale at the end {[r.loss_scale[-1] for r in half['full']]}")
rms = ref["baseline"][0].grad_norm[0] / math.sqrt(ref["baseline"][0].n_params)
print(f"typical gradient entry {rms:.1e}; FP16 rounds below {2.0**-25:.1e} to zero")
z, saturates = torch.linspace(0, 10, 10001, device=device), {}
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    saturates[dtype] = z[torch.tanh(z.to(dtype)) == 1][0].item()
    print(f"tanh(z) == 1 in {str(dtype)[6:]:<8} from z = {saturates[dtype]:.2f}")
assert shift < max(r.final_loss for r in ref["mixed"]) - min(r.final_loss for r in ref["mixed"])
# --8<-- [end:fp16]
