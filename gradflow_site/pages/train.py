"""Build side of docs/train.md: snippets/train.py run by its own command lines, as a reader runs it.

Every run is train.py's `main(argv)` in ranks started as torchrun starts them (gradflow_ref._ranks:
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment), a world of one included, so the
build itself never starts a process group: torch keeps gloo's threads alive after one, and a rank
forked from such a process hangs. `command` prints the command line a run stands for, so the page
shows what produced each table. `one_and_two` trains a configuration on one process and on two
that split each step's sequences; `stop_and_resume` saves on two and resumes on one; `refusals`
collects what the guards print; `build_memory` measures what each rank holds while the model is
built on the meta device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import math
import re
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from gradflow_ref._ranks import run_ranks
from gradflow_ref.memory import GPT, MemoryConfig
from gradflow_ref.sharding import predict_fsdp2

# the guards' refusals and the build's memory, run in ranks of their own; read from here
from gradflow_site.pages.train_guards import (  # noqa: E402
    FLIPPED,
    build_memory,
    refusal_block,
    refusals,
)
from gradflow_site.render import table

__all__ = [
    "script",
    "text_bytes",
    "initial_losses",
    "flags",
    "command",
    "rank_main",
    "one_and_two",
    "largest_gap",
    "trajectory_table",
    "held_table",
    "predicted",
    "stop_and_resume",
    "resume_gap",
    "refusals",
    "refusal_block",
    "one_process",
    "two_processes",
    "small",
    "resume_config",
    "UNIFORM_LOSS",
    "SMALL",
    "RESUME",
    "SAVE_AT",
    "FLIPPED",
    "build_memory",
    "autocast_dtypes",
    "help_text",
    "console",
    "masked",
    "file_end",
]

SCRIPT = Path(__file__).resolve().parents[2] / "snippets" / "train.py"
# the page's runs: a 2-block, 64-wide GPT for 8 steps in FP32, progress every step
SMALL = dict(n_layers=2, hidden=64, seq_len=64, steps=8, precision="fp32", eval_every=4)
SMALL |= dict(print_every=1)
RESUME = dict(precision="fp16", lr=3e-2, warmup=2, print_every=10)  # FP16 that overflows
SAVE_AT = 6  # the step after which the stopped run saved
UNIFORM_LOSS = math.log(256)  # cross-entropy of a uniform guess over the 256 byte values
TIMEOUT_S = 300.0


def script():
    """Return snippets/train.py as the module `train` (imported once, as a reader imports it)."""
    if "train" not in sys.modules:
        spec = importlib.util.spec_from_file_location("train", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules["train"] = module
        spec.loader.exec_module(module)
    return sys.modules["train"]


def small():
    """Return the page's Config (SMALL)."""
    return script().Config(**SMALL)


def resume_config():
    """Return the Config of the page's stopped and resumed run (SMALL with RESUME)."""
    return script().Config(**SMALL | RESUME)


def text_bytes() -> int:
    """Return the length of the text train.py trains on by default, in bytes (= tokens)."""
    train_part, held_out, _ = script().load_text(script().Config())
    return len(train_part) + len(held_out)


def initial_losses(cfg) -> tuple[float, float]:
    """Return step 0's loss with PyTorch's default initialisation and with train.py's."""
    train = script()
    x, y = train.batch(train.load_text(cfg)[0], cfg, 0, 0, 0, 1, "cpu")
    torch.manual_seed(cfg.seed)
    model = train.GPT(cfg)  # each layer's own reset_parameters
    with torch.no_grad():
        default = model(x, y).item()
        train.init_weights(model, cfg, torch.device("cpu"))
        gpt2 = model(x, y).item()
    return default, gpt2


def flags(cfg) -> list[str]:
    """Return the command-line flags that make train.py's Config equal `cfg` (defaults left out)."""
    out = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if value == f.default:
            continue
        name = "--" + f.name.replace("_", "-")
        if f.type is bool:
            out.append(name if value else "--no-" + name[2:])
        else:
            out += [name, f"{value:g}" if f.type is float else str(value)]
    return out


def command(cfg, world: int) -> str:
    """Return the command line that runs `cfg` on `world` processes of this machine."""
    launch = "python" if world == 1 else f"torchrun --standalone --nproc-per-node {world}"
    return f"{launch} train.py {' '.join(flags(cfg))}".rstrip()


