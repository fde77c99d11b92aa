"""Frozen experiments, one module each, rerun by `python -m tools.freeze [NAME ...]`.

Each module `tools/experiments/<name>.py` defines `run() -> dict` and
`replay(record, steps) -> list[float]`, and runs the code its page shows: `snippet` execs
sections of a `snippets/` file, so the record's fingerprint covers that file.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

__all__ = ["snippet"]

ROOT = Path(__file__).resolve().parents[2]


def snippet(path: str, *sections: str) -> dict:
    """Exec the named sections of snippet file `path`, in order, in one new namespace; return it.

    Raises:
        ValueError: the file has no section of one of those names.
    """
    text = (ROOT / path).read_text(encoding="utf-8")
    namespace: dict = {"__name__": f"snippet:{path}"}
    for name in sections:
        m = re.search(
            rf"^# --8<-- \[start:{re.escape(name)}\]\n(.*?)^# --8<-- \[end:{re.escape(name)}\]",
            text,
            re.M | re.S,
        )
        if m is None:
            raise ValueError(f"snippet: {path} has no section {name!r}.")
        exec(compile(textwrap.dedent(m.group(1)), f"{path}:{name}", "exec"), namespace)
    return namespace
