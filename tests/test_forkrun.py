"""The fork server (tests/_forkrun.py) runs a program as a fresh `python -I -W error` does."""

from __future__ import annotations

import re
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


@pytest.mark.build
def test_a_forked_build_gives_what_a_new_process_gives(tmp_path, build_runner):
    # the build server (conftest's build_runner) has imported MkDocs and torch: a build forked
    # from it writes the same site, logs the same lines and exits the same as a new process
    from tests._site import tiny_build

    page = (
        '# T\n\n```python exec="1" session="t"\nimport torch, matplotlib\nx = torch.rand(3)\n'
        "print(f\"{x.sum():.6f} {matplotlib.rcParams['svg.hashsalt']}\")\n```\n\n"
        "Sum `{python} f'{x.sum():.4f}'`.\n"
    )
    for folder in ("new", "forked"):  # matplotlib reads the settings of the build's folder
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "matplotlibrc").write_text("svg.hashsalt: beside-mkdocs-yml\n")
    new = tiny_build(tmp_path / "new", page)
    forked = tiny_build(tmp_path / "forked", page, runner=build_runner)
    assert new.returncode == 0, new.stderr
    assert "beside-mkdocs-yml" in (tmp_path / "new" / "site" / "index.html").read_text()
    assert (forked.returncode, forked.stdout) == (new.returncode, new.stdout)
    timing = re.compile(r"\d+\.\d+")  # seconds: the slowest pages and blocks, the total

    def log(result, folder):
        return timing.sub("#", result.stderr.replace(str(tmp_path / folder), "<project>"))

    assert log(forked, "forked") == log(new, "new")
    files = sorted(p.relative_to(tmp_path / "new") for p in (tmp_path / "new").rglob("*"))
    assert files == sorted(
        p.relative_to(tmp_path / "forked") for p in (tmp_path / "forked").rglob("*")
    )
    # a folder outside git has no commit date to build with: MkDocs' theme writes the time
    stamp = re.compile(rb"Build Date UTC : [^\n]+")
    for f in files:
        if (tmp_path / "new" / f).is_file():
            new_bytes, forked_bytes = ((tmp_path / d / f).read_bytes() for d in ("new", "forked"))
            assert stamp.sub(b"", forked_bytes) == stamp.sub(b"", new_bytes), f
