"""Fixtures for every test file, and the rules of a test run. `site` (the whole guide, built
strictly and clean) and `visits` (what its pages show in the browser, tests/_browser.py) are
computed once per run by the first test process that needs them; other xdist workers wait.
Tests marked `cuda` skip without a CUDA device; a run that leaves a temporary file or a process
behind fails (tests/_site.py). GRADFLOW_TEST_SITE=DIR tests a site built there (not under CI).
"""

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

import pytest

from tests import _browser
from tests._forkrun import ForkRunner, reader_env
from tests._site import ROOT, TAG, finish_run, mkdocs_build, start_run


def _once(config, name: str, compute):
    """compute()'s JSON value, computed by the run's first process to ask; the others wait."""
    base = config._tmp_path_factory.getbasetemp()
    path = (base.parent if hasattr(config, "workerinput") else base) / f"{name}.json"
    try:
        path.with_suffix(".started").open("x").close()  # only the first process can
    except FileExistsError:
        deadline = time.monotonic() + 900
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        result = json.loads(path.read_text()) if path.exists() else {"error": f"no {name}"}
    else:
        result = {"error": f"{name} failed in another test process"}
        try:
            result = {"value": compute()}
        finally:  # written whole, then renamed: a waiting process reads all or nothing
            (part := path.with_suffix(".partial")).write_text(json.dumps(result), encoding="utf-8")
            part.replace(path)
    assert "error" not in result, result["error"]
    return result["value"]


def pytest_configure(config):
    if not hasattr(config, "workerinput") and TAG not in os.environ:  # not an xdist worker
        config._gradflow_run = start_run(ROOT / ".cache")
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        import torch  # where tests run: results that do not depend on the number of cores

        torch.set_num_threads(1)


def pytest_runtest_setup(item):
    import torch

    if "cuda" in item.keywords and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (torch.cuda.is_available() is False)")


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session, exitstatus):
    yield  # after xdist has stopped its workers
    run = getattr(session.config, "_gradflow_run", None)
    if run and (left := finish_run(run)):
        message = "ERROR: the test run left behind: " + "; ".join(left)
        session.config.pluginmanager.get_plugin("terminalreporter").write_line(message, red=True)
        session.exitstatus = session.exitstatus or pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def site(request, tmp_path_factory) -> Path:
    """The whole site, built once per run."""
    if os.environ.get("GRADFLOW_TEST_SITE") and not os.environ.get("CI"):
        return Path(os.environ["GRADFLOW_TEST_SITE"])

    def build():
        result = mkdocs_build(out := tmp_path_factory.mktemp("site"))
        return [result.returncode, result.stdout + result.stderr, str(out)]

    code, log, out = _once(request.config, "site", build)
    assert code == 0, f"strict build failed:\n{log}"
    return Path(out)


@pytest.fixture(scope="session")
def visits(request, site, searchable_server, browser) -> dict[str, dict]:
    """What every page shows in the browser (_browser.visit_every_page)."""
    visit = lambda: _browser.visit_every_page(site, searchable_server, browser)  # noqa: E731
    return _once(request.config, "visits", visit)


@pytest.fixture(scope="session")
def server(site):
    """The built site served over http, as published; the base URL."""
    with _browser.serve(site) as url:
        yield url


@pytest.fixture(scope="session")
def searchable_server(server):
    """The same server (every page load builds Material's search index)."""
    return server


@pytest.fixture(scope="session")
def browser():
    """Headless chromium (Playwright); skips without it locally, fails under CI."""
    _browser.require(_browser.TEST_BROWSER, "no Chrome or Chromium (set CHROME_PATH)")
    playwright = pytest.importorskip("playwright.sync_api")
    # a TMPDIR of its own, removed after: Chromium can leave a scratch file behind when many
    # contexts close
    with tempfile.TemporaryDirectory() as tmp, playwright.sync_playwright() as p:
        options = {"args": _browser.ARGS, "env": {**os.environ, "TMPDIR": tmp}}
        chromium = p.chromium.launch(executable_path=_browser.TEST_BROWSER, **options)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def forkrun():
    """Runs a reader's program as `python -I -W error` would, torch already imported."""
    with contextlib.closing(ForkRunner(reader_env())) as runner:
        yield runner