def ranks(cfg, world: int) -> list[dict]:
    """Run train.py's main with `cfg`'s flags on `world` processes; return each rank's result."""
    return run_ranks("gradflow_site.pages.train:rank_main", world, flags(cfg), TIMEOUT_S, "train")


def rank_main(rank: int, world_size: int, argv: list[str]) -> dict:
    """One rank of a run_ranks run: train.py's `main(argv)`, as torchrun runs it.

    Returns train.train's result with what the rank printed under "stdout".
    """
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = script().main(argv)
    return result | {"stdout": printed.getvalue()}


def one_and_two(cfg) -> dict:
    """Train `cfg` on one process and on two that each take half of its micro-batch.

    Returns {"one": result, "two": [rank 0's result, rank 1's], "commands": [the two command
    lines]}, results as train.train's.
    """
    if cfg.micro_batch % 2:
        raise ValueError(
            f"one_and_two: `cfg.micro_batch` must be even (two ranks take half each), got "
            f"{cfg.micro_batch}."
        )
    half = dataclasses.replace(cfg, micro_batch=cfg.micro_batch // 2)
    one, two = ranks(cfg, 1)[0], ranks(half, 2)
    return {"one": one, "two": two, "commands": [command(cfg, 1), command(half, 2)]}


def largest_gap(runs: dict) -> float:
    """Return the largest difference between the losses of one and of two processes."""
    return max(
        abs(a["loss"] - b["loss"]) for a, b in zip(runs["one"]["log"], runs["two"][0]["log"])
    )


def trajectory_table(runs: dict, every: int = 1) -> str:
    """Return a Markdown table of the training loss per step on one and on two processes."""
    rows = []
    for a, b in list(zip(runs["one"]["log"], runs["two"][0]["log"]))[::every]:
        gap = abs(a["loss"] - b["loss"])
        rows.append([a["step"], f"{a['loss']:.6f}", f"{b['loss']:.6f}", f"{gap:.1e}"])
    return table(["step", "one process", "two processes", "difference"], rows)


def predicted(cfg, world: int, rank: int):
    """Return gradflow_ref.sharding's prediction of what rank `rank` of `world` holds."""
    shape = MemoryConfig(cfg.n_layers, cfg.hidden, cfg.n_heads, cfg.seq_len, 1, 256)
    return predict_fsdp2([p.shape for p in GPT(shape).parameters()], world, rank)


def held_table(cfg, runs: dict) -> str:
    """Return a Markdown table of the bytes each rank holds, measured and predicted."""
    rows = []
    for result in [runs["one"], *runs["two"]]:
        p = predicted(cfg, result["world"], result["rank"])
        measured = result["held_bytes"]
        if list(measured) != [p.parameters, p.gradients, p.optimizer_states]:
            raise RuntimeError(  # the page says every count matches its prediction
                f"held_table: rank {result['rank']} of {result['world']} holds {measured} bytes, "
                f"predicted {p}"
            )
        rows.append(
            [f"{result['rank']} of {result['world']}"]
            + [
                f"{m:,} ({q:,})"
                for m, q in zip(measured, (p.parameters, p.gradients, p.optimizer_states))
            ]
        )
    return table(["rank", "parameters", "gradients", "AdamW states"], rows)


def stop_and_resume(cfg, save_at: int) -> dict:
    """Train `cfg` on two processes, saving after `save_at` steps; resume on two and on one.

    The two processes take half of `cfg.micro_batch` each, so every run sees the same batches.
    Returns {"full": the uninterrupted run's log, "two": the log of the run resumed on two
    processes, "one": the first step resumed on one, "commands": the three command lines, with
    the checkpoint folder named `ckpt`}.
    """
    if not 1 <= save_at < cfg.steps:
        raise ValueError(
            f"stop_and_resume: `save_at` must be from 1 to cfg.steps - 1 ({cfg.steps - 1}), "
            f"got {save_at}."
        )
    if cfg.micro_batch % 2:
        raise ValueError(
            f"stop_and_resume: `cfg.micro_batch` must be even (two ranks take half each), got "
            f"{cfg.micro_batch}."
        )
    half = dataclasses.replace(cfg, micro_batch=cfg.micro_batch // 2)
    runs = [  # the run, its resumption on two processes, and one step of it on one
        (dataclasses.replace(half, save_every=save_at), 2),
        (dataclasses.replace(half, resume=True), 2),  # saves nothing: save_every 0
        (dataclasses.replace(cfg, resume=True, max_seconds=1e-9), 1),
    ]
    logs = []
    with tempfile.TemporaryDirectory(prefix="gradflow-resume-") as ckpt:
        for i, (run, world) in enumerate(runs):
            logs.append(ranks(dataclasses.replace(run, ckpt_dir=ckpt), world)[0]["log"])
            if i == 0:  # as if the run had stopped after `save_at` steps
                for later in Path(ckpt).glob("step-*"):
                    if later.name != f"step-{save_at:06d}":
                        shutil.rmtree(later)
    full, two, one = logs
    if [r["step"] for r in two] != list(range(save_at, cfg.steps)) or one[0]["step"] != save_at:
        raise RuntimeError("stop_and_resume: a resumed run did not start at the saved step")
    commands = [command(dataclasses.replace(r, ckpt_dir="ckpt"), w) for r, w in runs[:2]]
    out = {"full": full, "two": two, "one": one[0], "commands": commands}
    out["skipped"] = [r["step"] for r in full if r["skipped"]]
    out["gap"] = resume_gap(out)
    out["one_gap"] = abs(one[0]["loss"] - full[save_at]["loss"])
    keys = ("lr", "loss_scale")
    same_state = all(one[0][k] == full[save_at][k] for k in keys)
    if not (out["skipped"] and max(out["skipped"]) < save_at and out["gap"] == 0 and same_state):
        raise RuntimeError(  # what the page says of these runs
            f"stop_and_resume: expected skipped steps before the save, a resumed run equal to "
            f"the uninterrupted one and the saved lr and scale on one process, got skipped "
            f"{out['skipped']}, gap {out['gap']}, one process {one[0]}"
        )
    return out


def resume_gap(runs: dict, keys=("loss", "grad_norm", "lr", "loss_scale")) -> float:
    """Return the largest difference between the steps resumed on two processes and the
    uninterrupted run's, over `keys`."""
    full = {r["step"]: r for r in runs["full"]}
    return max(abs(r[k] - full[r["step"]][k]) for r in runs["two"] for k in keys)


def autocast_dtypes() -> dict[str, str]:
    """Return the dtype softmax, layer norm and cross-entropy return under CPU autocast (BF16)."""
    x, target = torch.randn(4, 8, dtype=torch.bfloat16), torch.zeros(4, dtype=torch.long)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = {
            "softmax": torch.softmax(x, -1),
            "layer_norm": torch.nn.functional.layer_norm(x, (8,)),
            "cross_entropy": torch.nn.functional.cross_entropy(x, target),
        }
    return {k: str(v.dtype).removeprefix("torch.") for k, v in out.items()}


def one_process(runs: dict) -> str:
    """Return the one-process command of `runs` and what it printed (speeds elided)."""
    return console(runs["commands"][:1], masked(runs["one"]["stdout"]))


def two_processes(runs: dict) -> str:
    """Return the two-process command of `runs` and the table of both runs' losses."""
    return console(runs["commands"][1:]) + "\n\n" + trajectory_table(runs)


def help_text() -> str:
    """Return `python train.py --help` as a console code block."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.suppress(SystemExit):
        script().main(["--help"])
    return console(["python train.py --help"], printed.getvalue())


def console(commands: list[str], output: str = "") -> str:
    """Return a console code block: each command after `$ `, then what the last one printed."""
    lines = [f"$ {c}" for c in commands] + ([output.rstrip()] if output else [])
    return "```console\n" + "\n".join(lines) + "\n```"


def masked(stdout: str) -> str:
    """Return train.py's output with speeds and memory elided: they vary from run to run."""
    text = re.sub(r"\b(tokens_per_s|mfu) [0-9.e+-]+", r"\1 …", stdout)
    text = re.sub(r"peak \d+ MiB", "peak … MiB", text)
    return re.sub(r": [0-9,]+ tokens/s", ": … tokens/s", text)


def file_end() -> str:
    """Return what follows train.py's last section (its main guard), as a Python code block."""
    text = SCRIPT.read_text(encoding="utf-8")
    tail = text.rsplit("# --8<-- [end:main]\n", 1)[1].strip("\n")
    return f"```python\n{tail}\n```"
