"""Lab pages: download and Colab links, the setup cell folded, headings as the chapters write."""

from __future__ import annotations

import pytest

from gradflow_site import lab_page, labs


def test_colab_url_opens_the_committed_notebook():
    url = lab_page.colab_url("https://github.com/gradient-flow/gradient-flow", "arena")
    assert url == (
        "https://colab.research.google.com/github/gradient-flow/gradient-flow/blob/main/"
        "notebooks/arena.ipynb"
    )


def test_colab_url_rejects_a_repository_that_is_not_on_github():
    with pytest.raises(ValueError, match="set extra.repository in mkdocs.yml"):
        lab_page.colab_url("", "arena")


def test_fold_setup_wraps_exactly_the_setup_cell():
    page = (
        '<div id="cell-id=x-0">intro</div>'
        '<div class="jp-Cell" id="cell-id=x-1"><div>setup</div><div>more</div></div>'
        '<div id="cell-id=x-2">next</div>'
    )
    out, code = lab_page.fold_setup(page, "x")
    assert '<details class="gf-lab-setup"><summary>' in out
    assert out.startswith('<div id="cell-id=x-0">intro</div>')
    assert out.endswith('</p></details><div id="cell-id=x-2">next</div>')
    assert "<div>setup</div>" not in out and code == ""  # the cell is replaced; no <pre>


def test_fold_setup_links_the_code_as_text_instead_of_showing_it():
    page = (
        '<div class="jp-Cell" id="cell-id=x-1"><pre><span class="n">_SOURCES</span> = {\n'
        '"flow.py": "&quot;&quot;&quot;doc&quot;&quot;&quot;",\n"_checks.py": "x &lt; 1"}'
        '</pre></div><div id="cell-id=x-2">next</div>'
    )
    out, code = lab_page.fold_setup(page, "x")
    assert code == '_SOURCES = {\n"flow.py": """"doc"""",\n"_checks.py": "x < 1"}'
    assert "<pre" not in out and f'href="{lab_page.setup_file("x")}"' in out
    assert "2 modules of <code>gradflow_ref</code> (_checks.py, flow.py)" in out
    assert "Its code (0 KiB)" in out


def test_add_links_puts_both_links_under_the_title():
    out = lab_page.add_links("<h1>Lab</h1><p>text</p>", "arena", "https://github.com/o/r")
    assert out.startswith('<h1>Lab</h1><p class="gf-lab-links">')
    assert 'href="../../arena.ipynb" download' in out and "colab.research.google.com" in out


@pytest.mark.parametrize(
    ("section", "heading"), [("fp16", "FP16"), ("high_lr", "High LR"), ("setup", "Setup")]
)
def test_lab_headings_write_abbreviations_as_the_chapters_do(section, heading):
    assert labs._title(section) == heading


@pytest.mark.build
def test_built_lab_pages_have_links_and_a_folded_setup(site):
    for page in sorted((site / "labs" / "run").glob("*/index.html")):
        html = page.read_text(encoding="utf-8")
        assert 'class="gf-lab-links"' in html and "Open in Colab" in html, page
        assert '<details class="gf-lab-setup">' in html, page
        code = (page.parent / lab_page.setup_file(page.parent.name)).read_text(encoding="utf-8")
        assert code.startswith("# Setup: write the gradflow_ref modules"), page
        assert "_SOURCES = {" in code and "<span" not in code, page
        assert "writes 0 modules" not in html and "gradflow_ref</code> (__init__.py" in html, page
        assert ">Fp16<" not in html and ">High lr<" not in html, page
