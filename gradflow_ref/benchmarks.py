"""Benchmark runs committed with the package, found wherever gradflow_ref is installed.

`python -m tools.bench_gpu` (in the repository) times checkpointing, the pipeline and the
precisions on one device and writes results/bench-<device>.json; those files ship inside the
package as gradflow_ref/committed/ and are read here with importlib.resources, so a script or
notebook that shows them prints the same runs in a checkout, after `pip install`, or in Colab.
"""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["committed_runs"]


def committed_runs(device_type: str | None = None) -> list[dict]:
    """Return the committed benchmark runs, ordered by file name, each with its "file" name.

    Args:
        device_type: keep only runs on "cuda" or on "cpu"; None keeps every run.

    Raises:
        ValueError: `device_type` is not None, "cuda" or "cpu".

    >>> runs = committed_runs("cpu")
    >>> all(run["device_type"] == "cpu" and run["file"].startswith("bench-") for run in runs)
    True
    """
    if device_type is not None and not isinstance(device_type, str):
        raise TypeError(
            f"committed_runs: `device_type` must be None, 'cuda' or 'cpu', got "
            f"{type(device_type).__name__} {device_type!r:.40}."
        )
    if device_type not in (None, "cuda", "cpu"):
        raise ValueError(
            f"committed_runs: `device_type` must be None, 'cuda' or 'cpu', got {device_type!r}."
        )
    folder = resources.files("gradflow_ref") / "committed"
    if not folder.is_dir():
        return []
    runs = []
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if item.name.startswith("bench-") and item.name.endswith(".json"):
            run = json.loads(item.read_text(encoding="utf-8"))
            if device_type is None or run.get("device_type") == device_type:
                runs.append({**run, "file": item.name})
    return runs
