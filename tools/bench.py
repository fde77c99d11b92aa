"""Benchmark the guide's build and tests; print the figures the issues set budgets for.

Run with `make bench` (or `python -m tools.bench`). It measures, on this machine:
a clean strict build, the time `mkdocs serve` takes to show a prose-only edit, the whole test
suite, the size of every page (HTML, and the inline SVG inside it) and, last, the Lighthouse
scores of every page of that build (tools.lighthouse, stock mobile profile, median of
3 runs; about 7 minutes). Nothing is timed inside the test suite; these are figures to read,
with the budgets the issues set printed beside them (issue 17: a clean build in 20 s and
`make test` in 120 s on 2 cores; issue 8: a prose edit visible in 3 s, pages under 1.5 MB).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, NO_MKDOCS_2_WARNING="1", MPLBACKEND="Agg", OMP_NUM_THREADS="1")
COPY = [
    "docs",
    "snippets",
    "gradflow_ref",
    "gradflow_site",
    "results",
    "mkdocs.yml",
    "matplotlibrc",
    "overrides",
]


def _copy_tree(dest: Path) -> None:
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, dest / name)


def clean_build(site_dir: Path) -> float:
    """Return the wall time of a strict build into an empty `site_dir`, in seconds."""
    start = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--site-dir",
            str(site_dir),
        ],
        cwd=ROOT,
        env=dict(ENV, GRADFLOW_EXEC_CACHE="0"),  # clean: nothing from .cache/
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"bench: the strict build failed:\n{result.stdout}\n{result.stderr}")
    match = re.search(r"chapter runs: (.*)", result.stdout + result.stderr)
    if match:
        print(f"chapter runs in the clean build: {match.group(1)}")
    return elapsed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError):
        return None


def serve_edit_latency(page: str = "telephone", timeout: float = 300) -> tuple[float, float]:
    """Return (first build, seconds from a prose-only edit to the page served with it).

    Runs `mkdocs serve` on a copy of the sources, waits for the page, appends one sentence to
    docs/<page>.md and polls the served page until the sentence appears.
    """
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _copy_tree(work)
        port = _free_port()
        base = urlsplit(_site_url()).path.rstrip("/")
        url = f"http://127.0.0.1:{port}{base}/{page}/"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mkdocs",
                "serve",
                "--strict",
                "--dev-addr",
                f"127.0.0.1:{port}",
            ],
            cwd=work,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            start = time.perf_counter()
            while _get(url) is None:
                if time.perf_counter() - start > timeout or proc.poll() is not None:
                    sys.exit("bench: mkdocs serve did not come up")
                time.sleep(0.1)
            first = time.perf_counter() - start
            marker = f"Benchmark edit {time.time_ns()}."
            md = work / "docs" / f"{page}.md"
            md.write_text(md.read_text(encoding="utf-8") + f"\n{marker}\n", encoding="utf-8")
            edited = time.perf_counter()
            while marker not in (_get(url) or ""):
                if time.perf_counter() - edited > timeout:
                    sys.exit("bench: the edit never appeared in the served page")
                time.sleep(0.05)
            return first, time.perf_counter() - edited
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _site_url() -> str:
    match = re.search(r"^site_url:\s*(\S+)", (ROOT / "mkdocs.yml").read_text(), re.M)
    return match.group(1) if match else "/"


def test_suite() -> tuple[float, str, dict[str, float]]:
    """Return (seconds, pytest's closing line, seconds per test file) of the whole suite, run as
    `make test` runs it (-n auto, the shared build and the reproducibility test's second one,
    browser tests included, in the browser the tests find: Chromium's headless shell first).

    Per-file seconds add up the workers' time, so they exceed the wall-clock total.
    """
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-n", "auto", "--dist", "worksteal"]
    result = subprocess.run(
        cmd + ["-q", "-p", "no:cacheprovider", "--durations=0"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    per_file: dict[str, float] = {}
    pattern = r"^([0-9.]+)s\s+(?:setup|call|teardown)\s+(\S+?)::"
    for seconds, path in re.findall(pattern, result.stdout, re.M):
        per_file[path] = per_file.get(path, 0.0) + float(seconds)
    lines = [ln for ln in result.stdout.strip().splitlines() if ln.strip()]
    return elapsed, (lines[-1] if lines else f"pytest exited {result.returncode}"), per_file


def host_speed(seconds: float = 2.0) -> int:
    """Training steps a second on one thread, for a tiny model (16x16 matmul, tanh, backward).

    The machines this runs on are shared, and their speed drifts from hour to hour and from
    day to day, and the suite's time with it. The bench prints this figure before and after
    its timings: how fast the machine itself was while they ran.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x = torch.randn(16, 16, requires_grad=True)
        start, steps = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            (torch.tanh(x @ x) + 1).sum().backward()
            steps += 1
        return round(steps / (time.perf_counter() - start))
    finally:
        torch.set_num_threads(threads)


def page_sizes(site_dir: Path) -> list[tuple[str, int, int]]:
    """Return (page, HTML bytes, inline SVG bytes within it) for every built page."""
    rows = []
    for html in sorted(site_dir.rglob("index.html")):
        text = html.read_text(encoding="utf-8")
        svg = sum(len(m.encode()) for m in re.findall(r"<svg\b.*?</svg>", text, re.S))
        name = str(html.parent.relative_to(site_dir)) if html.parent != site_dir else "(home)"
        rows.append((name, html.stat().st_size, svg))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-tests", action="store_true", help="do not time the test suite")
    parser.add_argument("--skip-serve", action="store_true", help="do not time serve rebuilds")
    parser.add_argument(
        "--skip-lighthouse", action="store_true", help="do not run Lighthouse on the build"
    )
    args = parser.parse_args(argv)

    print(f"Gradient Flow benchmark on {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print(f"host speed before: {host_speed():,} tiny training steps a second on one core")
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        build = clean_build(site)
        print(f"clean strict build            {build:6.1f} s   (budget 20 s)")
        if not args.skip_serve:
            first, edit = serve_edit_latency()
            print(f"serve: first build            {first:6.1f} s")
            print(f"serve: prose edit -> visible  {edit:6.1f} s   (budget 3 s)")
        if not args.skip_tests:
            seconds, summary, per_file = test_suite()
            print(f"test suite (make test)        {seconds:6.1f} s   (budget 120 s) {summary}")
            for path, secs in sorted(per_file.items(), key=lambda kv: -kv[1]):
                print(f"    {path:<34}{secs:6.1f} s (summed over workers)")
        print()
        print(f"{'page':<20}{'HTML KiB':>10}{'inline SVG KiB':>16}")
        total = 0
        for name, html, svg in page_sizes(site):
            total += html
            print(f"{name:<20}{html / 1024:>10.1f}{svg / 1024:>16.1f}")
        print(f"{'all pages':<20}{total / 1024:>10.1f}")
        biggest = max(html for _, html, _ in page_sizes(site))
        print(f"largest page {biggest / 2**20:.2f} MB   (budget 1.5 MB a page)")
        print(f"host speed after: {host_speed():,} tiny training steps a second on one core")
        if not args.skip_lighthouse:
            from tools import lighthouse

            print()
            lighthouse.main([str(site)])  # prints its table; budget: 95 in perf, a11y and BP


if __name__ == "__main__":
    main()
