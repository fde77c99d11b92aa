"""Chapters read as Markdown: prose in the .md files, little Python in them, no unnamed sources."""

from __future__ import annotations

import ast
import re

import pytest

from tests._site import ROOT
from tests.test_drift import EXECUTED, PYTHON, code_blocks

PAGES = sorted((ROOT / "docs").glob("*.md"))
PAGE_PARAMS = [pytest.param(p, id=p.name) for p in PAGES]
BUDGET_SITE, BUDGET_BLOCK = 150, 6
# the reader never saw where the guide came from: no page argues with an unnamed source (a
# phrase may break across lines: a space in it matches any run of white space)
UNNAMED = re.compile(
    r"seed material|\(seed\)|\bseeds?\b(?= (?:say|says|shows?|table|document))|often quoted|"
    r"widely shared|as one description has it|the claim to test|sources repeat|commonly quoted|"
    r"a popular table|it is often said|\b(?:a|the) (?:common |popular |widespread )?belief\b|"
    r"\bcommon(?:ly held)? (?:belief|misconception|way to explain)|\bmyth\b|many guides|"
    r"you may have (?:read|heard)".replace(" ", r"\s+"),
    re.I,
)


def chapter_python(page) -> list[tuple[int, list[str]]]:
    """Return (line, own lines) for each executed Python block: lines that are not includes."""
    out = []
    for line, info, body in code_blocks(page.read_text(encoding="utf-8")):
        lang = info.split()[0].lstrip(".{").lower() if info else ""
        if lang in PYTHON and EXECUTED.search(info):
            out.append((line, [b for b in body if b.strip() and "--8<--" not in b]))
    return out


def sentences_printed(code: str) -> list[str]:
    """Return string literals of four or more words passed to print() in `code`."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "print":
            for arg in ast.walk(node):
                if isinstance(arg, ast.JoinedStr):  # an f-string: its words around the values
                    parts = [v.value for v in arg.values if isinstance(v, ast.Constant)]
                    text = " ".join(str(p) for p in parts)
                elif isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    text = arg.value
                else:
                    continue
                if len(re.findall(r"[A-Za-z]{2,}", text)) >= 4:
                    found.append(text)
    return found


@pytest.mark.parametrize("page", PAGE_PARAMS)
def test_page_names_no_unnamed_source(page):
    text = page.read_text(encoding="utf-8")
    hits = [
        f"{page.name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for m in UNNAMED.finditer(text)
    ]
    assert not hits, "state the fact and show the measurement instead:\n" + "\n".join(hits)


@pytest.mark.parametrize("page", PAGE_PARAMS)
def test_page_blocks_hold_at_most_six_lines_of_own_python(page):
    long = [(line, len(own)) for line, own in chapter_python(page) if len(own) > BUDGET_BLOCK]
    assert not long, f"{page.name}: blocks over {BUDGET_BLOCK} lines (line, lines): {long}"


def test_site_holds_at_most_150_lines_of_python_written_in_chapters():
    total = {p.name: sum(len(own) for _, own in chapter_python(p)) for p in PAGES}
    assert sum(total.values()) <= BUDGET_SITE, f"{sum(total.values())} lines: {total}"


def test_rewritten_chapters_hold_at_most_12_lines_of_python_each():
    # the site's 150 lines shared by its pages: about 12 a page
    total = {p.name: sum(len(own) for _, own in chapter_python(p)) for p in PAGES}
    assert all(n <= 12 for n in total.values()), total


@pytest.mark.parametrize("page", PAGE_PARAMS)
def test_page_prints_no_sentence_from_python(page):
    found = [
        f"{page.name}:{line}: {text[:60]!r}"
        for line, own in chapter_python(page)
        for text in sentences_printed("\n".join(own))
    ]
    assert not found, "write sentences in Markdown, numbers as `{python} ...`:\n" + "\n".join(found)


QUESTION = re.compile(r'^(?P<indent> *)!!! question "(?P<title>[^"\n]+)"\n', re.M)
CHOICE = re.compile(
    r'^ *\?\?\? quiz "(?P<label>[A-Z])\. [^\n]+"\n\n +(?P<verdict>\*\*[^*\n]+\*\*)', re.M
)


def quizzes(text: str) -> list[tuple[int, str, list[tuple[str, str]]]]:
    """Return (line, title, [(label, verdict)]) for each `!!! question` quiz of a page."""
    out = []
    starts = [m.start() for m in QUESTION.finditer(text)] + [len(text)]
    for m, end in zip(QUESTION.finditer(text), starts[1:]):
        body = text[m.end() : end]
        choices = [(c["label"], c["verdict"]) for c in CHOICE.finditer(body)]
        out.append((text.count("\n", 0, m.start()) + 1, m["title"], choices))
    return out


@pytest.mark.parametrize("page", PAGE_PARAMS)
def test_page_quizzes_have_one_right_choice_and_an_explanation_for_each(page):
    """A quiz is a `!!! question` admonition with one collapsible `??? quiz "A. ..."` block per
    choice, lettered in order, whose explanation opens with **Correct.** (exactly one) or **Not
    this one.**: a reader who opens a wrong answer learns as much as one who opens the right."""
    text = page.read_text(encoding="utf-8")
    assert "quiz(" not in text and "!!! quiz" not in text, f"{page.name}: see CONTRIBUTING"
    for line, title, choices in quizzes(text):
        where = f"{page.name}:{line} ({title!r})"
        assert len(choices) >= 2, f"{where}: a quiz needs two choices or more"
        assert [c[0] for c in choices] == [chr(65 + i) for i in range(len(choices))], where
        verdicts = [v for _, v in choices]
        assert verdicts.count("**Correct.**") == 1, f"{where}: exactly one right choice"
        assert set(verdicts) <= {"**Correct.**", "**Not this one.**"}, f"{where}: {verdicts}"
    assert text.count("??? quiz") == sum(len(c) for _, _, c in quizzes(text)), page.name


def test_quizzes_reads_a_quiz():
    text = (
        '!!! question "Q"\n\n    Which?\n\n    ??? quiz "A. One"\n\n        **Not this one.** No.\n'
        '\n    ??? quiz "B. Two"\n\n        **Correct.** Yes.\n'
    )
    assert quizzes(text) == [(1, "Q", [("A", "**Not this one.**"), ("B", "**Correct.**")])]


def test_sentences_printed_finds_a_printed_sentence():
    assert sentences_printed('print(f"The norm is {n:.2f} after clipping")') == [
        "The norm is ",
        " after clipping",
    ] or sentences_printed('print("The norm is small after clipping")')
    assert sentences_printed("print(table(rows))") == []


@pytest.mark.parametrize("page", PAGE_PARAMS)
def test_page_shows_no_wall_of_code(page):
    """A block a reader sees is at most 25 lines; longer code sits in a collapsed `???` block."""
    from tests.test_copy_run import shown_blocks

    lines = page.read_text(encoding="utf-8").splitlines()
    walls = []
    for line, _, code in shown_blocks(page):
        if len(code.splitlines()) <= 25:
            continue
        fence = lines[line - 1]
        indent = len(fence) - len(fence.lstrip())
        parent = next(
            (
                t
                for t in reversed(lines[: line - 1])
                if t.strip() and len(t) - len(t.lstrip()) < indent
            ),
            "",
        )
        if not parent.lstrip().startswith("???"):
            walls.append(f"{page.name}:{line}: {len(code.splitlines())} lines")
    assert not walls, walls
