"""The site builds strictly, offline, reproducibly, and refuses to publish anything broken."""

from __future__ import annotations

import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import torch

from tests._site import ROOT, child_config, mkdocs_build, tagged_processes

pytestmark = pytest.mark.build


def _pages(site_dir: Path) -> list[Path]:
    return sorted(p for p in site_dir.rglob("*.html") if p.name != "404.html")


def test_build_strict_succeeds_without_warnings(site):
    assert (site / "index.html").exists()
    assert (site / "telephone" / "index.html").exists()


def test_every_page_carries_the_verification_stamp(site):
    for page in _pages(site):
        html = page.read_text(encoding="utf-8")
        assert 'class="gf-stamp"' in html, f"{page} has no verification stamp"
        assert f"torch {torch.__version__}" in html, f"{page} stamp lacks the torch version"
        assert re.search(r"commit <code>([0-9a-f]{12}(\+dirty)?|unknown)", html), page


def test_pages_make_no_third_party_request(site):
    # every src/href that loads something must be local; links (<a href>) may point anywhere
    loads = re.compile(
        r"<(?:script|img|iframe|source)\b[^>]*\bsrc=\"(https?:)?//|"
        r"<link\b(?![^>]*rel=\"(?:canonical|alternate)\")[^>]*\bhref=\"(https?:)?//"
    )
    for page in _pages(site):
        html = page.read_text(encoding="utf-8")
        match = loads.search(html)
        assert match is None, f"{page} loads a third-party asset: {match.group(0)}"
        assert "fonts.googleapis" not in html and "fonts.gstatic" not in html, page
        # Material's bundle would fetch mermaid from a CDN for such a block
        assert 'class="mermaid"' not in html, f"{page} has a mermaid diagram"


def test_math_is_mathml_typeset_at_build_time(site):
    html = (site / "telephone" / "index.html").read_text(encoding="utf-8")
    assert html.count("<math") >= 5
    for page in _pages(site):
        html = page.read_text(encoding="utf-8")
        assert "katex" not in html.lower(), f"{page} still references KaTeX"
        assert 'class="arithmatex">\\(' not in html, f"{page} has untypeset TeX"


def test_search_splits_code_identifiers(site):
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    separator = re.compile(index["config"]["separator"])
    assert [t for t in separator.split("torch.sigmoid") if t] == ["torch", "sigmoid"]
    assert [t for t in separator.split("GradScaler") if t] == ["GradScaler"]
    assert [t for t in separator.split("clip_grad_norm_") if t] == ["clip_grad_norm_"]
    text = " ".join(doc["text"] for doc in index["docs"])
    assert "chain_gradients" in text


def test_chapter_figures_are_inline_svg_with_text_alternative(site):
    html = (site / "telephone" / "index.html").read_text(encoding="utf-8")
    figures = re.findall(
        r'<figure class="gf-figure">(?:<div class="gf-figure__wide">)?<svg role="img" '
        r'aria-label="([^"]+)"',
        html,
    )
    assert figures and all(len(alt) > 40 for alt in figures)
    # a phone rendering beside each wide one, named the same
    phone = re.findall(r'<div class="gf-figure__narrow"><svg role="img" aria-label="([^"]+)"', html)
    assert phone and set(phone) <= set(figures)


def test_executed_output_contains_no_traceback(site):
    for page in _pages(site):
        html = page.read_text(encoding="utf-8")
        assert "Traceback (most recent call last)" not in html, page


def test_build_fails_and_names_the_page_for_broken_input(tmp_path):
    pages = {
        "index.md": "# Home\n\n[a link to nowhere](nowhere.md) and [a bad anchor](#no-such)\n",
        "raises.md": (
            '# Raises\n\n```python exec="1"\nraise RuntimeError("boom in a snippet")\n```\n'
        ),
    }
    cfg = child_config(tmp_path, pages, nav=["index.md", "raises.md", "gone.md"])
    result = mkdocs_build(tmp_path / "out", config=cfg)
    log = result.stdout + result.stderr
    assert result.returncode != 0, "a strict build with broken pages passed"
    assert "docs/raises.md:4: the executed block raised RuntimeError: boom in a snippet" in log
    assert "nowhere.md" in log and "index.md" in log
    assert "no-such" in log
    assert "gone.md" in log
    assert "Aborted with" in log


