"""Math typeset at build time: TeX in the built pages becomes MathML, so no math JS runs.

Converts pymdownx.arithmatex's generic output (`<span class="arithmatex">\\(...\\)</span>`,
`<div class="arithmatex">\\[...\\]</div>`, HTML-escaped) and the `$...$`, `$$...$$`, `\\(...\\)`
and `\\[...\\]` math of Jupyter Markdown cells (the executed labs) with latex2mathml. Browsers
render MathML natively. A formula latex2mathml cannot convert, or converts only in part (an
unknown command left as text), logs a warning naming the page and the formula, so the strict
build fails instead of publishing raw TeX. Called from gradflow_site/hooks.py (on_page_content).
"""

from __future__ import annotations

import logging
import re
from html import escape, unescape

__all__ = ["MathError", "to_mathml", "typeset"]

log = logging.getLogger("mkdocs.hooks.gradflow.math")


class MathError(ValueError):
    """A formula that latex2mathml cannot convert faithfully; `formula` holds its TeX."""

    def __init__(self, formula: str, why: str):
        super().__init__(f"cannot typeset the formula {formula!r}: {why}")
        self.formula = formula
        self.why = why


# `\\[2mm]` (a row break with extra space): latex2mathml would print "[2mm]" as math
_ROW_SPACE = re.compile(r"\\\\\s*\[[^\]]*\]")
# text-mode escapes that latex2mathml leaves as typed inside \text{} and \texttt{}
_TEXT_ESCAPE = re.compile(r"\\([_%&#$\{\}])")
_MTEXT = re.compile(r"(<mtext[^>]*>)([^<]*)(</mtext>)")
_TEXT_NODE = re.compile(r">([^<]+)<")
_MN = re.compile(r"<mn>([^<]*)</mn>")
_NUMBER = re.compile(r"[0-9.,]*")


def to_mathml(tex: str, display: bool = False) -> str:
    """Return `tex` (plain TeX, not HTML-escaped, no delimiters) as a `<math>` element.

    `display` gives `display="block"`. The TeX source rides along as an annotation (copying the
    formula copies its TeX). Raises MathError when latex2mathml fails or leaves TeX behind.
    """
    from latex2mathml.converter import convert

    source = tex.strip()
    if not source:
        raise MathError(tex, "the formula is empty")
    try:
        mathml = convert(_ROW_SPACE.sub(r"\\\\", source))
    except Exception as err:  # latex2mathml raises its own exception types, and others
        why = str(err) or type(err).__name__
        raise MathError(source, f"latex2mathml: {why}") from None
    mathml = _MTEXT.sub(lambda m: m[1] + _TEXT_ESCAPE.sub(r"\1", m[2]) + m[3], mathml)
    for text in _TEXT_NODE.findall(mathml):
        if "\\" in text:
            raise MathError(source, f"latex2mathml does not know {text.strip()!r}")
        if text.strip() == "&":
            raise MathError(source, "'&' outside an environment that latex2mathml supports")
    for number in _MN.findall(mathml):
        if not _NUMBER.fullmatch(number):
            raise MathError(source, f"latex2mathml read {number!r} as a number")
    match = re.fullmatch(r"<math[^>]*>(.*)</math>", mathml, re.S)
    if match is None:
        raise MathError(source, "latex2mathml returned no <math> element")
    inner = match.group(1)
    if not re.fullmatch(r"<mrow>.*</mrow>", inner, re.S):
        inner = f"<mrow>{inner}</mrow>"
    # MathML Core has no named spaces; \! is a negative thin space
    inner = _tidy(inner.replace('width="negativethinmathspace"', 'width="-0.167em"'), source)
    attrs = ' display="block"' if display else ""
    return (
        f"<math{attrs}><semantics>{inner}"
        f'<annotation encoding="application/x-tex">{escape(source, quote=False)}</annotation>'
        "</semantics></math>"
    )


# big operators and functions whose limits go below and above in display math, as in TeX
_LIMIT_OPS = set("\u2211\u220f\u2210\u22c0\u22c1\u22c2\u22c3\u2a00\u2a01\u2a02\u2a04\u2a06") | {
    "lim",
    "max",
    "min",
    "sup",
    "inf",
    "argmax",
    "argmin",
    "det",
    "Pr",
    "gcd",
}
_FENCES = set("|\u2016()[]{}\u27e8\u27e9\u230a\u230b\u2308\u2309")
_SCRIPT_TO_LIMIT = {"msubsup": "munderover", "msub": "munder", "msup": "mover"}


