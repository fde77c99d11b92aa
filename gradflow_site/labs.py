"""Generate one Jupyter notebook ("lab") per chapter from the chapter's snippet file.

A lab is the chapter's snippet file cut at its named sections, one code cell per section, with a
setup cell that carries the gradflow_ref modules the snippets import. Nothing is written twice by
hand: the code comes from snippets/, the library from gradflow_ref/. A lab needs only torch and
matplotlib, so it runs on a laptop CPU and in Colab as downloaded.

`make notebooks` (`python -m gradflow_site.labs docs/labs`) writes every lab into docs/labs/,
committed: the site serves them as downloads and Colab opens them from the repository
(tests/test_notebooks.py fails when one is stale). A lab the nav lists as labs/run/<name>.ipynb
is also a page: `executed_copy` fills its cells with what the chapter's run printed
(gradflow_site/run.py), and mkdocs-jupyter renders it.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
_SECTION = re.compile(r"^# --8<-- \[(start|end):([A-Za-z0-9_\-]+)\]\s*$")

__all__ = [
    "sections",
    "modules_needed",
    "library_files",
    "companions",
    "notebook",
    "write_all",
    "chapters",
    "is_script",
    "executed",
    "executed_copy",
]


def sections(snippet: Path) -> list[tuple[str, str]]:
    """Return (name, code) for every named section of a snippet file, in file order."""
    out, name, lines = [], None, []
    for line in snippet.read_text(encoding="utf-8").splitlines():
        m = _SECTION.match(line)
        if m and m.group(1) == "start":
            name, lines = m.group(2), []
        elif m and m.group(1) == "end":
            out.append((name, "\n".join(lines).strip("\n")))
            name = None
        elif name is not None:
            lines.append(line)
    return out


def _imports(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {
            n.split(".")[1]
            for n in names
            if n.startswith("gradflow_ref.") and len(n.split(".")) >= 2
        }
    return found


def modules_needed(code: str, package: Path = ROOT / "gradflow_ref") -> list[str]:
    """Return the gradflow_ref modules `code` imports, directly or through each other."""
    todo, seen = list(_imports(code)), set()
    while todo:
        name = todo.pop()
        path = package / f"{name}.py"
        if name in seen or not path.exists():
            continue
        seen.add(name)
        todo += _imports(path.read_text(encoding="utf-8"))
    return sorted(seen)


_WORDS = {  # how the chapters write these words in headings
    "fp8": "FP8",
    "fp16": "FP16",
    "bf16": "BF16",
    "fp32": "FP32",
    "fp64": "FP64",
    "tf32": "TF32",
    "lr": "LR",
    "ddp": "DDP",
    "mlp": "MLP",
    "gpu": "GPU",
    "cpu": "CPU",
    "zero": "ZeRO",
    "fsdp": "FSDP",
    "fsdp2": "FSDP2",
    "sdpa": "SDPA",
    "io": "IO",
    "e4m3": "E4M3",
    "e5m2": "E5M2",
    "adamw": "AdamW",
    "gpt": "GPT",
    "llm": "LLM",
}


def _title(name: str) -> str:
    """Return a section name as a heading: "high_lr" -> "High LR", "fp16" -> "FP16"."""
    words = [_WORDS.get(w, w) for w in name.split("_")]
    return " ".join([words[0][:1].upper() + words[0][1:]] + words[1:])


def library_files(code: str, package: Path = ROOT / "gradflow_ref") -> dict[str, str]:
    """Return {path in the package: text} of what `code` needs of gradflow_ref.

    The modules it imports, directly or not, and the package data it reads: the committed
    benchmark runs (committed/bench-*.json) when gradflow_ref.benchmarks is among them, the text
    (data/shakespeare.txt) when it names it or needs gradflow_ref.transformer, which reads it.
    """
    files = {"__init__.py": (package / "__init__.py").read_text(encoding="utf-8")}
    for module in modules_needed(code, package):
        files[f"{module}.py"] = (package / f"{module}.py").read_text(encoding="utf-8")
    if "shakespeare.txt" in code or "transformer.py" in files:  # read by importlib.resources
        files["data/shakespeare.txt"] = (package / "data" / "shakespeare.txt").read_text("utf-8")
    if "benchmarks.py" in files:
        for run in sorted((package / "committed").glob("bench-*.json")):
            files[f"committed/{run.name}"] = run.read_text(encoding="utf-8")
    return files


def companions(code: str, snippets: Path = ROOT / "snippets") -> dict[str, str]:
    """Return {file name: text} of the snippet files `code` imports as modules.

    The arena imports train.py, the script of Chapter 7c, as its reader does: saved beside it,
    with the text it reads beside itself (shakespeare.txt).
    """
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
    paths = [snippets / f"{n}.py" for n in sorted(names)]
    found = {p.name: p.read_text(encoding="utf-8") for p in paths if p.exists()}
    for text in list(found.values()):  # the text files a script reads beside itself (train.py's)
        for data in sorted(snippets.glob("*.txt")):
            if data.name in text:
                found[data.name] = data.read_text(encoding="utf-8")
    return found


def notebook(name: str, title: str, package: Path = ROOT / "gradflow_ref") -> nbformat.NotebookNode:
    """Return the lab of chapter `name` (snippets/<name>.py), a valid nbformat-4 notebook.

    Cell ids are `<name>-<index>` (nbformat 4.5 needs ids; stable ones keep two generations
    byte-identical).
    """
    parts = sections(ROOT / "snippets" / f"{name}.py")
    code = "\n\n".join(c for _, c in parts)
    scripts = companions(code)
    # what the lab's code and the scripts that import gradflow_ref need of it
    needs = [code, *(t for n, t in scripts.items() if n.endswith(".py") and "gradflow_ref" in t)]
    files = library_files("\n\n".join(needs), package)
    setup = (
        "# Setup: write the gradflow_ref modules this lab uses to a temporary folder and import\n"
        "# them from there (generated from the repository; needs only torch and matplotlib).\n"
        "import atexit, os, shutil, sys, tempfile\n"
        "from pathlib import Path\n\n"
        f"_SOURCES = {json.dumps(files, indent=0, sort_keys=True)}\n\n"
        "_lib = Path(tempfile.mkdtemp(prefix='gradflow_lab_'))\n"
        "atexit.register(shutil.rmtree, _lib, True)  # removed when the kernel stops\n"
        "for _name, _text in _SOURCES.items():\n"
        "    _path = _lib / 'gradflow_ref' / _name\n"
        "    _path.parent.mkdir(parents=True, exist_ok=True)\n"
        "    _path.write_text(_text)\n"
        + (
            f"_SCRIPTS = {json.dumps(scripts, indent=0, sort_keys=True)}  # saved beside the lab\n"
            "for _name, _text in _SCRIPTS.items():\n"
            "    (_lib / _name).write_text(_text)\n"
            if scripts
            else ""
        )
        + "sys.path.insert(0, str(_lib))\n"
        "os.environ['PYTHONPATH'] = os.pathsep.join(\n"
        "    [str(_lib)] + [p for p in [os.environ.get('PYTHONPATH')] if p])\n"
        "for _mod in [m for m in sys.modules if m.split('.')[0] == 'gradflow_ref']:\n"
        "    del sys.modules[_mod]\n"
        "if os.environ.get('GRADFLOW_SITE_BUILD') and hasattr(sys.stdout, 'flush_interval'):\n"
        "    # site build only: one output block per cell, whatever the timing, so pages are\n"
        "    # byte-reproducible (interactively, output streams as usual)\n"
        "    sys.stdout.flush_interval = sys.stderr.flush_interval = 1e9\n"
        "%matplotlib inline"
    )
    md, code_cell = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        md(
            f"# Lab: {title}\n\n"
            f"The runnable code of the chapter *{title}* of the Gradient Flow guide, one cell "
            "per section of the chapter, in page order. It needs only `torch` and "
            "`matplotlib` and runs on a laptop CPU (or in Colab) in seconds. Run the cells "
            "from the top; change a number and run again to see what moves.",
        ),
        code_cell(setup),
    ]
    for section, text in parts:
        cells += [md(f"## {_title(section)}"), code_cell(text)]
    for i, cell in enumerate(cells):
        cell.id = f"{name}-{i}"
    nb = nbformat.v4.new_notebook(
        cells=cells,
        metadata={
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
    )
    nbformat.validate(nb)  # raises nbformat.ValidationError naming the offending field
    return nb


def is_script(snippet: Path) -> bool:
    """Return whether a snippet file is a program run from the command line (train.py).

    A script is downloaded as the file itself and run with python or torchrun; it has no lab.
    """
    return 'if __name__ == "__main__":' in snippet.read_text(encoding="utf-8")


def chapters(nav: list) -> dict[str, str]:
    """Return {name: title} for every nav page whose snippet file (not a script) has its name."""
    found = {}
    for entry in nav:
        for title, target in entry.items() if isinstance(entry, dict) else [(None, entry)]:
            if isinstance(target, list):
                found |= chapters(target)
            elif isinstance(target, str) and target.endswith(".md"):
                name = Path(target).stem
                snippet = ROOT / "snippets" / f"{name}.py"
                if snippet.exists() and not is_script(snippet):
                    found[name] = title or name
    return found


def write_all(out_dir: Path, titles: dict[str, str]) -> list[Path]:
    """Write labs/<name>.ipynb under `out_dir` for every chapter in `titles`; return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, title in sorted(titles.items()):
        text = nbformat.writes(notebook(name, title)) + "\n"  # as Jupyter saves it
        path = out_dir / f"{name}.ipynb"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            # atomic: a concurrent build (two worktrees' serve and test) never reads half a file
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        paths.append(path)
    return paths


