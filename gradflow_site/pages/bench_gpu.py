"""Build side of the sections `python -m tools.bench_gpu` added for issue 44: MFU and the fastest
layout (the cheat sheet), FP8 training with torchao against BF16 (chapter 5b) and
snippets/train.py on a GPU (chapter 7c).

They render a committed run that holds these sections (`bench.run("cuda", needs=...)`); the
runs committed so far predate them, so no page calls these yet.
"""

from __future__ import annotations

from gradflow_site.pages.bench import GIB, SDPA, STEP_NAMES, _mfu_cell, row
from gradflow_site.render import table

__all__ = [
    "fastest",
    "mfu",
    "step_title",
    "FP8_NAMES",
    "SCRIPT_NAMES",
    "fp8_figure",
    "fp8_loss_gap",
    "fp8_run",
    "fp8_speedup",
    "fp8_table",
    "script_run",
    "script_table",
]

FP8_NAMES = {  # fp8_training run -> its name in a table
    "bf16": "BF16 (`torch.autocast`)",
    "tensorwise": "FP8, one scale per tensor",
    "rowwise": "FP8, one scale per row",
}
SCRIPT_NAMES = {  # train_script run -> its name in a table
    "eager": "`train.py`",
    "compiled": "`train.py --compile`",
    "cpu": "`train.py` on the host's CPU",
}


def mfu(r: dict, section: str, name: str) -> float:
    """The model FLOPs utilisation of one measured row of `r`, against the run's stated peak.

    Raises:
        ValueError: the run has no such row, or no stated peak for its device.
    """
    value = row(r, section, name).get("mfu")
    if value is None:
        raise ValueError(
            f"mfu: {r['file']} has no MFU for {section!r} row {name!r}: the run predates MFU "
            "or knew no peak for its device (tools.bench_gpu --peak-tflops)."
        )
    return value


def fastest(r: dict, section: str, names) -> str:
    """The name, of `names`, of the row of `section` with the shortest step."""
    return min(names, key=lambda name: row(r, section, name)["step_seconds"])


def step_title(name: str) -> str:
    """A training-step row's name in words: "`torch.autocast(bfloat16)`, FP32 weights, SDPA"."""
    base = name.removesuffix(SDPA)
    if base not in STEP_NAMES:
        raise ValueError(f"step_title: `name` must be one of {list(STEP_NAMES)}, with or "
                         f"without {SDPA!r}, got {name!r}.")  # fmt: skip
    return STEP_NAMES[base] + (", `F.scaled_dot_product_attention`" if name != base else "")


def fp8_run(r: dict, name: str) -> dict:
    """One run of `r`'s FP8 section: "bf16", "tensorwise" or "rowwise".

    Raises:
        ValueError: the run has no FP8 section, it was skipped, or that run failed.
    """
    section = r.get("fp8_training") or {}
    runs = section.get("runs", {})
    if name not in runs or "error" in runs[name]:
        why = section.get("skipped") or "not measured"
        raise ValueError(f"fp8_run: {r['file']} has no FP8 training run {name!r} ({why}).")
    return runs[name]


def fp8_speedup(r: dict, recipe: str) -> float:
    """BF16's step time over `recipe`'s: above 1, FP8 was faster."""
    return fp8_run(r, "bf16")["step_seconds"] / fp8_run(r, recipe)["step_seconds"]


def fp8_loss_gap(r: dict, recipe: str) -> float:
    """`recipe`'s final loss (mean of the last tenth of the steps) minus BF16's."""
    return fp8_run(r, recipe)["final_loss"] - fp8_run(r, "bf16")["final_loss"]


def fp8_table(r: dict) -> str:
    """BF16 and the FP8 recipes of `r`: time, tokens/s, MFU, speed, peak memory, final loss."""
    rows = []
    for name, title in FP8_NAMES.items():
        x = fp8_run(r, name)
        gap = "–" if name == "bf16" else f"{fp8_loss_gap(r, name):+.3f}"
        rows.append(
            [
                title,
                f"{x['step_seconds'] * 1e3:.1f}",
                f"{x['tokens_per_second']:,.0f}",
                _mfu_cell(x),
                f"{fp8_speedup(r, name):.2f}×",
                "–" if x["peak_bytes"] is None else f"{x['peak_bytes'] / GIB:.1f}",
                f"{x['final_loss']:.3f}",
                gap,
            ]
        )
    headers = ["precision", "ms per step", "tokens per s", "MFU", "speed vs BF16", "peak GiB"]
    headers += ["final loss", "vs BF16"]
    return table(headers, rows, align="lrrrrrrr")


def fp8_figure(r: dict, window: int = 10) -> str:
    """The loss of every step of `r`'s BF16 and FP8 runs (a moving mean over `window` steps)."""
    import matplotlib.pyplot as plt

    from gradflow_site.render import svg

    fig, ax = plt.subplots(figsize=(7, 3))
    for (name, title), style in zip(FP8_NAMES.items(), ("-", "--", ":")):
        losses = fp8_run(r, name)["losses"]
        k = max(1, min(window, len(losses)))
        mean = [sum(losses[i - k + 1 : i + 1]) / k for i in range(k - 1, len(losses))]
        ax.plot(range(k - 1, len(losses)), mean, style, linewidth=1.4, label=title.replace("`", ""))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(f"training loss (mean of {window} steps)")
    ax.legend(frameon=False)
    return svg(fig)


# ------------------------------------------------------------------ train.py (chapter 7c)


def script_run(r: dict, name: str) -> dict:
    """One run of snippets/train.py in `r`: "eager", "compiled" or "cpu".

    Raises:
        ValueError: the run did not measure train.py, skipped that run, or it failed.
    """
    section = r.get("train_script") or {}
    x = section.get("runs", {}).get(name)
    if x is None or "skipped" in x or x.get("returncode") or not x.get("losses"):
        why = (x or {}).get("skipped") or section.get("error", "not measured").splitlines()[-1]
        raise ValueError(f"script_run: {r['file']} has no train.py run {name!r} ({why}).")
    return x


def script_table(r: dict) -> str:
    """train.py's runs in `r`: tokens/s, MFU, peak memory, and the loss of its first steps
    against the reference run's (on a GPU, the same seed on the CPU)."""
    section = r["train_script"]
    ref = section["reference"]
    k = max((a["steps"] for a in section["agreement"].values()), default=0)
    rows = []
    for name, title in SCRIPT_NAMES.items():
        if name not in section["runs"] or "skipped" in section["runs"][name]:
            continue
        x = script_run(r, name)
        agree = section["agreement"].get(name)
        rate = x["tokens_per_second"]
        rows.append(
            [
                title,
                x["steps_done"],
                "–" if rate is None else f"{rate:,.0f}",
                _mfu_cell(x),
                "–" if x["peak_mib"] is None else f"{x['peak_mib']:,.0f}",
                f"{x['losses'][min(k, len(x['losses'])) - 1]:.4f}",
                "reference"
                if name == ref
                else ("–" if agree is None else f"{agree['max_abs_diff']:.1e}"),
            ]  # fmt: skip
        )
    headers = ["run", "steps", "tokens per s", "MFU", "peak MiB", f"loss at step {k}"]
    headers.append(f"largest loss difference, steps 1 to {k}")
    return table(headers, rows, align="lrrrrrr")
