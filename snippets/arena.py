# --8<-- [start:setup]
from dataclasses import replace

from train import Config, train

base = Config(
    n_layers=2,
    hidden=64,
    n_heads=4,
    seq_len=64,
    micro_batch=16,
    steps=300,
    warmup=100,
    lr=1e-2,
    weight_decay=0.1,
    max_norm=1.0,
    precision="bf16",
    eval_every=300,
    print_every=0,
)
seeds = (0, 1, 2, 3, 4)
tokens = base.micro_batch * base.seq_len
print(f"{base.n_layers} blocks, {base.hidden} wide, {tokens} tokens per step, {base.steps} steps")
# --8<-- [end:setup]

# --8<-- [start:recipes]
RECIPES = {
    "full": {},
    "no-warmup": {"warmup": 0},
    "no-clip": {"max_norm": 0.0},
    "fp32": {"precision": "fp32"},
    "bf16-pure": {"precision": "bf16-pure"},
    "fp16": {"precision": "fp16"},
    "fp16-no-scaler": {"precision": "fp16", "loss_scaling": False},
    "accum": {"accum_steps": 2},
    "ckpt": {"checkpointing": "full"},
}
print(f"{len(RECIPES)} recipes x {len(seeds)} seeds = {len(RECIPES) * len(seeds)} runs")
# --8<-- [end:recipes]


# --8<-- [start:race]
def run(cfg, recipe, seed):
    cfg = replace(cfg, seed=seed, **RECIPES[recipe])
    cfg = replace(cfg, micro_batch=cfg.micro_batch // cfg.accum_steps)
    return train(cfg)["log"]


def race(cfg=base, seeds=seeds):
    return {name: [run(cfg, name, seed) for seed in seeds] for name in RECIPES}


# --8<-- [end:race]

# --8<-- [start:first_steps]
first = run(replace(base, steps=5), "full", seeds[0])
print(f"full, seed {seeds[0]}, first 5 losses: " + " ".join(f"{s['loss']:.4f}" for s in first))
# --8<-- [end:first_steps]
