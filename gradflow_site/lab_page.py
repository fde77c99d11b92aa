"""The executed lab pages: a download and an "Open in Colab" link, and the setup cell folded.

`finish` makes a rendered lab (labs/run/<name>.ipynb) a page of the site: it applies both, and
the slimming of gradflow_site/lab_html.py. The Colab link opens the committed copy of the
notebook (notebooks/<name>.ipynb, kept equal to the generated one by tests/test_notebooks.py)
in the repository that mkdocs.yml's `extra.repository` names.
"""

from __future__ import annotations

import html
import re
from pathlib import PurePosixPath

from gradflow_site import lab_html

__all__ = ["colab_url", "add_links", "finish", "fold_setup", "setup_file"]

_H1_END = re.compile(r"(<h1\b[^>]*>.*?</h1>)", re.S)
_DIV = re.compile(r"<div\b|</div>")
_PRE = re.compile(r"<pre\b[^>]*>(.*?)</pre>", re.S)
_TAG = re.compile(r"<[^>]+>")


def colab_url(repository: str, name: str, branch: str = "main") -> str:
    """Return the Colab address of notebooks/<name>.ipynb in a GitHub `repository` URL.

    Raises:
        ValueError: `repository` is not a https://github.com/OWNER/REPO address.
    """
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)/?", repository or "")
    if not m:
        raise ValueError(
            f"colab_url: `repository` must be https://github.com/OWNER/REPO, got {repository!r}; "
            "set extra.repository in mkdocs.yml."
        )
    return (
        f"https://colab.research.google.com/github/{m.group(1)}/{m.group(2)}/blob/{branch}/"
        f"notebooks/{name}.ipynb"
    )


def add_links(page_html: str, name: str, repository: str) -> str:
    """Put a download link and an "Open in Colab" link under the lab's title."""
    bar = (
        '<p class="gf-lab-links">'
        f'<a class="md-button" href="../../{name}.ipynb" download>Download this notebook</a> '
        f'<a class="md-button" href="{html.escape(colab_url(repository, name))}">'
        "Open in Colab</a></p>"
    )
    return _H1_END.sub(lambda m: m.group(1) + bar, page_html, count=1)


def setup_file(name: str) -> str:
    """Return the file name of lab `name`'s setup code, written beside its page.

    Named per lab: the offline copy puts every lab page in one folder (labs/run/<name>.html).
    """
    return f"{name}-setup.txt"


def fold_setup(page_html: str, name: str) -> tuple[str, str]:
    """Fold the lab's setup cell (cell 1: the embedded gradflow_ref sources) into <details>.

    The cell's code, the source of every gradflow_ref module the lab uses, was most of a lab
    page's bytes and made the labs the slowest pages to
    paint. The page keeps a summary and links to the code as text (`setup_file(name)`, which
    the caller writes beside the page) and to the notebook that holds it.

    Returns:
        (page HTML, the setup cell's code as plain text); the page unchanged and "" when the
        lab has no setup cell.
    """
    start = page_html.find(f'id="cell-id={name}-1"')
    if start < 0:
        return page_html, ""
    start = page_html.rfind("<div", 0, start)
    depth = 0
    for m in _DIV.finditer(page_html, start):
        depth += 1 if m.group(0) == "<div" else -1
        if depth == 0:
            end = m.end()
            break
    else:
        return page_html, ""
    pre = _PRE.search(page_html, start, end)
    code = html.unescape(_TAG.sub("", pre.group(1))) if pre else ""
    modules = sorted(set(re.findall(r'^"(\w+\.py)": ', code, re.M)))
    summary = "Setup cell: writes the gradflow_ref modules this lab uses to a temporary folder"
    body = (
        f"<p>This cell writes {len(modules)} modules of <code>gradflow_ref</code> "
        f"({', '.join(modules)}) into a temporary folder and imports them from there, so the "
        "notebook runs with nothing but torch and matplotlib installed. Its code "
        f"({len(code.encode()) / 1024:.0f} KiB) is in the notebook and "
        f'<a href="{setup_file(name)}">here as text</a>.</p>'
    )
    return (
        f'{page_html[:start]}<details class="gf-lab-setup"><summary>{summary}</summary>'
        f"{body}</details>{page_html[end:]}",
        code,
    )


def finish(page_html: str, path: str, repository: str) -> tuple[str, dict[str, bytes], list[str]]:
    """Return a lab's page as the site serves it, the files to write beside it, and problems.

    Args:
        page_html: the lab as mkdocs-jupyter rendered it.
        path: the lab as "docs/labs/run/<name>.ipynb".
        repository: mkdocs.yml's `extra.repository`, for the Colab link.

    Returns:
        (page HTML, {file name: bytes} beside the page: the setup code as text and the output
        images, problems: each output image that has no description).
    """
    name = PurePosixPath(path).stem
    page_html = lab_html.slim(page_html)  # drop the unused JupyterLab CSS mkdocs-jupyter inlines
    page_html, setup_code = fold_setup(page_html, name)
    page_html = add_links(page_html, name, repository)
    page_html = lab_html.compress_images(page_html)  # fewer bytes, the same plot
    page_html = lab_html.size_images(page_html)  # no layout shift when an output image decodes
    page_html, beside = lab_html.external_images(page_html, name)  # fetched when near the screen
    if setup_code:
        beside[setup_file(name)] = setup_code.encode("utf-8")
    page_html, undescribed = lab_html.describe_images(page_html, name)
    problems = [
        f"{path}: the image that section '{key}' draws has no text alternative. Add a "
        "description under that key to FIGURE_ALT in gradflow_site/render.py."
        for key in undescribed
    ]
    return page_html, beside, problems
