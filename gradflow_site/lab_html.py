"""Slim the executed lab pages that mkdocs-jupyter renders (labs/run/*): keep only the CSS they use.

mkdocs-jupyter inlines all of JupyterLab's CSS into every notebook page, plus
a MathJax loader with an empty URL and a mermaid loader. `slim(html)` keeps, of each inlined
stylesheet, only the rules whose class names all occur on the page and the custom properties
those rules read; it drops a stylesheet the plugin writes as a Python list by mistake, the
MathJax scripts (math is MathML, gradflow_site/mathml.py) and the mermaid loader when the page has
no mermaid diagram, and merges runs of string-token spans in the highlighted code (fewer
elements to lay out, same colours). gradflow_site/hooks.py applies it to every executed lab.
"""

from __future__ import annotations

import functools
import re

import tinycss2

__all__ = ["purge_css", "slim"]

_CLASS = re.compile(r"\.(-?[A-Za-z_][\w-]*)")
_VAR_USE = re.compile(r"var\(\s*(--[\w-]+)")
_KEYFRAMES = re.compile(r"@(?:-[a-z]+-)?keyframes\s+([\w-]+)")


def _text(tokens) -> str:
    return tinycss2.serialize(tokens).strip()


def _selectors(prelude) -> list[str]:
    """Split a rule's prelude at its top-level commas (tinycss2 nests brackets as blocks)."""
    parts: list[list] = [[]]
    for token in prelude:
        if token.type == "literal" and token.value == ",":
            parts.append([])
        else:
            parts[-1].append(token)
    return [text for part in parts if (text := _text(part))]


def _declarations(content) -> tuple[str, ...]:
    items = tinycss2.parse_blocks_contents(content, skip_comments=True, skip_whitespace=True)
    return tuple(
        f"{d.name}:{tinycss2.serialize(d.value).rstrip()}" + ("!important" if d.important else "")
        for d in items
        if d.type == "declaration"
    )


@functools.lru_cache(maxsize=16)
def _parse(css: str) -> tuple:
    """Flatten `css` to (media, selectors as (text, classes), declarations) and keyframes.

    Keyframes come as (media, None, full text). Cached: both lab pages inline the same sheets.
    """
    flat = []

    def walk(rules, media: str) -> None:
        for rule in rules:
            if rule.type == "at-rule":
                if rule.content is None:
                    continue  # @charset, @import: nothing to keep inline
                prelude = f"@{rule.at_keyword} {_text(rule.prelude)}"
                if rule.lower_at_keyword in ("media", "supports"):
                    walk(tinycss2.parse_rule_list(rule.content, True, True), prelude)
                else:
                    flat.append((media, None, f"{prelude}{{{_text(rule.content)}}}"))
            elif rule.type == "qualified-rule":
                selectors = tuple(
                    (text, frozenset(_CLASS.findall(text))) for text in _selectors(rule.prelude)
                )
                flat.append((media, selectors, _declarations(rule.content)))

    walk(tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True), "")
    return tuple(flat)


def purge_css(css: str, classes: set[str]) -> str:
    """Return the part of `css` that can apply to a page whose elements carry `classes`.

    A rule survives when every class its selector names is in `classes` (a selector list keeps
    its matching selectors); custom properties survive when a surviving declaration reads them,
    directly or through other custom properties; keyframes when a surviving rule names them.
    """
    rules = []
    for media, selectors, decls in _parse(css):
        if selectors is None:
            rules.append((media, None, decls))
            continue
        kept = [text for text, names in selectors if names <= classes]
        if kept:
            rules.append((media, ",".join(kept), decls))
    defs: dict[str, list[str]] = {}
    used: set[str] = set()
    values = []
    for _media, selector, decls in rules:
        if selector is None:
            continue
        for decl in decls:
            name, _, value = decl.partition(":")
            if name.strip().startswith("--"):
                defs.setdefault(name.strip(), []).append(value)
            else:
                used |= set(_VAR_USE.findall(value))
                values.append(value)
    todo = list(used)
    while todo:
        for value in defs.get(todo.pop(), []):
            for var in _VAR_USE.findall(value):
                if var not in used:
                    used.add(var)
                    todo.append(var)
    named = " ".join(values)
    out: dict[str, list[str]] = {}
    for media, selector, decls in rules:
        if selector is None:
            name = _KEYFRAMES.match(decls)
            if name and re.search(rf"(?<![\w-]){re.escape(name.group(1))}(?![\w-])", named):
                out.setdefault(media, []).append(decls)
            continue
        kept = [d for d in decls if not d.startswith("--") or d.partition(":")[0].strip() in used]
        if kept:
            out.setdefault(media, []).append(f"{selector}{{{';'.join(kept)}}}")
    return "".join(
        "".join(items) if not media else f"{media}{{{''.join(items)}}}"
        for media, items in out.items()
    )


_STYLE = re.compile(r"<style[^>]*>(.*?)</style>\s*", re.S)
# pygments token spans of the String family (s, s1, s2, se, si, sa, dl...): the JupyterLab
# style colours them all alike, so a run of them is one span on screen
_STRING_RUN = re.compile(r'(?:<span class="(?:s[a-z0-9]?|dl)">[^<]*</span>){2,}')
_SPAN_TEXT = re.compile(r"<span[^>]*>([^<]*)</span>")
_WHITESPACE = re.compile(r'<span class="w">(\s*)</span>')
_LIST_STYLE = re.compile(r"<style>\s*\[.*?</style>\s*", re.S)
_CLASSES = re.compile(r'\bclass="([^"]*)"')
_DROP = [
    re.compile(r"<!-- Load mathjax -->\s*<script src=\"[^\"]*\">\s*</script>\s*", re.S),
    re.compile(
        r"<!-- MathJax configuration -->\s*<script type=\"text/x-mathjax-config\">.*?"
        r"</script>\s*<!-- End of mathjax configuration -->",
        re.S,
    ),
]
_MERMAID = re.compile(
    r"<script type=\"module\">\s*document\.addEventListener\(\"DOMContentLoaded\".*?</script>"
    r"\s*(<!-- End of mermaid configuration -->)",
    re.S,
)


def slim(html: str) -> str:
    """Return notebook page content with its inline CSS purged and its unused scripts dropped.

    Only the part before the notebook (`<div class="jupyter-wrapper">`) is touched, so a
    stylesheet inside a cell's output (an SVG's) stays as it is.
    """
    cut = html.find('<div class="jupyter-wrapper">')
    if cut < 0:
        return html
    head, body = html[:cut], html[cut:]
    # mkdocs-jupyter appends its CSS again after the notebook, written as a Python list
    body = _LIST_STYLE.sub("", body)
    # fewer elements for the browser to style and lay out (a lab's setup cell holds the
    # library source as string literals: thousands of spans), same look
    body = _STRING_RUN.sub(
        lambda m: '<span class="s2">' + "".join(_SPAN_TEXT.findall(m.group(0))) + "</span>", body
    )
    body = _WHITESPACE.sub(r"\1", body)
    classes = {c for attr in _CLASSES.findall(body) for c in attr.split()}
    kept = []
    for css in _STYLE.findall(head):
        purged = purge_css(css, classes)
        if purged and purged not in kept:
            kept.append(purged)
    head = _STYLE.sub("", head)
    for pattern in _DROP:
        head = pattern.sub("", head)
    if "jp-Mermaid" not in classes:
        head = _MERMAID.sub(r"\1", head)
    return head + (f"<style>{''.join(kept)}</style>\n" if kept else "") + body
