"""Build errors that speak to a contributor: the Markdown file and line, and the snippet line.

markdown-exec reports a failing block with the whole block and a traceback through the build
tool, and every later block of the same page then fails with a NameError of its own. Instead,
each chapter's executed blocks are registered here (`register_page`), exec_cache.py asks
`explain` for one short message when a block raises, and later blocks of that session are not
run: one error, where it is, once. `LogFilter` shows that message, and names the page in
markdown-exec's own; `check_includes` names a broken snippet include before it can stop the
build.
"""

from __future__ import annotations

import logging
import re
import traceback

from gradflow_site.fences import INCLUDE, ROOT, fences, section

__all__ = [
    "MARKER",
    "LogFilter",
    "check_includes",
    "explain",
    "install_log_filter",
    "register_page",
    "set_page",
]

MARKER = "@@gf-error@@"  # LogFilter shows only what follows it

# code of each executed block -> where each of its lines comes from ("file", line)
_origins: dict[str, list[tuple[str, int]]] = {}
_current: dict[str, str | None] = {"page": None}  # the page being rendered, for LogFilter


def register_page(markdown: str, path: str, offset: int = 0) -> None:
    """Record where every line of every executed block of a page comes from.

    Args:
        markdown: the page's Markdown body, before the build changes it.
        path: the page as "docs/<file>.md".
        offset: lines of front matter above the body.
    """
    lines = markdown.split("\n")
    for fence in fences(lines):
        if not fence.executed:
            continue
        code, origins = [], []
        for i in range(fence.start + 1, fence.end):
            text = lines[i][len(fence.indent) :]
            inc = INCLUDE.match(text)
            found = section(inc.group("file"), inc.group("section")) if inc else None
            if inc:
                code += [t for t, _ in found]
                origins += [(inc.group("file"), n) for _, n in found]
            else:
                code.append(text)
                origins.append((path, i + 1 + offset))
        # pymdownx.snippets dedents a section; match on the stripped lines
        _origins[_key("\n".join(code))] = [(path, fence.start + 1 + offset)] + origins


def _key(code: str) -> str:
    return "\n".join(line.strip() for line in code.strip("\n").split("\n"))


def explain(code: str, error: BaseException | None, fallback: str) -> str:
    """Return one message for a block that raised: where, what, and the failing line.

    Args:
        code: the block's code as it ran (includes expanded).
        error: the exception the code raised (markdown-exec's ExecutionError's cause).
        fallback: markdown-exec's own report, used when the block is unknown.
    """
    origins = _origins.get(_key(code))
    if origins is None or error is None:
        return fallback
    (page, fence_line), lines = origins[0], origins[1:]
    lineno = None
    if isinstance(error, SyntaxError) and str(error.filename).startswith("<code block"):
        lineno = error.lineno
    else:
        for frame in traceback.extract_tb(error.__traceback__):
            if frame.filename.startswith("<code block"):
                lineno = frame.lineno
    where = f"{page}:{fence_line}"
    detail = ""
    if lineno and 0 < lineno <= len(lines):
        file, line = lines[lineno - 1]
        text = code.strip("\n").split("\n")[lineno - 1].strip()
        where = f"{page}:{line}" if file == page else f"{page}:{fence_line} ({file}:{line})"
        detail = f"\n    {text}"
    what = f"{type(error).__name__}: {error}"
    return (
        f"{MARKER}{where}: the executed block raised {what}{detail}\n"
        "(later blocks of this page's session were not run)"
    )


def check_includes(markdown: str, path: str, offset: int = 0) -> tuple[str, list[str]]:
    """Return `markdown` with broken `--8<--` includes neutralised, and one problem for each.

    pymdownx.snippets would stop the build on a missing file or section with a 30-frame
    traceback that names neither the page nor the line; this names both and lists what exists.
    """
    lines = markdown.split("\n")
    problems = []
    for n, text in enumerate(lines):
        m = INCLUDE.match(text)
        if not m:
            continue
        file, name = m.group("file"), m.group("section")
        where = f"{path}:{n + 1 + offset}"
        if not (ROOT / file).is_file():
            problems.append(f"{where}: includes {file}, which does not exist.")
        elif name is not None and not section(file, name):
            found = re.findall(
                r"^\s*# --8<-- \[start:([\w\-]+)\]", (ROOT / file).read_text(encoding="utf-8"), re.M
            )
            problems.append(
                f"{where}: includes section '{name}' of {file}, which has no such section "
                f"(it has: {', '.join(found) or 'none'})."
            )
        else:
            continue
        lines[n] = text[: len(text) - len(text.lstrip())] + f"# missing include: {file}"
    return "\n".join(lines), problems


def set_page(uri: str | None) -> None:
    """Name the page (its path under docs/) being rendered from now on; None between pages."""
    _current["page"] = uri


class LogFilter(logging.Filter):
    """Make the build's log speak to a contributor.

    A block's error comes as `explain` wrote it: what follows MARKER, without markdown-exec's
    copy of the block. markdown-exec's other execution errors are prefixed with the page being
    rendered (`set_page`). MkDocs' notice of a dirty build is information, not a warning:
    `make serve` rebuilds dirty on purpose, and a strict serve must not stop on it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        if MARKER in msg:
            record.msg = msg[msg.index(MARKER) + len(MARKER) :].split("\n```")[0].strip()
            return True
        page = _current["page"]
        if page and "Execution of" in msg[:60] and "docs/" not in msg[:80]:
            record.msg = f"docs/{page}: {msg}"
        if msg.startswith("A 'dirty' build is being performed"):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def install_log_filter(logger: logging.Logger) -> None:
    """Add a LogFilter to each handler of `logger` that has none yet."""
    for handler in logger.handlers:
        # by name: a LogFilter from an earlier import of this module counts too
        if not any(type(f).__name__ == "LogFilter" for f in handler.filters):
            handler.addFilter(LogFilter())
