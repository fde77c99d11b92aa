"""Frozen experiments' records, for the page builders: `load(name)` refuses a stale one.

`python -m tools.freeze NAME` runs `tools/experiments/NAME.py` and writes
`results/frozen/NAME.json` with the sha256 of every repository file the run imported or read.
`load` hashes those files again: a record whose code or data changed since it ran would show
numbers the code no longer produces, so it raises, and the strict build fails naming the file
and the command that reruns it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

__all__ = ["load"]

ROOT = Path(__file__).resolve().parents[1]


def _fingerprint(files: dict[str, str]) -> str:  # as tools/freeze.py computes it
    lines = "".join(f"{path} {digest}\n" for path, digest in sorted(files.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def load(name: str, root: Path | None = None) -> dict:
    """Return the record `results/frozen/<name>.json` after checking it against the files.

    Args:
        name: the experiment, `tools/experiments/<name>.py`.
        root: the repository (default: this checkout).

    Raises:
        FileNotFoundError: no such record.
        RuntimeError: a file the experiment imported or read differs from when it ran, or is
            gone; the message names it and the command that reruns the experiment.
    """
    root = ROOT if root is None else Path(root)
    rel = f"results/frozen/{name}.json"
    path = root / rel
    if not path.is_file():
        raise FileNotFoundError(
            f"{rel} does not exist; run `python -m tools.freeze {name}` and commit the record."
        )
    record = json.loads(path.read_text(encoding="utf-8"))
    files = record["files"]
    if _fingerprint(files) != record["fingerprint"]:
        raise RuntimeError(
            f"{rel} is corrupt: its fingerprint does not match its files; rerun "
            f"`{record['command']}` and commit the record."
        )
    for file, digest in sorted(files.items()):
        p = root / file
        if not p.is_file() or hashlib.sha256(p.read_bytes()).hexdigest() != digest:
            raise RuntimeError(
                f"{rel} is stale: {file} changed since it ran; rerun `{record['command']}` "
                "and commit the record."
            )
    return record
