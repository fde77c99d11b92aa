"""Shared test configuration: the `cuda` marker, and one strict site build for the session."""

from pathlib import Path

import pytest
import torch

from tests._site import mkdocs_build

# One intra-op thread: tiny models run faster than with two threads fighting over two cores,
# and results do not depend on the machine's core count. Subprocesses get OMP_NUM_THREADS=1.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """Build the whole site once, strictly and without the execution cache."""
    out = tmp_path_factory.mktemp("site")
    result = mkdocs_build(out)
    assert result.returncode == 0, f"strict build failed:\n{result.stdout}\n{result.stderr}"
    return out


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
