"""Build side of the committed benchmark runs: tables, figures and labels for chapters 5b, 6,
7, 7b, 7c and the cheat sheet.

`python -m tools.bench_gpu` measures checkpointing, the training step, FP8 training and
snippets/train.py on one device and writes results/bench-<device>.json; gradflow_ref.benchmarks
reads those files. Nothing here is measured while the site is built: every figure names the run
it comes from (`label`). A builder renders what a run holds: runs from before SDPA, MFU and FP8
were measured render as they always have.
"""

from __future__ import annotations

from gradflow_ref.benchmarks import committed_runs
from gradflow_site.render import table

__all__ = [
    "STEP_NAMES",
    "MODE_NAMES",
    "COMPILED_NAMES",
    "run",
    "label",
    "model_label",
    "row",
    "ratio",
    "sweep_ratio",
    "gib",
    "memory_gaps",
    "selective_extra_mib",
    "mib_range",
    "logits_gib",
    "linear_outputs_mib",
    "step_table",
    "checkpoint_table",
    "mlp_table",
    "memory_table",
    "timeline_figure",
]

GIB = 2**30
MIB = 2**20
STEP_NAMES = {  # training_step variant -> its name in a table
    "fp32": "FP32",
    "tf32": "FP32 weights, TF32 matmuls",
    "autocast_bf16": "`torch.autocast(bfloat16)`, FP32 weights",
    "trainer_bf16": "BF16 weights, FP32 masters (`Trainer`)",
    "autocast_fp16": "`torch.autocast(float16)` + `GradScaler`",
}
MODE_NAMES = {  # gpt_checkpointing mode -> its name in a table
    "none": "no checkpointing",
    "block": "every block",
    "sqrt": "√N segments",
    "selective": "every block, selective",
}
COMPILED_NAMES = {  # gpt_checkpointing rows with every block under torch.compile
    "none_compiled": "no checkpointing, `torch.compile`",
    "block_compiled": "every block, `torch.compile`",
    "selective_compiled": "every block, selective, `torch.compile`",
}
SDPA = "_sdpa"  # training_step rows with attention through F.scaled_dot_product_attention


def _measured(r: dict, section: str) -> bool:
    return isinstance(r.get(section), dict) and not {"error", "skipped"} & set(r[section])


def run(device_type: str = "cuda", needs: str | None = None) -> dict:
    """Return the newest committed run (by date, then file name) made on `device_type`.

    Args:
        device_type: "cuda" or "cpu".
        needs: a section the run must have measured (e.g. "fp8_training"); None: any run.

    Raises:
        ValueError: no such run is committed under results/.
    """
    runs = [x for x in committed_runs(device_type) if needs is None or _measured(x, needs)]
    if not runs:
        what = "" if needs is None else f" with a measured {needs!r} section"
        raise ValueError(
            f"run: no committed benchmark on {device_type!r}{what}; run `python -m "
            f"tools.bench_gpu --device {device_type}` there and commit the JSON it writes under "
            "results/."
        )
    return max(runs, key=lambda x: (x["date"], x["file"]))


def label(r: dict, *packages: str) -> str:
    """Where and when `r` was measured, e.g. "NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, ...".

    Args:
        packages: further versions to name, from the run's "versions" (e.g. "torchao").

    Raises:
        ValueError: the run recorded no version of one of `packages`.
    """
    parts = [r["device"]]
    if r["device_type"] == "cpu":
        threads = r.get("cpu_threads", 1)
        parts.append(f"{threads} thread" + ("" if threads == 1 else "s"))
    parts.append(f"torch {r['torch']}")
    if r.get("cuda"):
        parts.append(f"CUDA {r['cuda']}")
    for name in packages:
        version = r.get("versions", {}).get(name)
        if version is None:
            raise ValueError(f"label: {r['file']} recorded no version of {name!r}.")
        parts.append(f"{name} {version}")
    parts += [r["date"], f"results/{r['file']}"]
    return ", ".join(parts)


def model_label(r: dict) -> str:
    """The GPT the step and checkpointing runs of `r` trained, in words."""
    g = r["gpt"]
    return (
        f"a {g['n_params'] / 1e6:.0f}M-parameter GPT ({g['n_layers']} layers, hidden size "
        f"{g['hidden']}, {g['n_heads']} heads, {g['micro_batch']} sequences of {g['seq_len']:,} "
        f"tokens, vocabulary {g['vocab']:,}, attention without a fused kernel)"
    )


