"""Build side of docs/cheatsheet.md: the measured costs its tables quote, and committed timings.

`costs` runs the cost sections of snippets/cheatsheet.py (the code the page shows under "How the
costs were measured") in a namespace of its own, so the decision table at the top of the page
quotes exactly what that code computes. `committed_speed` reads the BF16-versus-FP32 timings
committed under results/ by `python -m tools.bench_gpu`, with the machine each was
measured on: they are not measured when the site is built.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from types import SimpleNamespace

__all__ = ["COST_SECTIONS", "committed_speed", "costs", "ratio", "speed_label"]

ROOT = Path(__file__).resolve().parents[2]
SNIPPET = ROOT / "snippets" / "cheatsheet.py"
RESULTS = ROOT / "results"
COST_SECTIONS = ("setup", "checkpoint_costs", "memory_costs")  # in page order


def costs(snippet: Path = SNIPPET) -> SimpleNamespace:
    """Run the cost sections of `snippet` and return the values they computed.

    Returns:
        A namespace with every name the sections define (ckpt_memory, ckpt_compute, ckpt64,
        activation_ratio, weight_ratio, accum_memory, ...). What the sections print is dropped.

    Raises:
        ValueError: `snippet` lacks one of COST_SECTIONS.
    """
    from gradflow_site.labs import sections

    found = dict(sections(snippet))
    missing = [name for name in COST_SECTIONS if name not in found]
    if missing:
        raise ValueError(
            f"costs: {snippet} has no section {missing[0]!r}; add it between "
            f"'# --8<-- [start:{missing[0]}]' and '# --8<-- [end:{missing[0]}]'."
        )
    namespace: dict = {"__name__": "cheatsheet_costs"}
    with contextlib.redirect_stdout(io.StringIO()):
        for name in COST_SECTIONS:
            exec(compile(found[name], f"{snippet}:{name}", "exec"), namespace)  # noqa: S102
    return SimpleNamespace(**{k: v for k, v in namespace.items() if not k.startswith("__")})


def committed_speed(results: Path = RESULTS) -> list[dict]:
    """Return one record per committed benchmark: BF16 autocast speed relative to FP32.

    Each record holds `ratio` (FP32 time / BF16 time: above 1 means BF16 is faster), `device`,
    `device_type` ("cpu" or "cuda"), `threads`, `torch`, `date` and `file` (the JSON's name).

    Raises:
        ValueError: a bench-*.json file lacks a field the record needs.
    """
    out = []
    for path in sorted(results.glob("bench-*.json")):
        run = json.loads(path.read_text(encoding="utf-8"))
        try:
            times = run["precision"]
            out.append(
                {
                    "ratio": times["float32"] / times["bfloat16"],
                    "device": run["device"],
                    "device_type": run["device_type"],
                    "threads": run.get("cpu_threads"),
                    "torch": run["torch"],
                    "date": run["date"],
                    "file": path.name,
                }
            )
        except KeyError as err:
            raise ValueError(
                f"committed_speed: {path.name} has no field {err}; rerun "
                "`python -m tools.bench_gpu` to write a complete result."
            ) from None
    return out


def speed_label(records: list[dict], device_type: str = "cpu") -> str:
    """Return the committed BF16 speeds on `device_type`, each with where and when it was measured.

    Example: "0.33x FP32's speed on Intel(R) Xeon(R) Processor @ 2.50GHz (1 thread, torch
    2.13.0+cpu, 2026-11-22; results/bench-cpu-....json)".
    """
    parts = []
    for r in records:
        if r["device_type"] != device_type:
            continue
        threads = "" if r["threads"] is None else f"{r['threads']} thread"
        threads += "" if r["threads"] in (None, 1) else "s"
        where = ", ".join(p for p in (threads, f"torch {r['torch']}", r["date"]) if p)
        parts.append(
            f"{r['ratio']:.2f}x FP32's speed on {r['device']} ({where}; results/{r['file']})"
        )
    return "; ".join(parts) or f"no committed {device_type} result"


def ratio(records: list[dict], device_type: str = "cpu") -> float:
    """Return the BF16/FP32 speed ratio of the first committed record on `device_type`.

    Raises:
        ValueError: no committed record is for `device_type`.
    """
    for r in records:
        if r["device_type"] == device_type:
            return r["ratio"]
    raise ValueError(
        f"ratio: no committed result for device_type {device_type!r}; run "
        f"`python -m tools.bench_gpu --device {device_type}` and commit its JSON."
    )
