"""A chapter's cells: its executed blocks and its inline values, in page order.

A block is a fenced ```` ```python exec="1" ```` block (markdown-exec's syntax) with its snippet
includes expanded; an inline value is `` `{python} expr` `` in the prose (Quarto's syntax), not
one quoted in a ``code span``. Each value is evaluated after the last executed block above it
(gradflow_site/run.py). `page_cells` also names the file and line every line of code comes
from, a chapter's or a snippet's, for error messages; `key` is what a cached run is filed under.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

__all__ = ["Cell", "cells", "fences", "key", "normal", "page_cells", "values", "versions"]

ROOT = Path(__file__).resolve().parents[1]
INLINE = re.compile(r"(?<!`)`\{python\}[ \t]+([^`\n]+?)[ \t]*`(?!`)")
_QUOTED = re.compile(r"(`{2,}).+?\1")  # a code span of two or more backticks shows the syntax
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_EXEC = re.compile(r"""\bexec\s*=\s*["']?(?:1|true|yes|on)\b""", re.I)
_OPTION = re.compile(r"""\b(session|source)\s*=\s*["']([^"']*)["']""")
_INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<file>[^":]+)(?::(?P<section>[\w\-]+))?"\s*$')
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*\n", re.S)


@dataclass
class Cell:
    kind: str  # "block" (an executed fence) or "value" (an inline expression)
    code: str  # the block's code (dedented, includes expanded) or the value's expression
    session: str  # the block's session, or the one a value is evaluated in
    where: list[str]  # "file:line" of each line of `code`, for messages
    shown: bool = False  # a block whose code the reader sees (`source="..."`)


def fences(lines: list[str]):
    """Yield (first, last, indent, info) of every fenced block of `lines`, in order."""
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        char, size, first = m.group("fence")[0], len(m.group("fence")), i
        close = re.compile(rf"^[ \t]*{re.escape(char)}{{{size},}}[ \t]*$")
        i += 1
        while i < len(lines) and not close.match(lines[i]):
            i += 1
        yield first, min(i, len(lines) - 1), m.group("indent"), m.group("info")
        i += 1


def values(text: str) -> list[re.Match]:
    """Return the inline values of a line of prose, not those quoted in a ``code span``."""
    quoted = [m.span() for m in _QUOTED.finditer(text)]
    return [m for m in INLINE.finditer(text) if not any(a <= m.start() < b for a, b in quoted)]


def normal(code: str) -> str:
    """Return `code` as blocks are compared: trailing blanks and blank edge lines dropped."""
    return "\n".join(line.rstrip() for line in code.strip("\n").split("\n"))


def cells(lines: list[str], where: list[str] | None = None) -> list[Cell]:
    """Return the cells of a page's Markdown `lines`, snippet includes already expanded.

    Args:
        lines: the page's Markdown as the Markdown preprocessors hand it over.
        where: "file:line" of each of `lines` (default: "line N").
    """
    where = where or [f"line {n}" for n in range(1, len(lines) + 1)]
    inside: set[int] = set()
    blocks: list[tuple[int, Cell]] = []  # (last line index, cell)
    for first, last, indent, info in fences(lines):
        inside.update(range(first, last + 1))
        if not info.startswith(("python", "py ")) or not _EXEC.search(info):
            continue
        opts = dict(_OPTION.findall(info))
        body = [
            t[len(indent) :] if t.startswith(indent) else t.lstrip()
            for t in lines[first + 1 : last]
        ]
        # blank edge lines dropped from the code are dropped from its origins too
        lead = next((n for n, t in enumerate(body) if t.strip()), 0)
        cell = Cell("block", normal("\n".join(body)), opts.get("session", ""), [], "source" in opts)
        cell.where = [where[first]] + where[first + 1 + lead : last]
        blocks.append((last, cell))
    default = next((b.session for _, b in blocks if b.session), "")
    after: dict[int, list[Cell]] = {}  # index of the block above (-1: none) -> its values
    for n, text in enumerate(lines):
        if n in inside or "{python}" not in text:
            continue
        above = [i for i, (last, _) in enumerate(blocks) if last < n]
        session = (blocks[above[-1]][1].session if above else "") or default
        for m in values(text):
            cell = Cell("value", m.group(1), session, [where[n]])
            after.setdefault(above[-1] if above else -1, []).append(cell)
    out = list(after.get(-1, []))
    for i, (_, block) in enumerate(blocks):
        out.append(block)
        out += after.get(i, [])
    return out


def page_cells(text: str, path: str, expand) -> list[Cell]:
    """Return the cells of the Markdown file `text` (named `path`), with each line's origin.

    `expand(lines)` expands snippet includes as the build does (pymdownx.snippets); each
    expanded line is traced to its snippet file and line.
    """
    m = _FRONT_MATTER.match(text)
    offset = text[: m.end()].count("\n") if m else 0
    lines, where = [], []
    for n, line in enumerate(text[m.end() if m else 0 :].split("\n"), offset + 1):
        inc = _INCLUDE.match(line)
        if inc is None:
            lines.append(line)
            where.append(f"{path}:{n}")
            continue
        try:
            got = expand([line])
        except Exception as err:  # pymdownx.snippets' SnippetMissingError names no page
            what = ":".join(filter(None, inc.group("file", "section")))
            raise ValueError(f"{path}:{n}: includes {what}: {err}") from None
        origin = _section_lines(inc.group("file"), inc.group("section"))
        if len(origin) != len(got):
            origin = [f"{path}:{n}"] * len(got)
        lines += got
        where += origin
    return cells(lines, where)


def _section_lines(file: str, name: str | None) -> list[str]:
    """Return "file:line" of every line a snippet include stands for."""
    try:
        text = (ROOT / file).read_text(encoding="utf-8").split("\n")
    except OSError:
        return []
    out, inside = [], name is None
    for n, line in enumerate(text, 1):
        marker = re.match(r"^\s*# --8<-- \[(start|end):([\w\-]+)\]", line)
        if marker and marker.group(2) == name:
            if marker.group(1) == "end":
                break
            inside = True
        elif inside and not marker:
            out.append(f"{file}:{n}")
    return out


def versions() -> str:
    """Return the versions a page's results depend on, as one line."""
    import platform

    names = ("torch", "matplotlib", "numpy", "markdown-exec")
    found = [f"{n}={metadata.version(n)}" for n in names]
    return " ".join([f"python={platform.python_version()}", *found])


def key(page: list[Cell]) -> str:
    """Return the cache key of a page's cells: their code, the versions and matplotlibrc."""
    h = hashlib.sha256(versions().encode())
    rc = ROOT / "matplotlibrc"
    h.update(rc.read_bytes() if rc.exists() else b"")
    for c in page:
        h.update(json.dumps([c.kind, c.session, c.code]).encode() + b"\0")
    return h.hexdigest()
