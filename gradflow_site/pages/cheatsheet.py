"""Build side of docs/cheatsheet.md: the measured costs its tables quote.

`costs` runs the cost sections of snippets/cheatsheet.py (the code the page shows under "How the
costs were measured") in a namespace of its own, so the decision table at the top of the page
quotes exactly what that code computes. The committed speeds are gradflow_site/pages/bench.py's.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from types import SimpleNamespace

__all__ = ["COST_SECTIONS", "costs", "state_bytes_per_param"]

ROOT = Path(__file__).resolve().parents[2]
SNIPPET = ROOT / "snippets" / "cheatsheet.py"
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


def state_bytes_per_param() -> int:
    """Bytes of state per parameter in gradflow_ref.memory's default (autocast) layout, AdamW."""
    from gradflow_ref.memory import MemoryConfig, training_memory

    one = training_memory(MemoryConfig(n_params=1))
    return one.total - one.activations
