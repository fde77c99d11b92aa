"""Nothing left behind: the strict build leaves its temporary directory empty and no process
alive, and a test run that leaves a file or a process fails and names them (conftest's guard,
tests/_site.py). A notebook run is checked in tests/test_notebooks.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

from tests._site import ROOT, TAG, tagged_processes


@pytest.mark.build
def test_build_leaves_no_temporary_file(site):
    # tests/_site.py gives the shared build a TMPDIR of its own, beside the site
    temp = site.parent / f"{site.name}.tmp"
    if not temp.exists():
        pytest.skip("the site was not built by this test run (GRADFLOW_TEST_SITE)")
    assert not list(temp.iterdir()), f"the build left {sorted(p.name for p in temp.iterdir())}"


@pytest.mark.build
def test_build_leaves_no_process(site):
    # every process of the build carries GRADFLOW_BUILD=<its site dir> (tests/_site.py)
    assert tagged_processes(str(site), var="GRADFLOW_BUILD") == []


@pytest.mark.long(seconds=5)
def test_a_test_run_that_leaves_a_file_or_a_process_fails(tmp_path):
    (tmp_path / "test_dirty.py").write_text(
        textwrap.dedent(
            """
            import os, sys, tempfile

            def test_leaves_a_file_and_a_process():
                fd, _ = tempfile.mkstemp(prefix="forgotten-")
                os.close(fd)
                os.posix_spawn(sys.executable, [sys.executable, "-c",
                               "import time; time.sleep(20)"], os.environ)
            """
        )
    )
    system = tmp_path / "tmp"
    system.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (TAG, "PYTEST_ADDOPTS")}
    # the forgotten process never exits: its run need not wait the usual 3 s for it to end
    env.update(TMPDIR=str(system), PYTEST_DEBUG_TEMPROOT=str(system), GRADFLOW_LEFTOVER_GRACE="0.5")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:xdist", "-p",
         "no:cacheprovider", "-q", "--rootdir", str(tmp_path), str(tmp_path / "test_dirty.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    pids = [int(p) for p in re.findall(r"process (\d+) ", result.stdout)]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    assert "1 passed" in result.stdout, result.stdout + result.stderr
    assert result.returncode == 1, result.stdout
    assert "the test run left behind" in result.stdout
    assert re.search(r"gradflow-test-run-\w+/forgotten-", result.stdout), result.stdout
    assert len(pids) == 1 and "time.sleep(20)" in result.stdout
    # the run's own temporary directory is gone: no new entry beside pytest's folder
    assert [p.name for p in system.iterdir() if not p.name.startswith("pytest-of-")] == []


@pytest.mark.long(seconds=5)
def test_a_notebook_run_leaves_no_temporary_file_and_no_process(tmp_path):
    """A lab run as Jupyter runs it (a kernel, the setup cell's module folder) cleans up."""
    from gradflow_site import labs

    notebook = labs.write_all(tmp_path / "labs", {"telephone": "The telephone game"})[0]
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = dict(
        os.environ,
        TMPDIR=str(temp),
        GRADFLOW_NOTEBOOK_RUN=str(tmp_path),
        OMP_NUM_THREADS="1",
        MPLBACKEND="Agg",
    )
    subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute",
         "--output-dir", str(tmp_path / "out"), str(notebook)],
        env=env, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assert sorted(p.name for p in temp.iterdir()) == []
    assert tagged_processes(str(tmp_path), var="GRADFLOW_NOTEBOOK_RUN") == []


def test_the_guard_finds_a_child_by_its_parent():
    # /proc/PID/environ reads empty from the moment posix_spawn returns until the kernel has set
    # up the new program, so a child the run's guard looks for that soon shows no tag: the guard
    # also finds the run's children by their parent. Here the child carries no tag at all.
    env = {k: v for k, v in os.environ.items() if k != TAG}
    argv = [sys.executable, "-c", "import time; time.sleep(20)"]
    pid = os.posix_spawn(sys.executable, argv, env)
    try:
        found = tagged_processes("no-such-tag", parent=os.getpid())
        assert [p for p in found if p.split()[0] == str(pid)], found
        assert tagged_processes("no-such-tag") == []
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
