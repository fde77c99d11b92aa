"""Every chapter's lab notebook is generated from its snippets, is valid, carries what it needs
to run outside the repository, and is offered under its chapter's title. (The executed lab
page is written from its chapter's run by the build.)
"""

from __future__ import annotations

import os
import subprocess
import sys

import nbformat
import pytest
import yaml

from gradflow_site import labs
from tests._site import ROOT, tagged_processes


def _nav():
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)["nav"]


CHAPTERS = labs.chapters(_nav())


def test_labs_exist_for_every_chapter_with_a_snippet_file():
    # a script (train.py) is downloaded and run as a program, not as a lab
    snippet_names = {p.stem for p in (ROOT / "snippets").glob("*.py") if not labs.is_script(p)}
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert set(CHAPTERS) == snippet_names & pages
    assert "train" not in CHAPTERS


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_every_chapter_with_a_lab_offers_it_under_its_title(name):
    text = (ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8")
    title = text.index("\n# ")
    button = f"[:material-download: Download this chapter as a notebook](labs/{name}.ipynb)"
    assert text.find(button, title) == text.index("\n", title + 1) + 2, (
        f"docs/{name}.md: put the lab's download button on the line after the title's blank line"
    )
    assert (ROOT / "docs" / "labs" / f"{name}.ipynb").exists(), "run `make notebooks`"


def test_is_script_tells_a_program_from_a_lab(tmp_path):
    program, lab = tmp_path / "program.py", tmp_path / "lab.py"
    program.write_text('def main():\n    pass\n\n\nif __name__ == "__main__":\n    main()\n')
    lab.write_text("print(1)\n")
    assert labs.is_script(program) and not labs.is_script(lab)


def test_companions_are_the_snippet_files_a_lab_imports(tmp_path):
    (tmp_path / "train.py").write_text("x = 1\n")
    code = "import os\nfrom train import x\nimport gradflow_ref.flow\n"
    assert labs.companions(code, snippets=tmp_path) == {"train.py": "x = 1\n"}
    assert labs.companions("import os\n", snippets=tmp_path) == {}


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_lab_is_valid_and_has_one_cell_per_snippet_section(name, tmp_path):
    path = labs.write_all(tmp_path, {name: CHAPTERS[name]})[0]
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert code[1:] == [text for _, text in labs.sections(ROOT / "snippets" / f"{name}.py")]


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_lab_code_is_the_whole_snippet_file(name):
    # with the test above: a lab runs exactly the code of its snippet file, so
    # tests/test_notebooks.py, running the lab outside the repository, runs the file too
    path = ROOT / "snippets" / f"{name}.py"
    inside = "\n".join(text for _, text in labs.sections(path)).splitlines()
    whole = [ln for ln in path.read_text(encoding="utf-8").splitlines() if "--8<--" not in ln]
    assert [ln for ln in inside if ln.strip()] == [ln for ln in whole if ln.strip()]


@pytest.mark.parametrize("name", sorted(CHAPTERS)[:2])
def test_lab_is_written_as_jupyter_writes_it_with_stable_cell_ids(name, tmp_path):
    path = labs.write_all(tmp_path, {name: CHAPTERS[name]})[0]
    text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    assert nbformat.writes(nb) + "\n" == text  # a round trip through Jupyter changes nothing
    assert [c.id for c in nb.cells] == [f"{name}-{i}" for i in range(len(nb.cells))]
    again = labs.write_all(tmp_path / "again", {name: CHAPTERS[name]})[0]
    assert again.read_bytes() == path.read_bytes()


def test_a_lab_that_reads_committed_runs_carries_them():
    files = labs.library_files("from gradflow_ref.benchmarks import committed_runs\n")
    committed = sorted(p.name for p in (ROOT / "results").glob("bench-*.json"))
    assert committed, "no committed run to carry"
    assert sorted(n.removeprefix("committed/") for n in files if "/" in n) == committed
    assert "benchmarks.py" in files
    assert not any("/" in n for n in labs.library_files("from gradflow_ref.flow import mlp\n"))


def test_a_lab_that_trains_the_transformer_carries_its_text():
    files = labs.library_files("from gradflow_ref.transformer import shakespeare\n")
    assert files["data/shakespeare.txt"].startswith("First Citizen")
    assert "data/shakespeare.txt" not in labs.library_files("import gradflow_ref.clipping as ref\n")


def test_a_notebook_run_leaves_no_temporary_file_and_no_process(tmp_path):
    """A lab run as Jupyter runs it (a kernel, the setup cell's module folder) cleans up."""
    notebook = labs.write_all(tmp_path / "labs", {"telephone": "The telephone game"})[0]
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"), GRADFLOW_NOTEBOOK_RUN=str(tmp_path))
    env.update(OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    args = ["--to", "notebook", "--execute", "--output-dir", str(tmp_path / "out"), str(notebook)]
    cmd = [sys.executable, "-m", "nbconvert", *args]
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=300)
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == []
    assert tagged_processes(str(tmp_path), var="GRADFLOW_NOTEBOOK_RUN") == []
