"""The fenced code blocks of a chapter's Markdown, and the snippet sections they include.

What the build's Markdown passes share: where each fenced block starts and ends, whether
markdown-exec runs it, in which session, whether the reader sees its code (`fences`), and the
lines a `--8<-- "snippets/<file>.py:<section>"` include stands for (`INCLUDE`, `section`), each
with its line in the snippet file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["INCLUDE", "ROOT", "Fence", "fences", "section"]

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<file>[^":]+)(?::(?P<section>[\w\-]+))?"\s*$')

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_EXEC = re.compile(r"""\bexec\s*=\s*["']?(?:1|true|yes|on)\b""", re.I)
_SESSION = re.compile(r"""\bsession\s*=\s*["']([^"']+)["']""")
_SOURCE = re.compile(r"""\bsource\s*=\s*["']?(?!["'])""")  # the reader sees the code


@dataclass
class Fence:
    start: int  # line index of the opening fence
    end: int  # line index of the closing fence
    indent: str
    session: str | None
    executed: bool
    shown: bool = False  # `source=...`: the reader sees the code


def fences(lines: list[str]) -> list[Fence]:
    """Return every fenced block of `lines` (a page's Markdown split at newlines), in order."""
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        char, size, start = m.group("fence")[0], len(m.group("fence")), i
        close = re.compile(rf"^[ \t]*{re.escape(char)}{{{size},}}[ \t]*$")
        i += 1
        while i < len(lines) and not close.match(lines[i]):
            i += 1
        info = m.group("info")
        session = _SESSION.search(info)
        out.append(
            Fence(
                start,
                min(i, len(lines) - 1),
                m.group("indent"),
                session.group(1) if session else None,
                bool(_EXEC.search(info)),
                bool(_SOURCE.search(info)),
            )
        )
        i += 1
    return out


def section(path: str, name: str | None) -> list[tuple[str, int]]:
    """Return (text, line in file) of a snippet file or one of its sections."""
    try:
        lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    if name is None:
        return [(t, n) for n, t in enumerate(lines, 1) if not t.lstrip().startswith("# --8<--")]
    out, inside = [], False
    for n, text in enumerate(lines, 1):
        if re.match(rf"^\s*# --8<-- \[start:{re.escape(name)}\]", text):
            inside = True
        elif re.match(rf"^\s*# --8<-- \[end:{re.escape(name)}\]", text):
            break
        elif inside:
            out.append((text, n))
    return out
