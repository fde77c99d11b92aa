"""Shared test configuration: the `cuda` marker, one strict site build for the session, and
one server and browser for the browser tests."""

import os
from pathlib import Path

import pytest
import torch

from tests import _browser
from tests._site import mkdocs_build

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
    out = tmp_path_factory.mktemp("site")
    cache = os.environ.get("GRADFLOW_TEST_CACHE") == "1" and not os.environ.get("CI")
    result = mkdocs_build(out, cache=cache)
    assert result.returncode == 0, f"strict build failed:\n{result.stdout}\n{result.stderr}"
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
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
