"""Markdown-first chapters: inline values, quizzes and captions written in the page's Markdown.

Three things a contributor writes in plain Markdown and the build turns into computed HTML:

- **Inline values.** `` `{python} f"{norm:.3f}"` `` in a sentence is evaluated at build in the
  page's session, right after the last executed block above it, so it shows the value the page
  has at that point. `transform` swaps each expression for a placeholder and inserts a hidden
  executed block after that block; the hidden block prints the values inside an HTML comment
  (so markdown-exec's result cache keeps them), and `substitute` puts them in the placeholders.
  Once the prose has used a name, no other block of the page may rebind it while an inline
  value, or a hidden block's own line (a builder call), still reads it: the reader would take
  the new value for the one the prose described (`_rebound`, checked before any block runs).
- **Quizzes.** A `!!! quiz "Title"` admonition holding the question and a task list
  (`- [x] right choice` / `- [ ] wrong choice`, each with its explanation indented below) becomes
  the interactive quiz `render.quiz` draws.
- **Captions.** A paragraph marked `{: .gf-caption }` right after a figure or widget becomes its
  `<figcaption>`; its text names the figure for screen readers, and a widget takes its title from
  the caption's leading bold text (`attach_captions`).

hooks.py calls `transform` in on_page_markdown and `substitute` and `attach_captions` in
on_page_content; every problem is returned as a message naming the page file and line.
"""

from __future__ import annotations

import ast
import html
import json
import re
import textwrap
from dataclasses import dataclass, field

__all__ = [
    "ALT_PLACEHOLDER",
    "TITLE_PLACEHOLDER",
    "attach_captions",
    "quizzes",
    "record",
    "substitute",
    "transform",
]

ALT_PLACEHOLDER = "@@gf-alt@@"  # render.svg without `alt`: filled from the caption
TITLE_PLACEHOLDER = "@@gf-title@@"  # widgets.widget without `title`: filled from the caption

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_EXEC = re.compile(r"""\bexec\s*=\s*["']?(?:1|true|yes|on)\b""", re.I)
_SESSION = re.compile(r"""\bsession\s*=\s*["']([^"']+)["']""")
_SOURCE = re.compile(r"""\bsource\s*=\s*["']?(?!["'])""")  # the reader sees the code
_EXPR = re.compile(r"(?<!`)`\{python\}[ \t]+([^`\n]+?)[ \t]*`(?!`)")
_PLACEHOLDER = re.compile(r"@@gfi-(\d+)@@")
_RECORD = re.compile(r"<!--gf-inline (\{.*?\})-->")
_RECORD_PARAGRAPH = re.compile(r"<p>\s*(<!--gf-inline \{.*?\}-->)\s*</p>")
_EMPTY_PARAGRAPH = re.compile(r"<p>\s*</p>\n?")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")


@dataclass
class _Fence:
    start: int  # line index of the opening fence
    end: int  # line index of the closing fence
    indent: str
    session: str | None
    executed: bool
    shown: bool = False  # `source=...`: the reader sees the code


@dataclass
class _Page:
    path: str  # "docs/x.md", for messages
    offset: int  # lines of front matter above the Markdown body
    fences: list[_Fence] = field(default_factory=list)


