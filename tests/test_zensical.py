"""The site under Zensical, the successor of Material for MkDocs, which runs Python-Markdown
extensions and markdown-exec but not MkDocs hooks: every value, figure, caption, quiz and formula
renders there too, and every page says what the MkDocs build says (the stamp at its foot, a
template block filled by a hook, aside). The chapters' runs come from the cache the shared
MkDocs build wrote (`site`), so this build runs no chapter again; what it tests is that
Zensical's Markdown pipeline puts every value where the MkDocs one does."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._site import ROOT

pytestmark = [pytest.mark.build, pytest.mark.long(seconds=20)]


def words(page: Path) -> list[str]:
    """The words of a page's article: what a reader reads, figures and widget data aside."""
    text = page.read_text(encoding="utf-8")
    text = re.search(r"<article[^>]*>(.*)</article>", text, re.S).group(1)
    text = re.sub(r'<p class="gf-stamp">.*?</p>', " ", text, flags=re.S)
    text = re.sub(r"<svg[\s\S]*?</svg>", " [figure] ", text)
    text = re.sub(r'data-gf-data="[^"]*"', " ", text)
    return html.unescape(re.sub(r"<[^>]+>", " ", text)).split()


@pytest.fixture(scope="module")
def zensical_site(site, tmp_path_factory):
    # Zensical wants its configuration in the project's root and the site inside it
    name = f"zensical-{os.getpid()}"
    config = ROOT / f".{name}.yml"
    out = ROOT / "build" / name
    config.write_text(
        (ROOT / "mkdocs.yml").read_text(encoding="utf-8") + f"\nsite_dir: build/{name}\n",
        encoding="utf-8",
    )
    env = dict(os.environ, GRADFLOW_EXEC_CACHE="1", GRADFLOW_CACHE_DIR=f"{site}.cache")
    cmd = [str(Path(sys.executable).parent / "zensical"), "build", "--strict", "--clean"]
    try:
        result = subprocess.run(
            [*cmd, "--config-file", str(config)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        copy = tmp_path_factory.mktemp("zensical")
        subprocess.run(["cp", "-r", f"{out}/.", str(copy)], check=True)
        yield copy
    finally:
        config.unlink(missing_ok=True)
        subprocess.run(["rm", "-rf", str(out)], check=False)


def test_zensical_leaves_no_inline_value_unrendered(zensical_site):
    left = [p.relative_to(zensical_site) for p in zensical_site.rglob("*.html")
            if "{python}" in p.read_text(encoding="utf-8")]  # fmt: skip
    assert not left


def test_zensical_pages_say_what_the_mkdocs_pages_say(site, zensical_site):
    chapters = sorted(p.relative_to(site) for p in site.glob("*/index.html"))
    assert len(chapters) > 10
    for page in chapters:
        assert words(zensical_site / page) == words(site / page), page


def test_zensical_renders_figures_captions_quizzes_and_math(site, zensical_site):
    for page in sorted(p.relative_to(site) for p in site.glob("*/index.html")):
        mine, theirs = ((s / page).read_text(encoding="utf-8") for s in (site, zensical_site))
        for part in ("<figcaption", "<svg", 'class="quiz"', "<math", "data-gf-widget="):
            assert theirs.count(part) == mine.count(part), (page, part)
        assert "@@gf-" not in theirs, page  # every figure and widget named from its caption
