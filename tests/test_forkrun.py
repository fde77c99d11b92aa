"""The fork server (tests/_forkrun.py) runs a program as a new `python -I -W error` runs it."""

import subprocess
import sys

import pytest

from tests._forkrun import reader_env

# what a program sees of its interpreter once it has imported what every lab imports first and
# built an optimizer; the last line, random numbers, differs from run to run
PROBE = """import os, random, sys, tempfile, warnings
import torch, numpy, matplotlib
torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
print(sorted(sys.modules), sys.path, sys.flags, warnings.filters, torch.get_num_threads())
print(os.getcwd(), sys.argv, __name__, tempfile.gettempdir(), os.environ["GF_PROBE"])
print(matplotlib.get_backend())
print(torch.initial_seed(), numpy.random.random(), random.random())
"""


def test_a_forked_program_sees_what_a_fresh_interpreter_shows(tmp_path, forkrun):
    (tmp_path / "probe.py").write_text(PROBE, encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    env = reader_env(TMPDIR=str(tmp_path / "tmp"), GF_PROBE="seen")
    cmd = [sys.executable, "-I", "-W", "error", "probe.py"]
    fresh = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    forked, again = (forkrun.run("probe.py", tmp_path, env) for _ in range(2))
    assert (fresh.returncode, fresh.stderr) == (forked.returncode, forked.stderr) == (0, "")
    assert forked.stdout.splitlines()[:-1] == fresh.stdout.splitlines()[:-1]
    seeds = [r.stdout.splitlines()[-1].split() for r in (forked, again)]
    assert all(a != b for a, b in zip(*seeds)), seeds


EXITS = [  # (program, exit code, stdout, part of stderr)
    ("import sys; print('out'); sys.exit(3)", 3, "out\n", ""),
    ("raise ValueError('bad value: the fix')", 1, "", "ValueError: bad value: the fix"),
    ("import warnings; warnings.warn('old API')", 1, "", "UserWarning: old API"),
    ("import no_such_module", 1, "", "ModuleNotFoundError"),
]


@pytest.mark.parametrize(("code", "returncode", "stdout", "stderr"), EXITS)
def test_a_forked_program_exits_as_a_fresh_one(tmp_path, forkrun, code, returncode, stdout, stderr):
    (tmp_path / "p.py").write_text(code + "\n", encoding="utf-8")
    result = forkrun.run("p.py", tmp_path, reader_env())
    assert (result.returncode, result.stdout) == (returncode, stdout) and stderr in result.stderr


def test_a_forked_program_past_its_time_is_killed_with_its_children(tmp_path, forkrun):
    child = "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])"
    (tmp_path / "p.py").write_text(f"import subprocess, sys, time\n{child}\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        forkrun.run("p.py", tmp_path, reader_env(), timeout=2)
    (tmp_path / "q.py").write_text("print('next')\n", encoding="utf-8")  # the server goes on
    assert forkrun.run("q.py", tmp_path, reader_env()).stdout == "next\n"
