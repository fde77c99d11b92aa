"""Regenerate requirements.txt from requirements.in for every supported Python (`make lock`).

Usage: python -m tools.lock PYTHON [PYTHON ...]

Each interpreter resolves requirements.in on its own (`pip install --dry-run --report` in a
fresh venv: nothing is installed, so no CUDA wheel is downloaded), and the results are merged
into one file: a pin every interpreter agrees on is written plainly, a pin that differs gets an
environment marker on `python_full_version` (for example pymdown-extensions 13 needs 3.11.5, so
Debian 12's Python 3.11.2 gets 12.3). torch's CUDA runtime (nvidia-*, cuda-*, triton) is left
out: the CPU build that CI installs does not need it, and a CUDA build brings its own.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUPPORTED = ("3.11", "3.12", "3.13")  # README and pyproject's requires-python say the same
HEADER = """\
# Pinned, complete environment for the site build and the test suite, for every supported
# Python (3.11.2 or later, 3.12, 3.13), generated from requirements.in by `make lock`
# (tools/lock.py). Markers pick a pin where the newest one needs a later Python. torch is pinned
# without a local version label so that the CPU build (2.13.0+cpu) satisfies it.
"""
CUDA_RUNTIME = re.compile(r"^(nvidia-|cuda-|triton$)")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def resolve(python: str, prefer: dict[str, str] | None = None) -> tuple[str, dict]:
    """Return `python`'s full version and {name: (version, requires_python)} of its resolution.

    With `prefer` ({name: version}), first try to resolve with those pins as constraints (so
    every Python gets the same versions where they install); when that fails, resolve freely.
    """
    with tempfile.TemporaryDirectory(prefix="gradflow-lock-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        report = Path(tmp) / "report.json"
        pip = [venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--dry-run"]
        cmd = [*pip, "--ignore-installed", "--report", str(report), "-r", ROOT / "requirements.in"]
        done = None
        if prefer:
            constraints = Path(tmp) / "constraints.txt"
            constraints.write_text("".join(f"{n}=={v}\n" for n, v in prefer.items()))
            done = subprocess.run([*cmd, "-c", str(constraints)], capture_output=True, text=True)
            if done.returncode:
                print(f"{python}: the lowest Python's pins do not all install; resolving freely")
        if done is None or done.returncode:
            subprocess.run(cmd, check=True)
        data = json.loads(report.read_text())
    version = data["environment"]["python_full_version"]
    pins = {}
    for item in data["install"]:
        meta = item["metadata"]
        name = meta["name"]
        if CUDA_RUNTIME.match(name.lower()):
            continue
        pins[name] = (meta["version"].split("+")[0], meta.get("requires_python") or "")
    return version, pins


def _name(requirement: str) -> str:
    """The lower-case project name a requirements line names ("" for a comment or blank)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement.split("#")[0])
    return match.group(1).lower().replace("_", "-") if match else ""


def _lower_bound(requires_python: str) -> str | None:
    match = re.search(r">=\s*([0-9][0-9.]*)", requires_python)
    return match.group(1) if match else None


def merge(resolved: list[tuple[str, dict[str, tuple[str, str]]]]) -> list[str]:
    """One line per pin; a pin that holds only for some interpreters gets a marker.

    `resolved` is sorted by Python version. A run of interpreters that agree on a pin covers the
    versions from the first of them (or from the pin's own Requires-Python lower bound, when
    that lies between the previous interpreter and this one) up to where the next run starts.
    """
    names = sorted({n for _, pins in resolved for n in pins}, key=str.lower)
    lines = []
    for name in names:
        runs: list[list] = []  # [start index, end index, version]
        for i, (_, pins) in enumerate(resolved):
            version = pins.get(name, (None, ""))[0]
            if runs and runs[-1][2] == version:
                runs[-1][1] = i
            else:
                runs.append([i, i, version])
        starts = []
        for start, _, version in runs:
            bound = resolved[start][0]
            if start and version is not None:
                lower = _lower_bound(resolved[start][1][name][1])
                if lower and _key(resolved[start - 1][0]) < _key(lower) <= _key(bound):
                    bound = lower
            starts.append(bound)
        for k, (start, end, version) in enumerate(runs):
            if version is None:
                continue
            marker = []
            if start:
                marker.append(f'python_full_version >= "{starts[k]}"')
            if end < len(resolved) - 1:
                marker.append(f'python_full_version < "{starts[k + 1]}"')
            line = f"{name}=={version}"
            lines.append(line + ("; " + " and ".join(marker) if marker else ""))
    return lines


def main(pythons: list[str]) -> None:
    # the lowest Python first: the others take its pins wherever those install
    found = {}
    for python in pythons:
        out = subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"],
            capture_output=True, text=True,
        )  # fmt: skip
        if out.returncode:
            print(f"make lock: skipping {python}, which does not run: {out.stderr.strip()}")
            continue
        found.setdefault(out.stdout.strip(), python)  # one interpreter per Python version
    order = sorted(found, key=_key)
    resolved = [resolve(found[order[0]])]
    top = {_name(line) for line in (ROOT / "requirements.in").read_text().splitlines()} - {""}
    prefer = {n: v for n, (v, _) in resolved[0][1].items() if _name(n) not in top}
    resolved += [resolve(found[v], prefer) for v in order[1:]]
    versions = [v for v, _ in resolved]
    missing = [s for s in SUPPORTED if not any(v.startswith(s + ".") for v in versions)]
    if missing:
        raise SystemExit(
            f"make lock: no interpreter for Python {', '.join(missing)} among {versions}; "
            "name one in LOCK_PYTHONS, e.g. make lock LOCK_PYTHONS='python3.11 python3.12 ...'"
        )
    text = HEADER + f"# Resolved with Python {', '.join(versions)}.\n" + "\n".join(merge(resolved))
    (ROOT / "requirements.txt").write_text(text + "\n")
    print(f"requirements.txt: resolved with Python {', '.join(versions)}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