def _fences(lines: list[str]) -> list[_Fence]:
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
            _Fence(
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


def transform(markdown: str, path: str, offset: int = 0) -> tuple[str, list[str]]:
    """Return `markdown` with inline expressions as placeholders and quizzes expanded.

    Args:
        markdown: the page's Markdown body (front matter removed).
        path: the page as "docs/<file>.md", for messages.
        offset: lines of front matter above the body, so messages give the file's line.

    Returns:
        (new Markdown, problems); each problem names the file and line.
    """
    markdown, problems = _expressions(markdown, _Page(path, offset))
    markdown, quiz_problems = quizzes(markdown, path, offset)
    return markdown, problems + quiz_problems


def _expressions(markdown: str, page: _Page) -> tuple[str, list[str]]:
    lines = markdown.split("\n")
    fences = _fences(lines)
    inside = {i for f in fences for i in range(f.start, f.end + 1)}
    executed = [f for f in fences if f.executed]
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
        where = f"{page.path}:{n + 1 + page.offset}"
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
            groups.setdefault(key, []).append((counter, m.group(1), n + 1 + page.offset))
            sessions[key] = session or f"inline-{page.path}"
            reads.append((n, m.group(1), session))
            counter += 1
            return f"@@gfi-{counter - 1}@@"

        lines[n] = _EXPR.sub(swap, line)
        if "{python}" in lines[n]:
            problems.append(
                f"{where}: '{{python}}' outside an inline value; write it as "
                "`{python} EXPRESSION` in single backticks on one line."
            )
    problems += _rebound(lines, executed, reads, page)
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
        items = [[str(i), expr, page.path, line] for i, expr, line in groups[key]]
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


# --- a name the prose used, rebound by another block -----------------------------------------


@dataclass
class _Block:
    fence: _Fence
    label: str  # "docs/x.md:12" or "docs/x.md:12 (snippets/x.py:section)"
    binds: set[str]  # names the block binds at the top level, includes expanded
    reads: set[str]  # names its own lines read, if it is hidden (a builder call); else none


def _block_code(lines: list[str], fence: _Fence) -> tuple[str, str, str | None]:
    """Return the block's code (includes expanded), its own lines, and what it includes."""
    from gradflow_site.errors import _INCLUDE, _section  # how snippet includes are read

    code, own, included = [], [], None
    for text in lines[fence.start + 1 : fence.end]:
        text = text[len(fence.indent) :]
        inc = _INCLUDE.match(text)
        if inc:
            section = [t for t, _ in _section(inc.group("file"), inc.group("section"))]
            code.append(textwrap.dedent("\n".join(section)))
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


def _blocks(lines: list[str], executed: list[_Fence], page: _Page) -> list[_Block]:
    out = []
    for fence in executed:
        code, own, included = _block_code(lines, fence)
        try:
            binds = _scope_names(ast.parse(code))[0]
            reads = set() if fence.shown else _scope_names(ast.parse(own))[1] - binds
        except SyntaxError:
            continue  # the block fails on its own, with its own message
        label = f"{page.path}:{fence.start + 1 + page.offset}"
        out.append(_Block(fence, label + (f" ({included})" if included else ""), binds, reads))
    return out


def _rebound(
    lines: list[str], executed: list[_Fence], reads: list[tuple[int, str, str | None]], page: _Page
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
        (b.fence.end, b.fence.session, b) for b in _blocks(lines, executed, page)
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
        line = (block.fence.start if block else n) + 1 + page.offset
        what = "this block" if block else f"inline value `{{python}} {item[0]}`"
        for name in sorted(block.reads if block else item[1]):
            key = (session, name)
            used_at, then = first.get(key, (None, None))
            now = binder.get(key)
            if then is not None and now is not then:
                problems.append(
                    f"{page.path}:{line}: {what} reads `{name}`, bound by the block at "
                    f"{then.label} when the prose first used it at line {used_at}; the block at "
                    f"{now.label} has rebound it since, so this shows that block's value. Fix: "
                    f"give `{name}` a distinct name in one of the two blocks."
                )
            elif used_at is None and not block:
                first[key] = (line, now)
        for name in block.binds if block else ():
            binder[(session, name)] = block
    return problems


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


# --- quizzes ------------------------------------------------------------------------------

_QUIZ = re.compile(r'^(?P<indent>[ \t]*)!!! quiz(?:[ \t]+"(?P<title>[^"]*)")?[ \t]*$')
_CHOICE = re.compile(r"^- \[(?P<mark>[ xX])\][ \t]+(?P<text>.+)$")


def quizzes(markdown: str, path: str, offset: int = 0) -> tuple[str, list[str]]:
    """Expand every `!!! quiz` admonition into the interactive quiz Markdown.

    The body holds the question (any Markdown), then a task list: `- [x] choice` for the right
    answer (exactly one), `- [ ] choice` for the others, each followed by its explanation
    indented four spaces more than the item.

    Returns:
        (Markdown, problems).
    """
    lines = markdown.split("\n")
    fenced = {i for f in _fences(lines) for i in range(f.start, f.end + 1)}
    out: list[str] = []
    problems: list[str] = []
    i = 0
    while i < len(lines):
        m = _QUIZ.match(lines[i]) if i not in fenced else None
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent, start = m.group("indent"), i
        body_indent = indent + "    "
        i += 1
        body = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(body_indent)):
            body.append(lines[i][len(body_indent) :] if lines[i].strip() else "")
            i += 1
        where = f"{path}:{start + 1 + offset}"
        quiz, problem = _quiz_markdown(body, m.group("title") or "Question", where)
        if problem:
            problems.append(problem)
            out.extend(lines[start:i])
            continue
        out.extend(indent + q if q else "" for q in quiz)
        out.append("")
    return "\n".join(out), problems


def _quiz_markdown(body: list[str], title: str, where: str) -> tuple[list[str], str | None]:
    question: list[str] = []
    choices: list[tuple[bool, str, list[str]]] = []
    for line in body:
        m = _CHOICE.match(line)
        if m:
            choices.append((m.group("mark") != " ", m.group("text").strip(), []))
        elif choices:
            choices[-1][2].append(line[4:] if line.startswith("    ") else line)
        else:
            question.append(line)
    right = [n for n, c in enumerate(choices) if c[0]]
    if len(choices) < 2 or len(right) != 1:
        return [], (
            f"{where}: a quiz needs at least two choices (`- [ ] ...`) and exactly one marked "
            f"right (`- [x] ...`); found {len(choices)} choices, {len(right)} marked right."
        )
    missing = [c[1] for c in choices if not "".join(c[2]).strip()]
    if missing:
        return [], f"{where}: quiz choice {missing[0]!r} has no explanation indented below it."
    out = [f'!!! question "{title}"', ""]
    out += ["    " + q if q else "" for q in _trim(question)] + [""]
    for n, (is_right, text, why) in enumerate(choices):
        verdict = "**Correct.**" if is_right else "**Not this one.**"
        label = f"{chr(65 + n)}. {text}".replace('"', "&quot;")
        why = _trim(why)
        out += [f'    ??? quiz "{label}"', "", f"        {verdict} {why[0]}"]
        out += ["        " + w if w else "" for w in why[1:]] + [""]
    return out, None


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


# --- captions -----------------------------------------------------------------------------

_CAPTION = re.compile(r'<p class="gf-caption">(?P<body>[\s\S]*?)</p>')
_FIGURE_TAG = re.compile(r"<figure\b[^>]*>|</figure>")
_STRONG_LEAD = re.compile(r"^\s*<strong>(?P<title>[\s\S]*?)</strong>\s*")
_TAGS = re.compile(r"<[^>]+>")


def _plain(fragment: str) -> str:
    """Return the text of an HTML fragment; inline TeX keeps its source without delimiters."""
    text = html.unescape(_TAGS.sub("", fragment))
    text = re.sub(r"\\[()\[\]]", "", text)  # \( \) \[ \] of arithmatex
    return " ".join(text.split())


def _figure_before(page_html: str, end: int) -> int | None:
    """Return where the outermost <figure> that closes right before `end` starts, or None."""
    head = page_html[:end].rstrip()
    if not head.endswith("</figure>"):
        return None
    depth = 0
    for m in reversed(list(_FIGURE_TAG.finditer(head))):
        depth += 1 if m.group(0) == "</figure>" else -1
        if depth == 0:
            return m.start()
    return None


def attach_captions(page_html: str, path: str) -> tuple[str, list[str]]:
    """Move each `{: .gf-caption }` paragraph into the figure or widget just above it.

    The caption becomes the figure's `<figcaption>`; its plain text replaces an SVG's
    ALT_PLACEHOLDER; a widget takes the caption's leading bold text (or all of it) as its title.

    Returns:
        (HTML, problems): a caption with no figure above it, or a figure left without a
        caption, is a problem naming the page.
    """
    problems = []
    out, cursor = [], 0
    for m in _CAPTION.finditer(page_html):
        start = _figure_before(page_html, m.start())
        if start is None or start < cursor:
            problems.append(
                f"{path}: the caption {_plain(m.group('body'))[:60]!r}... has no figure or "
                "widget right above it; put it directly after the block that prints one."
            )
            continue
        figure = page_html[start : page_html.rindex("</figure>", 0, m.start())]
        out.append(page_html[cursor:start])
        out.append(_captioned(figure, m.group("body")))
        cursor = m.end()
    out.append(page_html[cursor:])
    page_html = "".join(out)
    for placeholder, what in ((ALT_PLACEHOLDER, "figure"), (TITLE_PLACEHOLDER, "widget")):
        if placeholder in page_html:
            problems.append(
                f"{path}: a {what} has no caption. Write its caption as a paragraph followed by "
                "`{: .gf-caption }` directly after the block that prints it."
            )
    return page_html, problems


def _captioned(figure: str, body: str) -> str:
    """Return `figure` (without its closing tag) closed with `body` as its caption."""
    text = html.escape(_plain(body), quote=True)
    if figure.startswith('<figure class="gf-widget"'):
        lead = _STRONG_LEAD.match(body)
        title = html.escape(_plain(lead.group("title")).rstrip(".:"), quote=True) if lead else text
        figure = figure.replace(TITLE_PLACEHOLDER, title)
        rest = body[lead.end() :] if lead else ""
        figure = figure.replace(ALT_PLACEHOLDER, text)
        cap = f"<figcaption>{rest.strip()}</figcaption>" if rest.strip() else ""
        return f"{figure}{cap}</figure>"
    figure = figure.replace(ALT_PLACEHOLDER, text)
    return f"{figure}<figcaption>{body.strip()}</figcaption></figure>"
