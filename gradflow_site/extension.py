"""The guide's Python-Markdown extension: executed chapters, inline values, figures, MathML.

Listed in mkdocs.yml under `markdown_extensions`, so it runs under MkDocs and under Zensical
alike. For each page it

- runs the page's code once (gradflow_site/run.py: a process pool, a cache keyed by every file
  the code read) and gives every ```` ```python exec="1" ```` block its output through
  markdown-exec's own formatting (`formatter`, set as the `python` custom fence of
  pymdownx.superfences, calls `markdown_exec.base_format`);
- writes each inline value (`` `{python} expr` ``, Quarto's syntax) into its sentence, as the
  run computed it at that point of the page;
- names each figure and widget for screen readers after its caption (pymdownx.blocks.caption's
  `/// caption`): a figure's text alternative is the caption's text, a widget's title the
  caption's bold lead;
- typesets TeX as MathML (gradflow_site/mathml.py), so no math script runs in the browser.

A block or value that raises, and a figure without a caption, log a warning that names the file
and line, so `mkdocs build --strict` fails.
"""

from __future__ import annotations

import html
import logging
import re
from collections import defaultdict, deque

from markdown import Extension
from markdown.postprocessors import Postprocessor
from markdown.preprocessors import Preprocessor
from markupsafe import Markup

from gradflow_site import cells, mathml, run
from gradflow_site.render import ALT
from gradflow_site.widgets import TITLE

__all__ = ["GradflowExtension", "formatter", "makeExtension"]

log = logging.getLogger("mkdocs.plugins.gradflow")


# pymdownx.blocks.caption's <figure> around a figure or widget a block printed
_CAPTIONED = re.compile(
    r"<figure>\s*(?P<inner><figure class=\"gf-(?:figure|widget)\"(?:(?!<figcaption>)[\s\S])*?"
    r"</figure>)\s*<figcaption>\s*(?:<p>)?(?P<text>[\s\S]*?)(?:</p>)?\s*</figcaption>\s*</figure>"
)
_LEAD = re.compile(r"^\s*<strong>(?P<title>[\s\S]*?)</strong>\s*")
_EMPTY = re.compile(r"<p>\s*</p>\n?")  # where a block printed nothing (its placeholder's)
_TAGS = re.compile(r"<[^>]+>")


class _Page:
    """One conversion's run: each block's output, in page order per (session, code)."""

    def __init__(self, path: str, page: list[cells.Cell], outputs: list[dict]):
        self.path = path
        self.blocks: dict[tuple[str, str], deque] = defaultdict(deque)
        for cell, out in zip(page, outputs):
            if cell.kind == "block":
                self.blocks[(cell.session, cell.code)].append(out)

    def output(self, session: str, code: str) -> dict:
        queue = self.blocks.get((session or "", cells.normal(code)))
        if not queue:
            return {"error": f"{self.path}: a block ran that the page's run did not see"}
        return queue.popleft()


class _Chapter(Preprocessor):
    """Run the page's cells; write its inline values; keep its blocks' outputs for `formatter`."""

    def run(self, lines: list[str]) -> list[str]:
        page = cells.cells(lines)
        self.md.gradflow_page = None
        if not page:
            return lines
        path, done = run.result(page)
        self.md.gradflow_page = _Page(path, page, done["outputs"])
        values = deque(o for c, o in zip(page, done["outputs"]) if c.kind == "value")
        inside = {i for a, b, _, _ in cells.fences(lines) for i in range(a, b + 1)}
        for n, text in enumerate(lines):
            if n not in inside and "{python}" in text:
                parts, end = [], 0
                for m in cells.values(text):
                    parts += [text[end : m.start()], self._value(m, text, values)]
                    end = m.end()
                lines[n] = "".join(parts) + text[end:]
        return lines

    def _value(self, match: re.Match, text: str, values: deque) -> str:
        out = values.popleft() if values else {"skipped": True}
        if "value" not in out:
            if "error" in out:
                log.warning(out["error"])
            return "??"
        if text[: match.start()].count("$") % 2:  # inside $...$ math: TeX, not HTML
            return out["value"]
        return self.md.htmlStash.store(html.escape(out["value"], quote=True))


