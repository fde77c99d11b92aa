"""Shared test configuration: the `cuda` marker, one strict site build for the session (started
at collection, shared by the xdist workers), a server and a browser per worker for the browser
tests, and the check that a test run leaves nothing behind."""

import os
from pathlib import Path

import pytest
import torch
from filelock import FileLock

from tests import _browser
from tests._forkrun import ForkRunner, reader_env
from tests._site import ROOT, TAG, finish_run, start_build, start_run, wait_for_log

# One intra-op thread: tiny models run faster than with two threads fighting over two cores,
# and results do not depend on the machine's core count. Subprocesses get OMP_NUM_THREADS=1.
torch.set_num_threads(1)


def _build_files(factory) -> tuple[Path, Path, Path]:
    """(site dir, build log, lock) of the one build that every xdist worker shares."""
    shared = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    return shared / "site", shared / "site-build.log", shared / "site.lock"


def _prebuilt() -> str | None:
    # iterating on browser tests: reuse a site built by `mkdocs build --site-dir DIR`
    return None if os.environ.get("CI") else os.environ.get("GRADFLOW_TEST_SITE")


def _start_site_build(config) -> None:
    """Start the shared build unless one has started; the first process to ask starts it."""
    # a hook gets no fixtures: pytest's tmp_path_factory is reached through the config (set
    # by pytest's tmp_path plugin since pytest 3.9), the same factory the `site` fixture uses
    out, log, lock = _build_files(config._tmp_path_factory)
    with FileLock(str(lock)):
        started = log.with_name("site-build.started")
        if started.exists():
            return
        started.touch()
        cache = os.environ.get("GRADFLOW_TEST_CACHE") == "1" and not os.environ.get("CI")
        config._gradflow_builder = start_build(out, log, cache=cache)


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
    out, log, _ = _build_files(tmp_path_factory)
    _start_site_build(request.config)  # nothing when collection started it (the usual case)
    code, _, output = wait_for_log(
        log, getattr(request.config, "_gradflow_builder", None)
    ).partition("\n")
    assert code == "0", f"strict build failed:\n{output}"
    return out


@pytest.fixture(scope="session")
def server(site):
    """The built site served over http; the base URL."""
    with _browser.serve(site) as url:
        yield url


@pytest.fixture(scope="session")
def forkrun():
    """Runs a reader's program as `python -I -W error` would, torch already imported."""
    runner = ForkRunner(reader_env())
    yield runner
    runner.close()


@pytest.fixture(scope="session")
def browser():
    """Headless chromium (Playwright); skips without it locally, fails under CI."""
    with _browser.launch() as b:
        yield b


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config, items):
    # Tests of the built site run last, so the other tests run while the site builds (it starts
    # now, in a process of its own); under xdist every worker then shares the one build and
    # opens its own server and browser. A test marked `early` runs first (a long niced build).
    needs_site = {id(i) for i in items if "site" in getattr(i, "fixturenames", ())}
    items.sort(key=lambda i: 0 if i.get_closest_marker("early") else 1 + (id(i) in needs_site))
    if needs_site and not _prebuilt() and not config.option.collectonly:
        _start_site_build(config)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def pytest_unconfigure(config):
    builder = getattr(config, "_gradflow_builder", None)
    if builder is not None:  # the process that started the build reaps it
        builder.wait()


def pytest_configure(config):
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
