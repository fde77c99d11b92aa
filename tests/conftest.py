"""Shared test configuration: the `cuda` marker, one strict site build for the session, one
server and browser for the browser tests, and the check that a test run leaves nothing behind."""

import os
from pathlib import Path

import pytest
import torch
from filelock import FileLock

from tests import _browser
from tests._site import ROOT, TAG, finish_run, mkdocs_build, start_run

# One intra-op thread: tiny models run faster than with two threads fighting over two cores,
# and results do not depend on the machine's core count. Subprocesses get OMP_NUM_THREADS=1.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """Build the whole site once, strictly and without the execution cache.

    For a contributor iterating on browser tests: GRADFLOW_TEST_CACHE=1 reuses the execution
    cache (a warm build takes seconds) and GRADFLOW_TEST_SITE=DIR uses a site already built
    there. Both are ignored under CI (CI=true), which always builds clean.
    """
    prebuilt = os.environ.get("GRADFLOW_TEST_SITE")
    if prebuilt and not os.environ.get("CI"):
        # iterating on browser tests: reuse a site built by `mkdocs build --site-dir DIR`
        return Path(prebuilt)
    # one build shared by the xdist workers (`make test` runs `pytest -n auto`): the first
    # worker that needs it builds under a lock, the others wait and reuse it
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    out, log = shared / "site", shared / "site-build.log"
    with FileLock(str(shared / "site.lock")):
        if not log.exists():
            cache = os.environ.get("GRADFLOW_TEST_CACHE") == "1" and not os.environ.get("CI")
            result = mkdocs_build(out, cache=cache)
            log.write_text(f"{result.returncode}\n{result.stdout}\n{result.stderr}")
    code, _, output = log.read_text().partition("\n")
    assert code == "0", f"strict build failed:\n{output}"
    return out


@pytest.fixture(scope="session")
def server(site):
    """The built site served over http; the base URL."""
    with _browser.serve(site) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    """Headless chromium (Playwright); skips without it locally, fails under CI."""
    with _browser.launch() as b:
        yield b


def pytest_collection_modifyitems(config, items):
    # under xdist (--dist loadgroup) every test of the built site runs on one worker, so one
    # server and one browser serve them all; the other workers run the rest
    for item in items:
        if "site" in getattr(item, "fixturenames", ()) and not item.get_closest_marker(
            "xdist_group"
        ):
            item.add_marker(pytest.mark.xdist_group("site"))
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config):
    if not config.pluginmanager.hasplugin("xdist"):  # -p no:xdist: the marker is still known
        config.addinivalue_line("markers", "xdist_group(name): tests xdist runs on one worker")
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
