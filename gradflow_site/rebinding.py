"""A name the prose used, rebound by a later block: the page would describe the wrong value.

An inline value (gradflow_site/inline.py) shows a name's value at the point of the page where
the prose uses it. Once the prose has used a name, no other block of the page may rebind it while
an inline value, or a hidden block's own line (a builder call), still reads it: the reader would
take the new value for the one the prose described. `rebound` finds each such read before any
block runs, from the blocks' code (snippet includes expanded) and the inline expressions.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

from gradflow_site.fences import INCLUDE, Fence, section

__all__ = ["rebound"]


@dataclass
class _Block:
    fence: Fence
    label: str  # "docs/x.md:12" or "docs/x.md:12 (snippets/x.py:section)"
    binds: set[str]  # names the block binds at the top level, includes expanded
    reads: set[str]  # names its own lines read, if it is hidden (a builder call); else none


def _block_code(lines: list[str], fence: Fence) -> tuple[str, str, str | None]:
    """Return the block's code (includes expanded), its own lines, and what it includes."""
    code, own, included = [], [], None
    for text in lines[fence.start + 1 : fence.end]:
        text = text[len(fence.indent) :]
        inc = INCLUDE.match(text)
        if inc:
            lines_in = [t for t, _ in section(inc.group("file"), inc.group("section"))]
            code.append(textwrap.dedent("\n".join(lines_in)))
            included = ":".join(filter(None, (inc.group("file"), inc.group("section"))))
        else:
            code.append(text)
            own.append(text)
    return textwrap.dedent("\n".join(code)), textwrap.dedent("\n".join(own)), included


def _scope_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Return (names bound at the top level, names read that the code does not bind itself)."""
    binds, loads, local = set(), set(), set()
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    scopes += (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    todo = [(tree, True)]
    while todo:
        node, top = todo.pop()
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loads.add(node.id)
            else:
                (binds if top else local).add(node.id)
        elif isinstance(node, ast.alias):
            (binds if top else local).add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            local.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            (binds if top else local).add(node.name)
        inner = top and not isinstance(node, scopes)
        todo += [(child, inner) for child in ast.iter_child_nodes(node)]
    return binds, loads - binds - local


def _blocks(lines: list[str], executed: list[Fence], path: str, offset: int) -> list[_Block]:
    out = []
    for fence in executed:
        code, own, included = _block_code(lines, fence)
        try:
            binds = _scope_names(ast.parse(code))[0]
            reads = set() if fence.shown else _scope_names(ast.parse(own))[1] - binds
        except SyntaxError:
            continue  # the block fails on its own, with its own message
        label = f"{path}:{fence.start + 1 + offset}"
        out.append(_Block(fence, label + (f" ({included})" if included else ""), binds, reads))
    return out


def rebound(
    lines: list[str],
    executed: list[Fence],
    reads: list[tuple[int, str, str | None]],
    path: str,
    offset: int = 0,
) -> list[str]:
    """Report each inline value or builder call that reads a name rebound since the prose used it.

    Per session, in page order: the first inline value that reads a name fixes which block's
    binding the prose describes (a name no block had bound yet is left alone: reading it raises
    a NameError of its own). Once another block binds the name again, a later inline value
    that reads it, or a hidden block whose own lines read it, is a problem naming the page, the
    line, the name and the block that rebound it. Shown code may rebind and read names freely:
    the reader sees it happen.
    """
    default = next((f.session for f in executed if f.session), None)
    events: list[tuple] = [
        (b.fence.end, b.fence.session, b) for b in _blocks(lines, executed, path, offset)
    ]
    for n, expr, session in reads:
        try:
            events.append(
                (n, session or default, (expr, _scope_names(ast.parse(expr, mode="eval"))[1]))
            )
        except SyntaxError:
            continue  # reported when it is evaluated
    binder: dict[tuple, _Block] = {}  # (session, name) -> the block that bound it last
    first: dict[tuple, tuple[int, _Block | None]] = {}  # -> (line, binder) at the prose's first use
    problems: list[str] = []
    for n, session, item in sorted(events, key=lambda e: e[0]):
        if session is None:
            continue  # markdown-exec runs a block without a session on its own
        block = item if isinstance(item, _Block) else None
        line = (block.fence.start if block else n) + 1 + offset
        what = "this block" if block else f"inline value `{{python}} {item[0]}`"
        for name in sorted(block.reads if block else item[1]):
            key = (session, name)
            used_at, then = first.get(key, (None, None))
            now = binder.get(key)
            if then is not None and now is not then:
                problems.append(
                    f"{path}:{line}: {what} reads `{name}`, bound by the block at "
                    f"{then.label} when the prose first used it at line {used_at}; the block at "
                    f"{now.label} has rebound it since, so this shows that block's value. Fix: "
                    f"give `{name}` a distinct name in one of the two blocks."
                )
            elif used_at is None and not block:
                first[key] = (line, now)
        for name in block.binds if block else ():
            binder[(session, name)] = block
    return problems