def executed(nav: list | None) -> list[str]:
    """Return every executed lab the nav lists (labs/run/<name>.ipynb), in nav order."""
    out = []
    for entry in nav or []:
        for target in entry.values() if isinstance(entry, dict) else [entry]:
            if isinstance(target, list):
                out += executed(target)
            elif isinstance(target, str) and target.startswith("labs/run/"):
                out.append(target)
    return out


def executed_copy(uri: str, config) -> str:
    """Return labs/<name>.ipynb with each code cell's output as the chapter's run printed it.

    A cell is a snippet section; its output is that of the chapter block that shows the section
    (the setup cell, which the chapter does not run, has none). Raises ValueError for a lab
    whose cells the chapter does not all show.
    """
    from gradflow_site import cells, run

    name = Path(uri).stem
    docs = Path(config.docs_dir)
    nb = nbformat.reads((docs / "labs" / f"{name}.ipynb").read_text(encoding="utf-8"), 4)
    page = run.result_of(f"{docs.name}/{name}.md")
    printed = {cells.normal(c["code"]): o for c, o in zip(page["cells"], page["outputs"])}
    count = 0
    for cell in nb.cells[2:]:
        if cell.cell_type != "code":
            continue
        out = printed.get(cells.normal(cell.source))
        if out is None or "output" not in out:
            raise ValueError(f"docs/{uri}: chapter {name} does not show cell {cell.id} as run")
        count += 1
        cell.execution_count = count
        if out["output"]:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=out["output"])]
    nb.cells[1].metadata["tags"] = ["setup"]  # its code is hidden on the page (mkdocs.yml)
    repo = config.extra.get("repository", "").rstrip("/").removeprefix("https://github.com/")
    colab = f"https://colab.research.google.com/github/{repo}/blob/main/docs/labs/{name}.ipynb"
    links = nbformat.v4.new_markdown_cell(
        f"[Download this notebook](../../{name}.ipynb) · [Open in Colab]({colab}) · "
        "The setup cell, hidden here, writes the `gradflow_ref` modules the lab uses into a "
        "temporary folder, so the notebook needs nothing but torch and matplotlib."
    )
    links.id = f"{name}-links"
    nb.cells.insert(1, links)
    return nbformat.writes(nb)


def main(argv: list[str] | None = None) -> None:
    import yaml

    out = Path((argv or sys.argv[1:] or ["docs/labs"])[0])

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)["nav"]
    for path in write_all(out, chapters(nav)):
        print(path)


if __name__ == "__main__":
    main()
