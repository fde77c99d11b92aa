"""gradflow_site.mathml: TeX in the built pages becomes MathML; what cannot be converted warns."""

from __future__ import annotations

import logging
import re

import pytest

from gradflow_site.mathml import MathError, to_mathml, typeset


def test_to_mathml_converts_a_fraction():
    out = to_mathml(r"\frac{a}{b}")
    assert re.search(r"<mfrac><mrow><mi>a</mi></mrow><mrow><mi>b</mi></mrow></mfrac>", out)
    assert out.startswith("<math><semantics>") and out.endswith("</semantics></math>")


def test_to_mathml_marks_display_math_as_block():
    assert to_mathml("x^2", display=True).startswith('<math display="block">')
    assert "display=" not in to_mathml("x^2")


def test_to_mathml_keeps_the_tex_as_an_escaped_annotation():
    out = to_mathml(r"a < b \& c")
    assert '<annotation encoding="application/x-tex">a &lt; b \\&amp; c</annotation>' in out


def test_to_mathml_unescapes_underscores_in_text():
    out = to_mathml(r"\text{world\_size} \times \texttt{grad\_accum}")
    assert "<mtext>world_size</mtext>" in out
    assert '<mtext mathvariant="monospace">grad_accum</mtext>' in out


def test_to_mathml_drops_row_spacing_that_would_print_as_text():
    out = to_mathml(r"\begin{cases} a & x < 0,\\[2mm] b & x \ge 0 \end{cases}")
    assert out.count("<mtr>") == 2
    assert "2mm" not in out.split("<annotation")[0]


def test_to_mathml_raises_on_an_unknown_command():
    with pytest.raises(MathError, match=r"does not know '\\\\notacommand'") as info:
        to_mathml(r"x + \notacommand{y}")
    assert info.value.formula == r"x + \notacommand{y}"


def test_to_mathml_raises_on_alignment_outside_an_environment():
    with pytest.raises(MathError, match="'&' outside an environment"):
        to_mathml(r"\begin{aligned} a &= b \end{aligned}")


def test_to_mathml_raises_on_a_syntax_error():
    with pytest.raises(MathError, match="latex2mathml"):
        to_mathml("x_{")


def test_typeset_converts_inline_and_display_arithmatex():
    html = (
        '<p>Let <span class="arithmatex">\\(a &lt; b\\)</span>.</p>\n'
        '<div class="arithmatex">\\[\n\\sqrt{N}\n\\]</div>'
    )
    out = typeset(html, "docs/x.md")
    assert '<span class="arithmatex"><math><semantics><mrow><mi>a</mi><mo>&#x0003C;' in out
    assert '<div class="arithmatex"><math display="block"><semantics><mrow><msqrt>' in out
    assert "\\(" not in out.split("<annotation")[0] and "\\[" not in out.split("<annotation")[0]


def test_typeset_converts_notebook_markdown_math_but_not_code():
    cell = (
        '<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown jp-MarkdownOutput">'
        "<p>Inline $x^2$, also \\(y\\); costs $5 and $10; <code>$HOME</code></p>"
        "<p>$$\\frac{1}{2}$$</p></div>"
    )
    out = typeset(cell, "docs/labs/run/x.ipynb")
    assert out.count('<span class="arithmatex"><math>') == 2
    assert out.count('<div class="arithmatex"><math display="block">') == 1
    assert "costs $5 and $10" in out and "<code>$HOME</code>" in out


def test_typeset_warns_with_page_and_formula_and_keeps_the_source(caplog):
    html = '<span class="arithmatex">\\(\\notacommand\\)</span>'
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.gradflow.math"):
        out = typeset(html, "docs/telephone.md")
    assert out == html
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("docs/telephone.md: cannot typeset the formula")
    assert "'\\\\notacommand'" in record.getMessage()


def test_to_mathml_sets_big_operator_limits_below_and_above():
    out = to_mathml(r"\sum_{i=1}^{n} x_i", display=True)
    assert '<munderover><mo movablelimits="true">∑</mo>' in out


def test_to_mathml_keeps_delimiters_without_left_right_at_their_size():
    out = to_mathml(r"\lVert g \rVert + \left( x \right)")
    assert out.count('<mo stretchy="false">‖</mo>') == 2
    assert '<mo stretchy="true" fence="true" form="prefix">(</mo>' in out
