# --8<-- [start:setup]
import math
from dataclasses import replace

import torch
from train import Config, train

base = Config(
    n_layers=1,
    hidden=16,
    n_heads=2,
    seq_len=16,
    micro_batch=8,
    steps=6,
    warmup=2,
    lr=3e-2,
    max_norm=0.0,
    precision="fp32",
    eval_every=6,
    print_every=0,
)
seeds = (0, 1, 2)
tokens = base.micro_batch * base.seq_len
print(
    f"{base.n_layers}-layer GPT, {base.hidden} wide, {tokens} tokens per step, {base.steps} steps"
)
# --8<-- [end:setup]

# --8<-- [start:recipes]
RECIPES = {
    "none": {},
    "clip": {"max_norm": 1.0},
    "bf16": {"precision": "bf16"},
    "bf16-pure": {"precision": "bf16-pure"},
    "fp16": {"precision": "fp16", "loss_scaling": False},
    "fp16-scaled": {"precision": "fp16"},
    "accum": {"accum_steps": 2},
    "ckpt": {"checkpointing": "full"},
    "full": {"precision": "bf16", "max_norm": 1.0, "accum_steps": 2, "checkpointing": "full"},
}
print(f"{len(RECIPES)} recipes, {len(seeds)} seeds each")
# --8<-- [end:recipes]


# --8<-- [start:race]
def run(cfg, recipe, seed):
    cfg = replace(cfg, seed=seed, **RECIPES[recipe])
    cfg = replace(cfg, micro_batch=cfg.micro_batch // cfg.accum_steps)
    return train(cfg)["log"]


def race(cfg, seeds=seeds):
    return {name: [run(cfg, name, s) for s in seeds] for name in RECIPES}


def final(log):
    return log[-1]["val_loss"]


conditions = {"reference": base, "lr 3.0": replace(base, lr=3.0)}
runs = {label: race(cfg) for label, cfg in conditions.items()}
print(f"{'held-out loss':<13}" + "".join(f"{c:>24}" for c in runs))
for name in RECIPES:
    ends = [" ".join(f"{final(log):7.3f}" for log in runs[c][name]) for c in runs]
    print(f"{name:<13}" + "".join(f"{e:>24}" for e in ends))
# --8<-- [end:race]

# --8<-- [start:reference]
ref = runs["reference"]
gaps = {
    name: max(abs(final(a) - final(b)) for a, b in zip(ref[name], ref["none"])) for name in RECIPES
}
same = [
    name
    for name in RECIPES
    if all(
        [(s["loss"], s["grad_norm"]) for s in a] == [(s["loss"], s["grad_norm"]) for s in b]
        and final(a) == final(b)
        for a, b in zip(ref[name], ref["none"])
    )
]
width = max(map(final, ref["none"])) - min(map(final, ref["none"]))
skipped = sum(s["skipped"] for log in ref["fp16-scaled"] for s in log)
for name, gap in list(gaps.items())[1:]:
    print(f"{name:<12} largest gap to none with the same seed {gap:.1e}")
print(f"none's spread over the seeds {width:.1e}; fp16-scaled skipped {skipped} steps")
print(f"identical logs to none, every step and seed: {', '.join(same[1:])}")
assert "ckpt" in same and max(gaps.values()) < width and skipped == 0
# --8<-- [end:reference]

# --8<-- [start:high_lr]
hot = runs["lr 3.0"]
nan = {name: sum(not math.isfinite(final(log)) for log in hot[name]) for name in RECIPES}
finite = [log for logs in hot.values() for log in logs if math.isfinite(final(log))]
above = sum(final(log) > log[0]["loss"] for log in finite)
skips = {name: [sum(s["skipped"] for s in log) for log in hot[name]] for name in RECIPES}
first_scale = hot["fp16-scaled"][0][0]["loss_scale"]
print(f"runs that ended NaN: {sum(nan.values())} of {len(RECIPES) * len(seeds)}")
print(f"finite runs that ended above their first loss: {above} of {len(finite)}")
print("skipped steps, by seed: " + ", ".join(f"{n} {k}" for n, k in skips.items() if any(k)))
print(f"fp16-scaled started from a loss scale of {first_scale:g}")
print(f"largest FP16 value {torch.finfo(torch.float16).max:.0f}")
assert not sum(nan.values()) and [n for n, k in skips.items() if any(k)] == ["fp16-scaled"]
# --8<-- [end:high_lr]

# --8<-- [start:more_seeds]
more = [run(conditions["lr 3.0"], "none", s) for s in range(len(seeds), 10)]
wide = [final(log) for log in hot["none"] + more]
higher = [name for name, logs in hot.items() if any(final(log) > max(wide) for log in logs)]
print(f"none at lr 3.0, {len(wide)} seeds, sorted: {' '.join(f'{x:.1f}' for x in sorted(wide))}")
print(f"recipes with a finite run above that: {', '.join(higher) or 'no recipe'}")
# --8<-- [end:more_seeds]

# --8<-- [start:batch]
small = {f"{label}, batch 2": replace(cfg, micro_batch=2) for label, cfg in conditions.items()}
one_seed = {label: race(cfg, seeds[:1]) for label, cfg in small.items()}
for label, cell in one_seed.items():
    dead = [name for name, (log,) in cell.items() if not math.isfinite(final(log))]
    print(f"{label:<20} NaN: {', '.join(dead) or 'no recipe'}")
# --8<-- [end:batch]
