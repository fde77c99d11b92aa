"""Helpers shared by the tests: run mkdocs in a subprocess and capture its log; give a test run
a temporary directory of its own and find the processes it left (conftest's leftover check).

`start_run()` (conftest's pytest_configure, controller only) points TMPDIR at a fresh directory
of the run's own and tags the environment, which every xdist worker, build and subprocess
inherits; pytest's own tmp_path folders stay where pytest keeps them (PYTEST_DEBUG_TEMPROOT).
`finish_run()` (after the workers have stopped) lists what the run left there and which tagged
processes still live, then removes the directory, so the system's temporary directory gets no
new entry.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# mkdocs.yml's hooks, in its order (a child config names them by absolute path)
HOOKS = [ROOT / "gradflow_site" / "reproducible.py", ROOT / "gradflow_site" / "hooks.py"]


def mkdocs_build(
    site_dir: Path,
    config: Path | None = None,
    timeout: int = 240,
    cache: bool = False,
    nice: int = 0,
    parallel: bool = True,
    runner=None,
):
    """Run `mkdocs build --strict` from the repository root; return the CompletedProcess.

    The execution cache is off unless `cache` is true: tests build clean, as CI does. A build
    with `nice` > 0 yields the CPU to everything else (it runs in the gaps of the other tests).
    `parallel=False` renders every chapter in the build process (gradflow_site/parallel.py).
    With `runner` (the `build_runner` fixture) the build runs in a process forked from one that
    has imported MkDocs and torch, as `python -m mkdocs` runs in a new one.
    """
    tmp = Path(f"{site_dir}.tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        NO_MKDOCS_2_WARNING="1",
        MPLBACKEND="Agg",
        OMP_NUM_THREADS="1",
        GRADFLOW_EXEC_CACHE="1" if cache else "0",
        # what every shown code block printed, for tests/test_copy_run.py
        GRADFLOW_SHOWN_BLOCKS=f"{site_dir}.shown.json",
        # a temporary directory of its own: tests/test_leftovers.py checks it is left empty,
        # and a tag its processes inherit: that test checks none is alive after the build
        TMPDIR=str(tmp),
        GRADFLOW_BUILD=str(site_dir),
        GRADFLOW_PARALLEL="1" if parallel else "0",
    )
    args = ["build", "--strict", "--site-dir", str(site_dir)]
    if config is not None:
        args += ["--config-file", str(config)]
    if runner is not None and not nice:
        argv = ["mkdocs", *args]
        return runner.run("mkdocs", ROOT, env, timeout, argv=argv, module="mkdocs", path0=str(ROOT))
    cmd = [sys.executable, "-m", "mkdocs", *args]
    if nice and shutil.which("nice"):
        cmd = ["nice", "-n", str(nice), *cmd]
    idle = _idle_class if nice and hasattr(os, "SCHED_IDLE") else None
    return subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=idle
    )


def _idle_class() -> None:
    """(In the build's process, before it runs mkdocs.) Put it in Linux's idle scheduling class,
    which its children inherit: a process of any other class that wakes on its core takes it
    from the build at once (nice 19 alone only makes the build's share small). Paired runs of
    the whole suite on 2 cores: 121.5 and 121.6 s beside a nice 19 second build, 119.7 and
    120.7 s beside this one (111.1 and 113.3 s without the second build)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except OSError:  # a sandbox that forbids it: nice alone, as before
        pass


def build_to_log(site_dir: Path, log: Path, **build) -> None:
    """Build the site into `site_dir` (mkdocs_build's keywords); then write `log`: the exit
    code, a newline, the output.

    The log appears whole (written beside, then renamed), so a reader that sees it can use it.
    """
    try:
        result = mkdocs_build(site_dir, **build)
        text = f"{result.returncode}\n{result.stdout}\n{result.stderr}"
    except Exception as exc:  # a timeout or a build that cannot start: the waiters must know
        text = f"1\nthe build did not finish: {exc!r}"
    partial = log.with_name(log.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(log)


def start_build(site_dir: Path, log: Path, **build) -> subprocess.Popen:
    """Start build_to_log in a process of its own; return it (the starter must wait for it)."""
    code = (
        "import json, sys; from pathlib import Path; from tests._site import build_to_log; "
        "build_to_log(Path(sys.argv[1]), Path(sys.argv[2]), **json.loads(sys.argv[3]))"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(site_dir), str(log), json.dumps(build)], cwd=ROOT
    )


def wait_for_log(log: Path, builder: subprocess.Popen | None, timeout: float = 600) -> str:
    """Wait until `log` exists (another process may be building); return its text."""
    deadline = time.monotonic() + timeout
    while not log.exists():
        if builder is not None and builder.poll() is not None and not log.exists():
            return f"1\nthe build process exited {builder.returncode} without a log"
        if time.monotonic() > deadline:
            return f"1\nno site build finished within {timeout:.0f} s ({log} never appeared)"
        time.sleep(0.2)
    return log.read_text(encoding="utf-8")


def child_config(
    tmp: Path, pages: dict[str, str], nav: list[str] | None = None, extra: str = ""
) -> Path:
    """Write a config that inherits mkdocs.yml but builds `pages` (name -> Markdown) instead."""
    docs = tmp / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (docs / name).write_text(text, encoding="utf-8")
    nav = list(pages) if nav is None else nav
    cfg = tmp / "mkdocs.yml"
    cfg.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\n"
        f"docs_dir: {docs}\n"
        f"hooks: [{', '.join(map(str, HOOKS))}]\n"
        "extra_css: []\nextra_javascript: []\nwatch: []\nextra:\n  polyfills: []\n"
        "nav:\n" + "".join(f"  - {p}\n" for p in nav) + extra,
        encoding="utf-8",
    )
    return cfg


def tiny_build(tmp: Path, page: str | dict[str, str], runner=None) -> subprocess.CompletedProcess:
    """Build a site of one page (index.md) or of `page` (name -> Markdown) with only the hooks
    and markdown-exec; return the process.

    For tests of the build's own messages: seconds instead of the whole guide's build. With
    `runner` (the `build_runner` fixture) the console script runs in a process forked from one
    that has imported MkDocs and torch.
    """
    (tmp / "docs").mkdir(parents=True, exist_ok=True)
    for name, text in (page if isinstance(page, dict) else {"index.md": page}).items():
        (tmp / "docs" / name).write_text(text, encoding="utf-8")
    (tmp / "mkdocs.yml").write_text(
        "site_name: t\nstrict: true\nplugins: [markdown-exec]\n"
        f"hooks: [{', '.join(map(str, HOOKS))}]\n"
        "markdown_extensions: [admonition, attr_list, pymdownx.details, pymdownx.superfences]\n",
        encoding="utf-8",
    )
    # the console script, as a contributor runs it: the checkout is on sys.path only through
    # the first hook (gradflow_site is not installed)
    env = dict(os.environ, GRADFLOW_EXEC_CACHE="0", NO_MKDOCS_2_WARNING="1")
    env.pop("PYTHONPATH", None)
    script = Path(sys.executable).parent / "mkdocs"
    cmd = [str(script), "build", "--strict"]
    if runner is not None:
        return runner.run(str(script), tmp, env, 120, argv=cmd, path0=str(script.parent))
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=120)


