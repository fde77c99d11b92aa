"""Build side of docs/train.md, continued: what train.py's guards print and what each rank
holds while the model is built, each measured in ranks of their own (gradflow_site/pages/
train.py re-exports these for the page).
"""

from __future__ import annotations

import dataclasses
import os
import resource
import tempfile
from pathlib import Path

import torch

from gradflow_ref._ranks import run_ranks

__all__ = ["build_memory", "refusal_block", "refusals"]

FLIPPED = 4096  # bytes whose bits `refusals` flips in a checkpoint file


def _page():
    """docs/train.md's builders (which re-export these; imported here when first needed)."""
    from gradflow_site.pages import train

    return train


def _refusals_rank(rank: int, world_size: int, spec: tuple[str, list[str]]) -> dict:
    """The guards' messages, one scenario after the other, in one process (see `refusals`)."""
    train = _page().script()
    folder, argv = spec
    os.chdir(folder)  # this rank's own process: checkpoints in `folder`/c

    def attempt(*extra):
        try:
            train.main([*argv, *extra])
        except SystemExit as stop:
            return str(stop.code)
        return ""

    attempt("--save-every", "2")
    out = {"other_seed": attempt("--seed", "1", "--resume")}
    out["other_lr"] = attempt("--lr", "0.01", "--resume")
    shard = sorted(Path("c").glob("step-*/__0_0.distcp"))[-1]
    with open(shard, "r+b") as f:  # FLIPPED bytes of flipped bits
        f.seek(1024)
        data = f.read(FLIPPED)
        f.seek(1024)
        f.write(bytes(b ^ 0xFF for b in data))
    out["damaged"] = attempt("--resume")
    return out


def refusals(cfg) -> dict:
    """Return what train.py prints when resumed with another seed, another learning rate, or
    from a checkpoint with FLIPPED bytes of flipped bits: {"other_seed", "other_lr", "damaged"}.

    `cfg` runs first, saving every 2 steps into a folder `c` of a temporary working folder.
    """
    argv = _page().flags(dataclasses.replace(cfg, ckpt_dir="c", print_every=0))
    argv += ["--data", str(_page().SCRIPT.with_name("shakespeare.txt"))]
    with tempfile.TemporaryDirectory(prefix="gradflow-refusals-") as tmp:
        spec = (tmp, argv)
        out = run_ranks(
            "gradflow_site.pages.train_guards:_refusals_rank",
            1,
            spec,
            _page().TIMEOUT_S,
            "refusals",
        )
    return {k: v.removeprefix("train.py: ") for k, v in out[0].items()}


def _memory_rank(rank: int, world_size: int, fields: dict) -> dict:
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    train = _page().script()
    cfg = train.Config(**fields)
    dist.init_process_group("gloo")
    try:
        before = _resident()
        model = train.build_model(cfg, world_size, torch.device("cpu"))[0]
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
        shard = sum(
            (p.to_local() if isinstance(p, DTensor) else p).nbytes for p in model.parameters()
        )
        full = sum(p.numel() * p.element_size() for p in model.parameters())
    finally:
        dist.destroy_process_group()
    return {"rank": rank, "grown": grown, "shard": shard, "full": full}


def _resident() -> int:
    """This process's resident size now, in bytes (Linux)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def build_memory(cfg, world: int = 2) -> list[dict]:
    """Build `cfg`'s model on `world` ranks; return per rank the growth of its peak resident
    memory while building (bytes), its shard's bytes and the whole model's."""
    fields = dataclasses.asdict(cfg)
    return run_ranks(
        "gradflow_site.pages.train_guards:_memory_rank", world, fields, _page().TIMEOUT_S, "memory"
    )


def refusal_block(cfg) -> str:
    """Return what `refusals(cfg)` printed, as a console block (cfg runs 4 steps)."""
    messages = refusals(dataclasses.replace(cfg, steps=4, print_every=0)).values()
    return _page().console([], "\n".join(messages))
