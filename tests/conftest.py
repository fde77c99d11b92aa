"""Shared test configuration: the `cuda` marker, the site builds of the session (started at
collection, shared by the xdist workers), a server and a browser per worker for the browser
tests, values computed once for all workers (`once`, `visits`), and the check that a test run
leaves nothing behind."""

import gc
import json
import os
from pathlib import Path

import pytest
from filelock import FileLock

from tests import _browser
from tests._forkrun import BUILD, ForkRunner, reader_env
from tests._site import ROOT, TAG, finish_run, start_build, start_run, wait_for_log

# The site builds a test run makes, each once for all xdist workers, started at collection in
# a process of their own (mkdocs_build's keywords): `site`, the strict clean build every test
# of the built site uses, and `serial_site`, a second clean build of the same commit rendered in
# one process, which test_build_is_byte_reproducible holds against the first. The second runs
# at the lowest priority (nice 19, Linux's idle class): it takes only the CPU the rest of the
# run leaves idle.
BUILDS = {
    "site": {},
    "serial_site": {"nice": 19, "parallel": False, "timeout": 900},
}


def _shared_dir(factory) -> Path:
    """The run's temporary folder that every xdist worker sees (each has its own below it)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _build_files(factory, name: str) -> tuple[Path, Path, Path]:
    """(site dir, build log, lock) of the build `name` that every xdist worker shares."""
    shared = _shared_dir(factory)
    return shared / name, shared / f"{name}-build.log", shared / f"{name}.lock"


def _prebuilt() -> str | None:
    # iterating on browser tests: reuse a site built by `mkdocs build --site-dir DIR`
    return None if os.environ.get("CI") else os.environ.get("GRADFLOW_TEST_SITE")


def _start_build(config, name: str) -> None:
    """Start the build `name` unless it has started; the first process to ask starts it."""
    # a hook gets no fixtures: pytest's tmp_path_factory is reached through the config (set
    # by pytest's tmp_path plugin since pytest 3.9), the same factory the fixtures use
    out, log, lock = _build_files(config._tmp_path_factory, name)
    with FileLock(str(lock)):
        started = log.with_name(f"{name}-build.started")
        if started.exists():
            return
        started.touch()
        build = dict(BUILDS[name])
        if name == "site":
            build["cache"] = os.environ.get("GRADFLOW_TEST_CACHE") == "1" and not os.environ.get(
                "CI"
            )
        config._gradflow_builders[name] = start_build(out, log, **build)


def _built(request, tmp_path_factory, name: str) -> Path:
    """Wait for the build `name` (starting it if collection did not); its site dir."""
    out, log, _ = _build_files(tmp_path_factory, name)
    _start_build(request.config, name)  # nothing when collection started it (the usual case)
    builder = request.config._gradflow_builders.get(name)
    code, _, output = wait_for_log(log, builder, timeout=900).partition("\n")
    assert code == "0", f"strict build failed:\n{output}"
    return out


@pytest.fixture(scope="session")
def site(request, tmp_path_factory) -> Path:
    """The whole site, built once, strictly and without the execution cache.

    The build starts as soon as the tests are collected (pytest_collection_modifyitems), in a
    process of its own, so it runs beside the tests that do not need it; a test that needs it
    waits here. For a contributor iterating on browser tests: GRADFLOW_TEST_CACHE=1 reuses the
    execution cache (a warm build takes seconds) and GRADFLOW_TEST_SITE=DIR uses a site already
    built there. Both are ignored under CI (CI=true), which always builds clean.
    """
    prebuilt = _prebuilt()
    if prebuilt:
        return Path(prebuilt)
    return _built(request, tmp_path_factory, "site")


@pytest.fixture(scope="session")
def serial_site(request, tmp_path_factory) -> Path:
    """A second strict clean build of the whole site, every chapter rendered in one process
    (GRADFLOW_PARALLEL=0), at the lowest priority; started at collection like `site`."""
    return _built(request, tmp_path_factory, "serial_site")


@pytest.fixture(scope="session")
def once(tmp_path_factory):
    """once(name, compute): compute() a JSON value once for the whole run, whichever xdist
    worker asks first; the others wait for it and read it.

    For fixtures that visit every page (`visits`): work stealing may split a module between the
    workers, and a module fixture would then run again on the second.
    """
    shared = _shared_dir(tmp_path_factory)

    def get(name: str, compute):
        path = shared / f"once-{name}.json"
        with FileLock(str(path.with_suffix(".lock"))):
            if not path.exists():
                path.write_text(json.dumps(compute()), encoding="utf-8")
        return json.loads(path.read_text(encoding="utf-8"))

    return get


@pytest.fixture(scope="session")
def visits(request, site, searchable_server, once) -> dict[str, dict]:
    """What every page of the site shows in the browser, visited once for the whole run
    (tests/_browser.py's visit_every_page); the browser starts only where it is computed."""
    return once("visits", lambda: _browser.visit_every_page(site, searchable_server, request))


@pytest.fixture(scope="session")
def searchable_server(site):
    """The built site served over http as it is published, search index included; the base
    URL."""
    with _browser.serve_site(site) as url:
        yield url


@pytest.fixture(scope="session")
def server(site):
    """The built site served over http, its search index answered with no documents (the
    search worker would build it on every load; tests/_browser.py's serve_site); the base
    URL."""
    with _browser.serve_site(site, search_index=False) as url:
        yield url


@pytest.fixture(scope="session")
def forkrun():
    """Runs a reader's program as `python -I -W error` would, torch already imported."""
    runner = ForkRunner(reader_env())
    yield runner
    runner.close()


@pytest.fixture(scope="session")
def build_runner():
    """Runs `mkdocs build` as a new process would, MkDocs and torch already imported (for the
    tests' small builds: each saves about 2 CPU-s of imports; tests/test_forkrun.py holds a
    forked build to a new process's)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")  # as gradflow_site/hooks.py sets them before torch loads
    env.setdefault("NO_MKDOCS_2_WARNING", "1")
    runner = ForkRunner(env, preload=BUILD, isolated=False)
    yield runner
    runner.close()


@pytest.fixture(scope="session")
def browser():
    """Headless chromium (Playwright); skips without it locally, fails under CI."""
    with _browser.launch() as b:
        yield b


def _uses(item, name: str) -> bool:
    return name in getattr(item, "fixturenames", ())


def _seconds(item) -> float:
    mark = item.get_closest_marker("long")
    return mark.kwargs.get("seconds", 0) if mark else 0


def _schedule(items: list, workers: int) -> list:
    """Order the tests for `workers` xdist workers (--dist worksteal).

    worksteal gives each worker one contiguous share of this list, the first share to the first
    worker, and a worker that runs out takes the last half of another's remaining share.
    Each share starts with tests that need no built site (they run while the builds run); then
    come its long tests (marked `long`, with their usual seconds: dealt out longest first to
    the share with the fewest seconds): first those of the built site, which start as soon as
    the site is built, then those that need no site, which keep a core busy beside the other
    workers' browser tests (a browser test leaves part of a core idle while it waits for the
    browser). The many short tests of the built site come last, for the workers to share at
    the end, and last of all the test that waits for the low-priority second build.
    """
    site = [i for i in items if _uses(i, "site") and not _uses(i, "serial_site")]
    serial = [i for i in items if _uses(i, "serial_site")]
    free = [i for i in items if not _uses(i, "site") and not _uses(i, "serial_site")]
    workers = max(1, min(workers, len(items)))
    shares: list[list] = [[] for _ in range(workers)]
    for group in (site, free):
        for item in sorted((i for i in group if _seconds(i)), key=_seconds)[::-1]:
            min(shares, key=lambda s: sum(map(_seconds, s))).append(item)
    shares = [sorted(s, key=lambda i: i in free) for s in shares]  # the site's long ones first
    free = [i for i in free if not _seconds(i)]
    ordered: list = []
    edge = 0  # where the n-th share ends
    for n, share in enumerate(shares[:-1]):
        edge += (len(items) - edge) // (workers - n)  # how worksteal sizes the n-th share
        # two tests of the next share's own may land before the edge: harmless, where a long
        # test pushed past it would wait for the site at the next share's start
        take = max(0, edge - len(ordered) - len(share) - 2)
        ordered += free[:take] + share
        free = free[take:]
    return ordered + free + shares[-1] + [i for i in site if not _seconds(i)] + serial


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config, items):
    # Tests of a built site run after the others (_schedule), which run while the builds run
    # (they start now, in processes of their own); under xdist every worker then shares the
    # builds and opens its own server and browser.
    items[:] = _schedule(items, getattr(config, "workerinput", {}).get("workercount", 1))
    if not config.option.collectonly:
        for name in BUILDS:
            if any(_uses(i, name) for i in items) and not (name == "site" and _prebuilt()):
                _start_build(config, name)
    cuda = [item for item in items if "cuda" in item.keywords]
    if not cuda:  # torch is imported only where a test needs it
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in cuda:
        item.add_marker(skip)


def pytest_unconfigure(config):
    for builder in getattr(config, "_gradflow_builders", {}).values():
        builder.wait()  # the process that started a build reaps it


def pytest_configure(config):
    config._gradflow_builders = {}  # name -> the build process this process started
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        # where tests run (not xdist's controller, which only hands them out): one intra-op
        # thread, so tiny models run faster than with two threads fighting over two cores and
        # results do not depend on the core count. Subprocesses get OMP_NUM_THREADS=1.
        import torch

        torch.set_num_threads(1)
        # rarer garbage collections, as in the build (gradflow_site/hooks.py): a worker holds
        # about 450,000 objects once torch is imported, and Python's default thresholds
        # collected them all a dozen times per run (1.3 CPU-s per worker; 0.45 s with these)
        gc.set_threshold(50_000, 20, 100)
    # the controller (not an xdist worker) gives the run its own TMPDIR and process tag
    if not hasattr(config, "workerinput") and TAG not in os.environ:
        config._gradflow_run_tmp = start_run(ROOT / ".cache")


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session, exitstatus):
    yield  # after every other sessionfinish: xdist has stopped its workers by now
    run = getattr(session.config, "_gradflow_run_tmp", None)
    if run is None:
        return
    left = finish_run(run)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "the test run left behind: " + "; ".join(left)
        if reporter is not None:
            reporter.write_line(f"ERROR: {message}", red=True)
        else:  # pragma: no cover
            print(message)
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
