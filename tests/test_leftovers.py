"""A test run that leaves a file or a process behind fails and names them (conftest.py, with
tests/_site.py's start_run and finish_run). That the build and a lab leave nothing is checked in
tests/test_site.py and tests/test_labs.py."""

import os
import re
import signal
import subprocess
import sys

from tests._site import ROOT, TAG

DIRTY = """import os, sys, tempfile
def test_leaves_a_file_and_a_process():
    os.close(tempfile.mkstemp(prefix="forgotten-")[0])
    python = sys.executable
    os.posix_spawn(python, [python, "-c", "import time; time.sleep(20)"], os.environ)
"""


def test_a_test_run_that_leaves_a_file_or_a_process_fails(tmp_path):
    (tmp_path / "test_dirty.py").write_text(DIRTY, encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (TAG, "PYTEST_ADDOPTS")}
    env.update(TMPDIR=str(tmp_path / "tmp"), PYTEST_DEBUG_TEMPROOT=str(tmp_path / "tmp"))
    env["GRADFLOW_LEFTOVER_GRACE"] = "0.5"  # the forgotten process never exits: no need to wait
    args = ["-p", "tests.conftest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "--rootdir"]
    cmd = [sys.executable, "-m", "pytest", *args, str(tmp_path), str(tmp_path / "test_dirty.py")]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    pids = [int(p) for p in re.findall(r"process (\d+) ", result.stdout)]
    for pid in pids:  # the forgotten process
        os.kill(pid, signal.SIGKILL)
    assert "1 passed" in result.stdout and result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"left behind: .*gradflow-test-run-\w+/forgotten-", result.stdout)
    assert len(pids) == 1 and "time.sleep(20)" in result.stdout, result.stdout
    # the run's own temporary directory is gone: nothing beside pytest's folder
    assert [p.name for p in (tmp_path / "tmp").iterdir() if "pytest-of-" not in p.name] == []
