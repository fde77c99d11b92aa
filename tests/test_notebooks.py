"""Every downloadable notebook runs as a reader runs it: from an empty folder, as in Colab.

The lab's code cells (the setup cell's `%matplotlib` line aside) run in one process in an empty
folder where only torch, matplotlib, numpy and the standard library can be imported: the
checkout is off `sys.path`, and `gradflow_ref` is found only where the setup cell writes it, so
a snippet that imports `gradflow_site` or a module the setup cell does not carry fails here,
and every `gradflow_ref` module the run imported must be the setup cell's copy, byte-identical
to the repository's. The process is forked from one that has imported torch, numpy and
matplotlib and nothing else (tests/_forkrun.py; tests/test_forkrun.py holds it to a fresh
interpreter), which saves those imports on every run.

A lab's code is its snippet file's whole code, cell by section (tests/test_labs.py), so this
run is also the run of `snippets/<chapter>.py` as a script, warnings as errors: stricter than
running it inside the checkout, and done once.
"""

from __future__ import annotations

import nbformat
import pytest

from tests._forkrun import reader_env
from tests._site import ROOT
from tests.test_labs import CHAPTERS

COLAB = """
import importlib.abc, importlib.machinery, runpy, sys
ROOT = {root!r}
class OnlyWhatColabHas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in ("gradflow_site", "snippets", "tests"):
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in a downloaded notebook)")
        if top == "gradflow_ref":  # only the copy the setup cell writes, never the checkout's
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or (spec.origin or "").startswith(ROOT):
                raise ModuleNotFoundError(f"No module named {{name!r}} outside the notebook")
            return spec
        return None
sys.meta_path.insert(0, OnlyWhatColabHas())
sys.path[:] = [p for p in sys.path if p and p.rstrip("/") != ROOT]
runpy.run_path("notebook.py", run_name="__main__")
# every gradflow_ref module came from the setup cell's copy, and is the repository's file
import pathlib
for mod in sorted(m for m in sys.modules if m.startswith("gradflow_ref.")):
    path = pathlib.Path(sys.modules[mod].__file__)
    assert "gradflow_lab_" in str(path), f"{{mod}} was imported from {{path}}, not the lab's copy"
    repo = pathlib.Path(ROOT) / "gradflow_ref" / path.name
    assert path.read_bytes() == repo.read_bytes(), f"the lab's {{mod}} differs from {{repo}}"
"""


@pytest.mark.long(seconds=2)
@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_notebook_runs_from_an_empty_folder(name, tmp_path, forkrun):
    from gradflow_site import labs

    path = labs.write_all(tmp_path / "labs", {name: CHAPTERS[name]})[0]
    nb = nbformat.read(path, as_version=4)
    code = [
        "\n".join(ln for ln in cell.source.splitlines() if not ln.startswith("%"))
        for cell in nb.cells
        if cell.cell_type == "code"
    ]
    run = tmp_path / "run"
    run.mkdir()
    (run / "notebook.py").write_text("\n\n".join(code) + "\n", encoding="utf-8")
    (run / "colab.py").write_text(COLAB.format(root=str(ROOT)), encoding="utf-8")
    temp = tmp_path / "tmp"  # the notebook's own temporary directory: left empty
    temp.mkdir()
    result = forkrun.run("colab.py", run, reader_env(TMPDIR=str(temp)))
    assert result.returncode == 0, (
        f"labs/{name}.ipynb fails outside the repository:\n" + (result.stderr[-3000:])
    )
    assert result.stdout.strip(), f"labs/{name}.ipynb printed nothing"
    # torchinductor_<user> is torch's own compiler cache, made once and reused by every run
    left = [p.name for p in temp.iterdir() if not p.name.startswith("torchinductor_")]
    assert not left, f"labs/{name}.ipynb left {left} in the temporary directory"


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_committed_notebook_is_the_generated_one(name, tmp_path):
    """docs/labs/ is what the site serves and "Open in Colab" opens: today's lab (`make
    notebooks`)."""
    from gradflow_site import labs

    generated = labs.write_all(tmp_path, {name: CHAPTERS[name]})[0].read_bytes()
    committed = ROOT / "docs" / "labs" / f"{name}.ipynb"
    assert committed.exists(), f"docs/labs/{name}.ipynb is missing: run `make notebooks`"
    assert committed.read_bytes() == generated, (
        f"docs/labs/{name}.ipynb is out of date with snippets/ or gradflow_ref/: run "
        "`make notebooks` and commit the result"
    )
