"""Rerun frozen experiments and write their records: `python -m tools.freeze [NAME ...]`.

An experiment is a module `tools/experiments/<name>.py` (found from the tree; a name starting
with `_` is a helper) that defines `run() -> dict`, the data and a `config` entry, and
`replay(record, steps) -> list[float]`. Each one runs alone in a fresh process pinned to one
thread, which records every repository file it imports or reads; the record
`results/frozen/<name>.json` holds those files' sha256, their fingerprint, the versions, the
device, the date and the wall time beside the data. `gradflow_site/records.py` refuses a record
whose files have changed since; /work/notes/FROZEN.md is the contract.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["RECORDS", "command", "device", "discover", "fingerprint", "freeze", "main", "sha256"]

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = "tools/experiments"
RECORDS = "results/frozen"
# what the record's own fields are called; an experiment's data may not use these names
META = ("name", "command", "fingerprint", "files", "versions", "device", "date", "wall_seconds")


def discover(root: Path = ROOT) -> list[str]:
    """Return the experiments' names: every `tools/experiments/<name>.py` not starting with `_`."""
    return sorted(p.stem for p in (root / EXPERIMENTS).glob("*.py") if not p.stem.startswith("_"))


def command(name: str) -> str:
    """Return the command that reruns experiment `name` (written into its record)."""
    return f"python -m tools.freeze {name}"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fingerprint(files: dict[str, str]) -> str:
    """Return the sha256 over `files` ({repo-relative path: sha256}), in path order."""
    lines = "".join(f"{path} {digest}\n" for path, digest in sorted(files.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def _in_repo(path: str, root: Path) -> str | None:
    """Return `path` relative to `root` if it is a repository file (not a virtualenv's or cache)."""
    p = Path(path).resolve()
    outside = (Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve())
    if not p.is_relative_to(root) or any(p.is_relative_to(o) for o in outside):
        return None
    if "__pycache__" in p.parts or "site-packages" in p.parts or not p.is_file():
        return None
    return p.relative_to(root).as_posix()


def device() -> str:
    """Describe where this process computes: the CUDA device it used, else the CPU and threads."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return f"cuda: {torch.cuda.get_device_name()}"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    threads = torch.get_num_threads() if torch is not None else 1
    return f"cpu: {cpu}, {threads} thread{'s' if threads != 1 else ''}"


def _run_child(name: str, root: str) -> tuple[dict, list[str], str, dict, float]:
    """In a fresh process: run experiment `name`, noting every repository file it touches."""
    root_path = Path(root)
    opened: set[str] = set()

    def audit(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], str | bytes | os.PathLike):
            opened.add(os.fsdecode(args[0]))

    sys.addaudithook(audit)
    before = set(sys.modules)
    start = time.perf_counter()
    module = importlib.import_module(f"tools.experiments.{name}")
    data = module.run()
    wall = time.perf_counter() - start
    for mod in set(sys.modules) - before:
        file = getattr(sys.modules[mod], "__file__", None)
        if file:
            opened.add(file)
    files = sorted({rel for f in opened if (rel := _in_repo(f, root_path))})
    torch = sys.modules.get("torch")
    versions = {"python": platform.python_version()}
    if torch is not None:
        versions["torch"] = torch.__version__
    return data, files, device(), versions, wall


def _check(name: str, data: object) -> dict:
    if not isinstance(data, dict) or "config" not in data:
        raise TypeError(
            f"tools/experiments/{name}.py: run() must return a dict with a 'config' entry (what "
            f"it ran) beside its data, got {type(data).__name__}"
            + (f" with keys {sorted(data)}" if isinstance(data, dict) else "")
            + "."
        )
    clash = sorted(set(data) & set(META))
    if clash:
        raise ValueError(
            f"tools/experiments/{name}.py: run()'s data uses the record's own field names "
            f"{clash}; rename them."
        )
    return data


def freeze(name: str, root: Path = ROOT) -> Path:
    """Run experiment `name` in a fresh one-thread process and write its record atomically.

    Returns:
        The record's path, `results/frozen/<name>.json` under `root`.

    Raises:
        ValueError: no experiment of that name, or its data is not JSON with finite numbers.
    """
    known = discover(root)
    if name not in known:
        raise ValueError(
            f"tools.freeze: no experiment {name!r}; the experiments are {known} "
            f"(each a module {EXPERIMENTS}/<name>.py)."
        )
    # a fresh interpreter: every module the experiment imports is imported anew and seen;
    # one thread: CPU float32 results then repeat bit for bit on the same machine and torch
    threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"  # the child reads it as it starts
    try:
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            data, files, where, versions, wall = pool.apply(_run_child, (name, str(root)))
    finally:
        if threads is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = threads
    data = _check(name, data)
    hashes = {f: sha256(root / f) for f in files}
    record = {
        "name": name,
        "command": command(name),
        "fingerprint": fingerprint(hashes),
        "files": hashes,
        "versions": versions,
        "device": where,
        "date": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "wall_seconds": round(wall, 1),
        **data,
    }
    try:
        text = json.dumps(record, indent=1, allow_nan=False) + "\n"
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"tools/experiments/{name}.py: run()'s data must be JSON with finite numbers "
            f"(store a diverged value as None): {e}"
        ) from None
    out = root / RECORDS / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, suffix=".tmp", delete=False) as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(f.name, out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.freeze", description=__doc__)
    parser.add_argument("names", nargs="*", help="experiments to rerun (default: all)")
    args = parser.parse_args(argv)
    names = args.names or discover()
    unknown = sorted(set(names) - set(discover()))
    if unknown:
        parser.error(f"no experiment {unknown}; the experiments are {discover()}")
    for name in names:
        print(f"{name}: running ({command(name)})", flush=True)
        out = freeze(name)
        record = json.loads(out.read_text(encoding="utf-8"))
        print(
            f"{name}: {record['wall_seconds']} s on {record['device']}; wrote "
            f"{out.relative_to(ROOT)} ({len(record['files'])} files fingerprinted)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
