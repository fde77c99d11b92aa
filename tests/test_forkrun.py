"""The fork server (tests/_forkrun.py) runs a program as a fresh `python -I -W error` does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests._forkrun import reader_env

# what a program can see of the interpreter it runs in, once it has imported what every lab
# imports first and built an optimizer
PROBE = """
import os, sys, tempfile, warnings
import torch, numpy, matplotlib
torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
print(sorted(sys.modules))
print(sys.path)
print(sys.flags)
print(warnings.filters)
print(os.getcwd(), sys.argv, __name__, tempfile.gettempdir(), os.environ["GF_PROBE"])
print(torch.get_num_threads(), matplotlib.get_backend())
import random
print(torch.initial_seed(), numpy.random.random(), random.random())
"""


def test_a_forked_program_sees_what_a_fresh_interpreter_shows(tmp_path, forkrun):
    (tmp_path / "probe.py").write_text(PROBE, encoding="utf-8")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = reader_env(TMPDIR=str(temp), GF_PROBE="seen")
    fresh = subprocess.run(
        [sys.executable, "-I", "-W", "error", "probe.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    forked, again = (forkrun.run("probe.py", tmp_path, env) for _ in range(2))
    assert fresh.returncode == 0, fresh.stderr
    assert (forked.returncode, forked.stderr) == (0, fresh.stderr)
    *seen, seeds = forked.stdout.splitlines()
    *expected, _ = fresh.stdout.splitlines()
    for mine, theirs in zip(seen, expected, strict=True):
        assert mine == theirs
    # every run draws other random numbers (torch's, numpy's and Python's), as fresh ones do
    assert all(a != b for a, b in zip(seeds.split(), again.stdout.splitlines()[-1].split()))


@pytest.mark.parametrize(
    ("code", "returncode", "stderr"),
    [
        ("import sys; print('out'); sys.exit(3)", 3, ""),
        ("raise ValueError('bad value: the fix')", 1, "ValueError: bad value: the fix"),
        ("import warnings; warnings.warn('old API')", 1, "UserWarning: old API"),
        ("import no_such_module", 1, "ModuleNotFoundError"),
    ],
)
def test_a_forked_program_exits_as_a_fresh_one(tmp_path, forkrun, code, returncode, stderr):
    (tmp_path / "p.py").write_text(code + "\n", encoding="utf-8")
    result = forkrun.run("p.py", tmp_path, reader_env())
    assert result.returncode == returncode
    assert stderr in result.stderr
    assert result.stdout == ("out\n" if returncode == 3 else "")


def test_a_forked_program_past_its_time_is_killed_with_its_children(tmp_path, forkrun):
    (tmp_path / "p.py").write_text(
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "time.sleep(60)\n",
        encoding="utf-8",
    )
    with pytest.raises(subprocess.TimeoutExpired):
        forkrun.run("p.py", tmp_path, reader_env(), timeout=2)
    # the server goes on serving
    (tmp_path / "q.py").write_text("print('next')\n", encoding="utf-8")
    assert forkrun.run("q.py", tmp_path, reader_env()).stdout == "next\n"
