"""Inline values: a computed number written in a sentence of the page's Markdown.

`` `{python} f"{norm:.3f}"` `` in a sentence is evaluated at build in the page's session, right
after the last executed block above it, so it shows the value the page has at that point.
`transform` swaps each expression for a placeholder and inserts a hidden executed block after
that block; the hidden block prints the values inside an HTML comment (`record`, so
markdown-exec's result cache keeps them), and `substitute` puts them in the placeholders. A name
the prose used must not be rebound by a later block while the prose still reads it
(gradflow_site/rebinding.py, checked before any block runs). Every problem is returned as a
message naming the page file and line.
"""

from __future__ import annotations

import html
import json
import re

from gradflow_site.fences import fences
from gradflow_site.rebinding import rebound

__all__ = ["record", "substitute", "transform"]

_EXPR = re.compile(r"(?<!`)`\{python\}[ \t]+([^`\n]+?)[ \t]*`(?!`)")
_PLACEHOLDER = re.compile(r"@@gfi-(\d+)@@")
_RECORD = re.compile(r"<!--gf-inline (\{.*?\})-->")
_RECORD_PARAGRAPH = re.compile(r"<p>\s*(<!--gf-inline \{.*?\}-->)\s*</p>")
_EMPTY_PARAGRAPH = re.compile(r"<p>\s*</p>\n?")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")


def transform(markdown: str, path: str, offset: int = 0) -> tuple[str, list[str]]:
    """Return `markdown` with inline expressions as placeholders, and hidden blocks to fill them.

    Args:
        markdown: the page's Markdown body (front matter removed).
        path: the page as "docs/<file>.md", for messages.
        offset: lines of front matter above the body, so messages give the file's line.

    Returns:
        (new Markdown, problems); each problem names the file and line.
    """
    lines = markdown.split("\n")
    blocks = fences(lines)
    inside = {i for f in blocks for i in range(f.start, f.end + 1)}
    executed = [f for f in blocks if f.executed]
    named = [f.session for f in executed if f.session]
    default = named[0] if named else None
    problems: list[str] = []
    groups: dict[int, list[tuple[int, str, int]]] = {}  # insert-after line -> expressions
    sessions: dict[int, str] = {}
    reads: list[tuple[int, str, str | None]] = []  # (line index, expression, session)
    counter = 0

    for n, line in enumerate(lines):
        if n in inside or "{python}" not in line:
            continue
        where = f"{path}:{n + 1 + offset}"
        if _HEADING.match(line):
            problems.append(
                f"{where}: an inline value cannot sit in a heading (the table of contents is "
                "built before it is computed); move it into the text below the heading."
            )
            continue

        def swap(m: re.Match, n: int = n) -> str:
            nonlocal counter
            above = [f for f in executed if f.end < n]
            anchor = above[-1] if above else None
            session = (anchor.session if anchor else None) or default
            key = anchor.end if anchor else -1
            groups.setdefault(key, []).append((counter, m.group(1), n + 1 + offset))
            sessions[key] = session or f"inline-{path}"
            reads.append((n, m.group(1), session))
            counter += 1
            return f"@@gfi-{counter - 1}@@"

        lines[n] = _EXPR.sub(swap, line)
        if "{python}" in lines[n]:
            problems.append(
                f"{where}: '{{python}}' outside an inline value; write it as "
                "`{python} EXPRESSION` in single backticks on one line."
            )
    problems += rebound(lines, executed, reads, path, offset)
    if not groups:
        return markdown, problems
    # insert bottom-up so earlier line numbers stay valid
    for key in sorted(groups, reverse=True):
        if key >= 0:
            indent = next(f.indent for f in executed if f.end == key)
            at = key + 1
        elif executed:
            indent, at = executed[0].indent, executed[0].start
        else:
            indent, at = "", len(lines)
        items = [[str(i), expr, path, line] for i, expr, line in groups[key]]
        code = (
            '__import__("gradflow_site.inline", fromlist=["record"]).record('
            f"globals(), {json.dumps(items)})"
        )
        block = [
            "",
            f'{indent}```python exec="1" html="1" session="{sessions[key]}"',
            f"{indent}print({code})",
            f"{indent}```",
            "",
        ]
        lines[at:at] = block
    return "\n".join(lines), problems


def record(namespace: dict, items: list[list]) -> str:
    """Evaluate inline expressions in a page session; return them in an HTML comment.

    Called by the hidden block `transform` inserts. An expression that raises is returned as an
    error for `substitute` to report, so one bad expression does not stop the page.
    """
    out = {}
    for key, expr, _path, _line in items:
        try:
            value = eval(expr, namespace)  # noqa: S307 - the page's own code, at build time
            out[key] = {"v": value if isinstance(value, str) else str(value)}
        except Exception as err:  # noqa: BLE001 - reported with the page and line
            out[key] = {"e": f"{type(err).__name__}: {err}"}
    # only strings hold '-', so escaping it keeps the JSON valid and the comment unbroken
    text = json.dumps(out, ensure_ascii=True).replace("-", "\\u002d")
    return f"<!--gf-inline {text}-->"


def substitute(page_html: str, markdown: str, path: str) -> tuple[str, list[str]]:
    """Fill the placeholders of `page_html` with the values the hidden blocks recorded.

    Args:
        page_html: the rendered page.
        markdown: the transformed Markdown (to name each expression in messages).
        path: the page as "docs/<file>.md".

    Returns:
        (HTML, problems): an expression that raised, or one never evaluated, is a problem
        naming the file, line and expression.
    """
    values: dict[str, dict] = {}
    for m in _RECORD.finditer(page_html):
        values.update(json.loads(m.group(1)))
    page_html = _RECORD.sub("", _RECORD_PARAGRAPH.sub(r"\1", page_html))
    page_html = _EMPTY_PARAGRAPH.sub("", page_html)  # hidden blocks that print nothing
    exprs = _expression_index(markdown)
    problems = []

    def fill(m: re.Match) -> str:
        key = m.group(1)
        expr, where = exprs.get(key, ("?", path))
        found = values.get(key)
        if found is None:
            problems.append(f"{where}: inline value `{{python}} {expr}` was never evaluated.")
            return "??"
        if "e" in found:
            problems.append(f"{where}: inline value `{{python}} {expr}` raised {found['e']}")
            return "??"
        return html.escape(found["v"], quote=True)

    return _PLACEHOLDER.sub(fill, page_html), problems


def _expression_index(markdown: str) -> dict[str, tuple[str, str]]:
    """Map placeholder key -> (expression, "file:line") from the hidden blocks' code."""
    out = {}
    for m in re.finditer(r"\.record\(globals\(\), (\[.*\])\)\)$", markdown, re.M):
        for key, expr, path, line in json.loads(m.group(1)):
            out[key] = (expr, f"{path}:{line}")
    return out