def row(r: dict, section: str, name: str) -> dict:
    """One measured row of `r`: section "training_step" or "gpt_checkpointing", a variant name.

    Raises:
        ValueError: the run has no such row, or that row failed when it was measured.
    """
    rows = r.get(section, {}).get("rows", {})
    if name not in rows or "error" in rows[name]:
        raise ValueError(
            f"row: {r['file']} has no measured {section!r} row {name!r}; rerun "
            "`python -m tools.bench_gpu` on that device."
        )
    return rows[name]


def ratio(r: dict, section: str, a: str, b: str, field: str = "step_seconds") -> float:
    """`field` of row `a` over that of row `b` in `section` of run `r`."""
    return row(r, section, a)[field] / row(r, section, b)[field]


def gib(r: dict, section: str, name: str, field: str = "forward_held_bytes") -> float:
    """`field` (bytes) of one measured row of `r`, in GiB."""
    return row(r, section, name)[field] / GIB


def memory_gaps(r: dict) -> dict:
    """How far the GPU's memory was from gradflow_ref.memory's count, per layout of `r`.

    Returns:
        {"state_mib": (smallest, largest) excess of the measured weights and states over the
        count, "activation_mib": the largest |measured - predicted| activations of the
        one-dtype layouts (FP32, Trainer's BF16), "autocast": measured over predicted
        activations under autocast}.
    """
    check = r["memory_check"]
    excess = [
        (m["measured_state_bytes"] - m["predicted"]["weights"] - m["predicted"]["master_weights"]
         - m["predicted"]["optimizer_states"]) / MIB
        for m in check.values()
    ]  # fmt: skip
    gaps = [
        abs(check[k]["measured_forward_held_bytes"] - check[k]["predicted"]["activations"]) / MIB
        for k in ("fp32", "trainer_bf16")
    ]
    auto = check["autocast_bf16"]
    return {
        "state_mib": (min(excess), max(excess)),
        "activation_mib": max(gaps),
        "autocast": auto["measured_forward_held_bytes"] / auto["predicted"]["activations"],
    }


def selective_extra_mib(r: dict) -> float:
    """MiB per block that the selective policy held beyond checkpointing whole blocks, in `r`."""
    extra = gib(r, "gpt_checkpointing", "selective") - gib(r, "gpt_checkpointing", "block")
    return extra * GIB / MIB / r["gpt"]["n_layers"]


def linear_outputs_mib(r: dict, itemsize: int = 2) -> float:
    """MiB of one block's linear-layer outputs in `r`'s GPT: 9h values per token (3h for Q, K
    and V, h for the output projection, 4h and h for the MLP), `itemsize` bytes each."""
    g = r["gpt"]
    return 9 * g["hidden"] * g["seq_len"] * g["micro_batch"] * itemsize / MIB


def mib_range(r: dict) -> str:
    """The excess of the measured states over the count, as "66" or "60 to 66" (MiB)."""
    low, high = (f"{v:.0f}" for v in memory_gaps(r)["state_mib"])
    return low if low == high else f"{low} to {high}"


def logits_gib(r: dict) -> float:
    """GiB of one FP32 value per vocabulary entry per token of `r`'s micro-batch."""
    g = r["gpt"]
    return g["micro_batch"] * g["seq_len"] * g["vocab"] * 4 / GIB


def sweep_ratio(r: dict, k: int) -> float:
    """Time of the MLP sweep of `r` with segments of `k` layers over the time without.

    Raises:
        ValueError: the sweep has no segment length `k`.
    """
    rows = {x["k"]: x for x in r["checkpointing"]["rows"]}
    if k not in rows:
        raise ValueError(f"sweep_ratio: `k` must be one of {sorted(rows)}, got {k!r}.")
    return rows[k]["seconds"] / rows[r["checkpointing"]["n_layers"]]["seconds"]


def _has(r: dict, section: str, name: str) -> bool:
    rows = r.get(section, {}).get("rows", {})
    return name in rows and "error" not in rows[name]


def _mfu_cell(x: dict) -> str:
    return "–" if x.get("mfu") is None else f"{x['mfu']:.0%}"


def step_table(r: dict) -> str:
    """The training-step variants of `r`: time, tokens per second, speed against FP32, peak.

    A run that measured them adds a row per variant with attention through
    F.scaled_dot_product_attention (speed against FP32 with the same attention) and the MFU.
    """
    section = "training_step"
    sdpa = any(_has(r, section, name + SDPA) for name in STEP_NAMES)
    has_mfu = any(x.get("mfu") is not None for x in r[section]["rows"].values())
    rows = []
    for suffix in ("", SDPA) if sdpa else ("",):
        for name, title in STEP_NAMES.items():
            x = row(r, section, name + suffix)
            speed = ratio(r, section, "fp32" + suffix, name + suffix)
            cells = [title] + (["`F.scaled_dot_product_attention`" if suffix else "written out"]
                               if sdpa else [])  # fmt: skip
            cells += [f"{x['step_seconds'] * 1e3:.1f}", f"{x['tokens_per_second']:,.0f}"]
            cells += [_mfu_cell(x)] if has_mfu else []
            cells += [f"{speed:.2f}×", f"{x['peak_bytes'] / GIB:.1f}"]
            rows.append(cells)
    headers = ["precision", *(["attention"] if sdpa else []), "ms per step", "tokens per s"]
    headers += [*(["MFU"] if has_mfu else []), "speed vs FP32", "peak GiB"]
    return table(headers, rows, align="l" + "l" * sdpa + "r" * (len(headers) - 1 - sdpa))