def _tidy(inner: str, source: str) -> str:
    """Set limits and fences as TeX does, where latex2mathml's MathML would render otherwise.

    Delimiters written without \\left/\\right keep their size (MathML stretches a fence
    by default). Scripts on a big operator become movable limits (below/above in display math).

    latex2mathml writes `\\sum_{i}^{n}` as msubsup, which stays a sub/superscript even in a
    display formula; TeX sets such limits below and above there. munderover with
    movablelimits does the same in MathML: limits in display math, scripts inline.
    """
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(inner)
    except ET.ParseError as err:
        raise MathError(source, f"latex2mathml wrote malformed MathML ({err})") from None
    changed = False
    for el in root.iter():
        fixed = not {"stretchy", "minsize"} & el.attrib.keys()  # not \\left or \\Big
        if el.tag == "mo" and fixed and (el.text or "") in _FENCES:
            # \\lvert, \\lVert, \\langle: a fixed size in TeX; MathML would stretch them
            el.set("stretchy", "false")
            changed = True
        first = el[0] if len(el) else None
        if (
            el.tag in _SCRIPT_TO_LIMIT
            and first is not None
            and first.tag == "mo"
            and (first.text or "").strip() in _LIMIT_OPS
        ):
            el.tag = _SCRIPT_TO_LIMIT[el.tag]
            first.set("movablelimits", "true")
            changed = True
    return ET.tostring(root, encoding="unicode", short_empty_elements=True) if changed else inner


_ARITHMATEX = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.S)
_INLINE = re.compile(r"\A\\\((.*)\\\)\Z", re.S)
_BLOCK = re.compile(r"\A\\\[(.*)\\\]\Z", re.S)
# a Jupyter Markdown cell as nbconvert renders it (mkdocs-jupyter), up to its closing tag
_NB_MARKDOWN = re.compile(
    r'(<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown[^"]*"[^>]*>)(.*?)(</div>)', re.S
)
# code and preformatted text inside a Markdown cell: never math
_CODE = re.compile(r"(<(code|pre)\b.*?</\2>)", re.S)
_NB_MATH = re.compile(
    r"\$\$(?P<d1>.+?)\$\$|\\\[(?P<d2>.+?)\\\]|(?<![\\$])\$(?P<i1>[^$\s](?:[^$]*?[^$\s])?)\$"
    r"|\\\((?P<i2>.+?)\\\)",
    re.S,
)


def _arithmatex(match: re.Match) -> str:
    tag, body = match.group(1), unescape(match.group(2)).strip()
    wrapped = (_BLOCK if tag == "div" else _INLINE).fullmatch(body)
    tex = wrapped.group(1) if wrapped else body
    return f'<{tag} class="arithmatex">{to_mathml(tex, display=tag == "div")}</{tag}>'


def _notebook_math(match: re.Match) -> str:
    display = match["d1"] is not None or match["d2"] is not None
    tex = unescape(next(g for g in match.groups() if g is not None))
    tag = "div" if display else "span"
    return f'<{tag} class="arithmatex">{to_mathml(tex, display=display)}</{tag}>'


def typeset(html: str, where: str = "") -> str:
    """Return `html` with every arithmatex formula and notebook Markdown formula as MathML.

    A formula that cannot be converted stays as it was and logs a warning that names `where`
    (the page) and the formula; with `strict: true` the build then fails.
    """

    def guarded(convert):
        def run(match: re.Match) -> str:
            try:
                return convert(match)
            except MathError as err:
                log.warning(f"{where}: {err}. Rewrite it with commands latex2mathml supports.")
                return match.group(0)

        return run

    def notebook_cell(match: re.Match) -> str:
        # re.split with two groups yields text, code element, tag name, text, ...
        parts = _CODE.split(match.group(2))
        body = "".join(
            _NB_MATH.sub(guarded(_notebook_math), part) if i % 3 == 0 else part
            for i, part in enumerate(parts)
            if i % 3 != 2
        )
        return match.group(1) + body + match.group(3)

    if 'class="arithmatex"' in html:
        html = _ARITHMATEX.sub(guarded(_arithmatex), html)
    if "jp-RenderedMarkdown" in html:
        html = _NB_MARKDOWN.sub(notebook_cell, html)
    return html