def test_build_fails_on_a_missing_snippet_section(tmp_path):
    page = '# S\n\n```python exec="1"\n--8<-- "snippets/telephone.py:no_such_section"\n```\n'
    cfg = child_config(tmp_path, {"index.md": page})
    result = mkdocs_build(tmp_path / "out", config=cfg)
    assert result.returncode != 0
    log = result.stdout + result.stderr
    assert "docs/index.md:4: includes snippets/telephone.py:no_such_section" in log
    assert "Traceback" not in log


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []  # links, and the local assets a page loads
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if a.get("name"):
            self.ids.add(a["name"])
        if tag == "a" and a.get("href") is not None:
            self.hrefs.append(a["href"])
        elif tag == "link" and a.get("href") and a.get("rel") not in ("canonical", "alternate"):
            self.hrefs.append(a["href"])
        elif tag in ("img", "script", "source", "iframe") and a.get("src"):
            self.hrefs.append(a["src"])


def broken_links(site_dir: Path) -> list[str]:
    """Return 'page -> href' for every internal link, anchor or local asset (script,
    stylesheet, image; a stylesheet's url(...)) the built site cannot satisfy. The strict build
    checks links in Markdown, not what a page or stylesheet loads."""
    parsed: dict[Path, _Links] = {}

    def parse(path: Path) -> _Links:
        if path not in parsed:
            parsed[path] = _Links()
            parsed[path].feed(path.read_text(encoding="utf-8"))
        return parsed[path]

    broken = []
    for page in sorted(site_dir.rglob("*.html")):
        if page.name == "404.html":
            continue  # its links are absolute to the deployed site, checked on other pages
        for href in parse(page).hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site_dir)} -> {href} (no such file)")
            elif parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in parse(target).ids:
                    broken.append(f"{page.relative_to(site_dir)} -> {href} (no such anchor)")
    for css in sorted(site_dir.rglob("*.css")):
        text = css.read_text(encoding="utf-8", errors="replace")
        for ref in re.findall(r"url\(\s*['\"]?([^'\")]+)['\"]?\s*\)", text):
            parts = urlsplit(ref)
            if not (parts.scheme or parts.netloc or ref.startswith(("#", "data:"))):
                if not (css.parent / unquote(parts.path)).exists():
                    broken.append(f"{css.relative_to(site_dir)} -> {ref} (no such file)")
    return broken


def test_no_broken_internal_links_or_anchors(site):
    assert broken_links(site) == []


def test_link_checker_finds_a_broken_file_anchor_and_asset(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="here">x</h2>', encoding="utf-8")
    (tmp_path / "index.html").write_text(
        '<a href="a/#here">ok</a><a href="a/#gone">bad anchor</a><a href="b/">bad page</a>'
        '<a href="https://example.org/">external</a><img src="missing.png" alt="m">'
        '<link rel="stylesheet" href="gone.css">',
        encoding="utf-8",
    )
    (tmp_path / "x.css").write_text("a { background: url('nope.woff2') }", encoding="utf-8")
    assert broken_links(tmp_path) == [
        "index.html -> a/#gone (no such anchor)",
        "index.html -> b/ (no such file)",
        "index.html -> missing.png (no such file)",
        "index.html -> gone.css (no such file)",
        "x.css -> nope.woff2 (no such file)",
    ]


def test_the_wheel_ships_gradflow_ref_only(tmp_path):
    """gradflow_site (the build) and tools/ run from the checkout; `pip install .` gets the
    reference implementation alone (`make env` puts the checkout on the environment's path)."""
    import sys
    import zipfile

    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("gradflow_ref-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"gradflow_ref"}
    # the committed benchmark runs travel with it, read by importlib.resources once installed
    committed = sorted(p.name for p in (ROOT / "results").glob("bench-*.json"))
    assert sorted(n.split("/")[-1] for n in names if "/committed/" in n) == committed
    target = tmp_path / "installed"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(target), str(wheel)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    read = subprocess.run(
        [sys.executable, "-S", "-c", "import sys; sys.path[:0] = [sys.argv[1]]; "
         "from gradflow_ref.benchmarks import committed_runs as c; "
         "print(*[r['file'] for r in c()])", str(target)],
        cwd=tmp_path, check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert read.stdout.split() == committed


@pytest.mark.build
def test_build_leaves_no_temporary_file_and_no_process(site):
    temp = site.parent / f"{site.name}.tmp"  # the build's TMPDIR (tests/_site.py)
    if not temp.exists():
        pytest.skip("the site was not built by this test run (GRADFLOW_TEST_SITE)")
    assert not list(temp.iterdir()), f"the build left {sorted(p.name for p in temp.iterdir())}"
    assert tagged_processes(str(site), var="GRADFLOW_BUILD") == []