def formatter(src, language, css_class, options, md, **kwargs) -> Markup:
    """Format an executed Python block with markdown-exec, its output taken from the page's run.

    mkdocs.yml sets it as pymdownx.superfences' custom fence for `python`, with markdown-exec's
    own validator reading the block's options (`source`, `result`, `html`, `session`, ...).
    A block that raised is reported by markdown-exec, with the run's message naming the line.
    """
    import markdown_exec

    page = getattr(md, "gradflow_page", None)

    def output(code, session=None, **_):
        found = page.output(session, code) if page else {"error": "the page was not run"}
        if "error" in found:
            raise markdown_exec.ExecutionError(f"```text\n{found['error']}\n```")
        return found.get("output", "")

    return markdown_exec.base_format(language=language, run=output, code=src, md=md, **options)


class _Figures(Postprocessor):
    """Move each caption into the figure or widget it captions, naming it; report the rest.

    Also drops the empty paragraph a block that printed nothing leaves behind.
    """

    def run(self, text: str) -> str:
        text = _CAPTIONED.sub(_captioned, _EMPTY.sub("", text))
        for placeholder, what in ((ALT, "figure"), (TITLE, "widget")):
            if placeholder in text:
                log.warning(
                    f"{_path(self.md)}: a {what} has no caption: write a `/// caption` block "
                    "(pymdownx.blocks.caption) right after the block that prints it."
                )
        return text


def _path(md) -> str:
    page = getattr(md, "gradflow_page", None)
    return page.path if page else "a page without code"


def _plain(fragment: str) -> str:
    """Return the text of an HTML fragment; inline TeX as words a screen reader reads out:
    `$\\sqrt{k}$` as "sqrt k", `$2^{-24}$` as "2^-24", without delimiters or backslashes."""
    text = re.sub(r"\\[()\[\]]", "", html.unescape(_TAGS.sub("", fragment)))
    text = re.sub(r"([_^])\{([^{}]*)\}", r"\1\2", text)  # 2^{-24} -> 2^-24
    text = re.sub(r"\\([A-Za-z]+)", r"\1 ", text)  # \sqrt{k} -> sqrt {k}
    return " ".join(text.replace("{", " ").replace("}", "").split())


def _captioned(m: re.Match) -> str:
    """Return the inner figure with the caption as its own <figcaption>, named after it."""
    figure, caption = m.group("inner"), m.group("text").strip()
    figure = figure[: figure.rindex("</figure>")]
    if figure.startswith('<figure class="gf-widget"'):  # its title: the caption's bold lead
        lead = _LEAD.match(caption)
        title = _plain(lead.group("title")).rstrip(".:") if lead else _plain(caption)
        figure = figure.replace(TITLE, html.escape(title, quote=True))
        figure = figure.replace(ALT, html.escape(_plain(caption), quote=True))
        caption = caption[lead.end() :].strip() if lead else ""
        return (
            f"{figure}<figcaption>{caption}</figcaption></figure>"
            if caption
            else f"{figure}</figure>"
        )
    figure = figure.replace(ALT, html.escape(_plain(caption), quote=True))
    return f"{figure}<figcaption>{caption}</figcaption></figure>"


class _Math(Postprocessor):
    def run(self, text: str) -> str:
        return mathml.typeset(text, _path(self.md))


class GradflowExtension(Extension):
    def extendMarkdown(self, md) -> None:
        # after pymdownx.snippets (32) and whitespace normalisation (30), before fences (25)
        md.preprocessors.register(_Chapter(md), "gradflow_chapter", 28)
        # after raw HTML is back in the page (30)
        md.postprocessors.register(_Figures(md), "gradflow_figures", 8)
        md.postprocessors.register(_Math(md), "gradflow_math", 7)


def makeExtension(**kwargs) -> GradflowExtension:  # noqa: N802 - Python-Markdown's name
    return GradflowExtension(**kwargs)