def checkpoint_table(r: dict) -> str:
    """The checkpointing modes of `r`: memory held for backward, peak, time against none.

    A run that measured them adds the modes with every block under torch.compile, timed
    against no checkpointing under torch.compile.
    """
    section = "gpt_checkpointing"
    names = dict(MODE_NAMES)
    names |= {k: v for k, v in COMPILED_NAMES.items() if _has(r, section, k)}
    rows = []
    for name, title in names.items():
        x = row(r, section, name)
        held, peak = x["forward_held_bytes"] / GIB, x["peak_bytes"] / GIB
        time = ratio(r, section, name, "none_compiled" if name.endswith("_compiled") else "none")
        rows.append(
            [title, f"{held:.1f}", f"{peak:.1f}", f"{x['step_seconds'] * 1e3:.1f}", f"{time:.2f}×"]
        )
    headers = ["checkpointing", "held for backward, GiB", "peak GiB", "ms per step", "time"]
    return table(headers, rows, align="lrrrr")


def mlp_table(r: dict) -> str:
    """The MLP sweep of `r`: segment length, activations held, recomputed layers, peak, time."""
    sweep = r["checkpointing"]
    plain = sweep["rows"][0]
    rows = [
        [
            x["k"],
            f"{x['saved_activations']:.0f}",
            x["recomputed"],
            "–" if x["torch_peak_bytes"] is None else f"{x['torch_peak_bytes'] / MIB:,.0f}",
            f"{x['seconds'] * 1e3:.1f}",
            f"{x['seconds'] / plain['seconds']:.2f}×",
        ]
        for x in sweep["rows"]
    ]
    headers = ["K", "activations held", "recomputed", "peak MiB", "ms", "time"]
    return table(headers, rows, align="rrrrrr")


def memory_table(r: dict) -> str:
    """gradflow_ref.memory's prediction beside what the GPU held, for three layouts of `r`."""
    names = {
        "fp32": "FP32",
        "autocast_bf16": "`torch.autocast(bfloat16)`, FP32 weights",
        "trainer_bf16": "BF16 weights, FP32 masters (`Trainer`)",
    }
    rows = []
    for name, title in names.items():
        m = r["memory_check"][name]
        p = m["predicted"]
        state = p["weights"] + p["master_weights"] + p["optimizer_states"]
        rows.append(
            [
                title,
                f"{state / MIB:,.0f}",
                f"{m['measured_state_bytes'] / MIB:,.0f}",
                f"{p['activations'] / MIB:,.0f}",
                f"{m['measured_forward_held_bytes'] / MIB:,.0f}",
            ]
        )
    headers = [
        "layout",
        "weights and states, predicted MiB",
        "measured",
        "activations, predicted MiB",
        "measured",
    ]
    return table(headers, rows, align="lrrrr")


def timeline_figure(r: dict) -> str:
    """Allocated memory over one training step of `r`, its phases shaded; an inline SVG."""
    import matplotlib.pyplot as plt

    from gradflow_site.render import svg

    t = r["memory_timeline"]
    xs = [i for i, _ in t["series"]]
    ys = [b / GIB for _, b in t["series"]]
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot(xs, ys, color="C0", linewidth=1.2)
    ax.axhline(t["base_bytes"] / GIB, color="grey", linewidth=0.8, linestyle=":")
    phases = t["phases"]
    spans = [("forward", "backward"), ("backward", "optimizer"), ("optimizer", "end")]
    for (start, stop), shade in zip(spans, ("#dde7f5", "#f5e6d8", "#e0f0dd")):
        ax.axvspan(phases[start], phases[stop], color=shade, zorder=0)
        ax.text((phases[start] + phases[stop]) / 2, 0.97 * max(ys), start, ha="center", va="top")
    ax.set_xlim(0, t["events"])
    ax.set_ylim(0, 1.08 * max(ys))
    ax.set_xlabel("allocator event (allocations and frees, in order)")
    ax.set_ylabel("allocated GiB")
    return svg(fig)


# ------------------------------------------------------------------ FP8 training (chapter 5b)