TAG = "GRADFLOW_TEST_RUN"  # environment variable every process of one test run carries


def start_run(cache: Path) -> Path:
    """Give this run a temporary directory and a process tag; return the directory."""
    system = tempfile.gettempdir()
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", system)  # pytest's own folders stay there
    run = Path(tempfile.mkdtemp(prefix="gradflow-test-run-"))
    os.environ["TMPDIR"] = tempfile.tempdir = str(run)
    os.environ[TAG] = uuid.uuid4().hex
    # torch's compiler cache (made when an optimizer first steps) is kept, not temporary
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "torchinductor"))
    return run


def tagged_processes(tag: str, var: str = TAG, parent: int | None = None) -> list[str]:
    """'pid command' of every live process (but this one) whose environment has var=tag, or
    that descends from such a process or, with `parent`, from the process `parent`.

    A process only just started may show an empty environment: /proc/PID/environ reads empty
    from the moment posix_spawn (or vfork) returns until the kernel has set up the new program,
    so a child is found by its ancestry too."""
    needle = f"{var}={tag}".encode() + b"\0"
    table = {}  # pid -> (parent pid, whether its environment has the tag, command)
    for proc in Path("/proc").glob("[0-9]*"):
        if int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes() + b"\0"
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = (proc / "status").read_text()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if "\nState:\tZ" in status:  # a zombie has ended; its parent just has not reaped it
            continue
        ppid = int(re.search(r"^PPid:\s*(\d+)", status, re.M).group(1))
        table[int(proc.name)] = (ppid, needle in environ, cmd.strip()[:200])

    def ours(pid: int) -> bool:
        seen = set()
        while pid in table and pid not in seen:
            seen.add(pid)
            ppid, tagged, _ = table[pid]
            if tagged or ppid == parent:
                return True
            pid = ppid
        return False

    return [f"{pid} {table[pid][2]}" for pid in sorted(table) if ours(pid)]


def finish_run(run: Path) -> list[str]:
    """Return what the run left behind (files in its directory, live processes); clean up.

    A process still alive is looked for again for up to GRADFLOW_LEFTOVER_GRACE seconds, 3
    unless set (it may be exiting; tests/test_leftovers.py's own run, whose process never
    exits, sets less)."""
    grace = float(os.environ.get("GRADFLOW_LEFTOVER_GRACE", "3"))
    left = []
    deadline = time.monotonic() + grace
    processes = tagged_processes(os.environ[TAG], parent=os.getpid())
    while processes and time.monotonic() < deadline:  # a child may still be exiting
        time.sleep(0.1)
        processes = tagged_processes(os.environ[TAG], parent=os.getpid())
    left += [f"process {p}" for p in processes]
    if run.is_dir():
        left += [f"{run.name}/{p.name}" for p in sorted(run.iterdir())]
        shutil.rmtree(run, ignore_errors=True)
    return left
