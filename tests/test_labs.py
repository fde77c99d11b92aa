"""Every chapter's lab notebook is generated from its snippets, is valid, and runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nbformat
import pytest
import yaml

from gradflow_site import labs
from tests._site import ROOT


def _nav():
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)["nav"]


CHAPTERS = labs.chapters(_nav())


def test_labs_exist_for_every_chapter_with_a_snippet_file():
    snippet_names = {p.stem for p in (ROOT / "snippets").glob("*.py")}
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert set(CHAPTERS) == snippet_names & pages


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_lab_is_valid_and_has_one_cell_per_snippet_section(name, tmp_path):
    path = labs.write_all(tmp_path, {name: CHAPTERS[name]})[0]
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert code[1:] == [text for _, text in labs.sections(ROOT / "snippets" / f"{name}.py")]


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_lab_runs_from_top_to_bottom_outside_the_repository(name, tmp_path):
    nb = json.loads(labs.write_all(tmp_path, {name: CHAPTERS[name]})[0].read_text())
    # IPython magics (%matplotlib inline) are notebook-only; everything else runs as written
    script = "\n\n".join(
        "\n".join(line for line in "".join(c["source"]).splitlines() if not line.startswith("%"))
        for c in nb["cells"]
        if c["cell_type"] == "code"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    # the editable install is on the path too; the lab must import its own embedded copy
    script += "\nimport gradflow_ref\nassert 'gradflow_lab_' in gradflow_ref.__file__\n"
    (tmp_path / "lab.py").write_text(script, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-W", "error", "lab.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"lab {name} failed:\n{result.stdout}\n{result.stderr}"
