"""Quizzes written in Markdown: a `!!! quiz` admonition becomes the interactive quiz.

A `!!! quiz "Title"` admonition holds the question (any Markdown) and a task list:
`- [x] right choice` / `- [ ] wrong choice`, each with its explanation indented below. `expand`
turns it into a `!!! question` admonition with one collapsible `??? quiz` block per choice, so a
reader who opens a wrong answer learns as much as one who opens the right one.
"""

from __future__ import annotations

import re

from gradflow_site.fences import fences

__all__ = ["expand"]

_QUIZ = re.compile(r'^(?P<indent>[ \t]*)!!! quiz(?:[ \t]+"(?P<title>[^"]*)")?[ \t]*$')
_CHOICE = re.compile(r"^- \[(?P<mark>[ xX])\][ \t]+(?P<text>.+)$")
# a verdict of the writer's own, which would follow the site's "Correct." / "Not this one."
_VERDICT = re.compile(r"^(correct|right|wrong|incorrect|no|yes|not this one)\b[.:!,]", re.I)


def expand(markdown: str, path: str, offset: int = 0) -> tuple[str, list[str]]:
    """Expand every `!!! quiz` admonition into the interactive quiz Markdown.

    The body holds the question (any Markdown), then a task list: `- [x] choice` for the right
    answer (exactly one), `- [ ] choice` for the others, each followed by its explanation
    indented four spaces more than the item.

    Returns:
        (Markdown, problems).
    """
    lines = markdown.split("\n")
    fenced = {i for f in fences(lines) for i in range(f.start, f.end + 1)}
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
    for _, text, why in choices:
        if m := _VERDICT.match("".join(why).strip()):
            return [], (
                f"{where}: the explanation of quiz choice {text!r} starts with {m.group(0)!r}; "
                "the site already opens it with 'Correct.' or 'Not this one.', so drop it."
            )
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
