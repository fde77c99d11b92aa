"""Quizzes written in Markdown (gradflow_site/quizzes.py)."""

from __future__ import annotations

import pytest

from gradflow_site import quizzes

PAGE = "docs/x.md"


def test_expand_makes_the_interactive_quiz():
    md = (
        '!!! quiz "Q"\n\n    Which?\n\n    - [ ] One\n        Too few.\n'
        "    - [x] Two\n        Enough,\n        two.\n"
    )
    new, problems = quizzes.expand(md, PAGE)
    assert problems == []
    assert '!!! question "Q"' in new
    assert '    ??? quiz "A. One"\n\n        **Not this one.** Too few.' in new
    assert '    ??? quiz "B. Two"\n\n        **Correct.** Enough,\n        two.' in new


@pytest.mark.parametrize("marks", [" ,  ", "x,x"])
def test_expand_needs_exactly_one_right_answer(marks):
    a, b = marks.split(",")
    md = f"!!! quiz\n\n    Q?\n\n    - [{a}] One\n        Why.\n    - [{b}] Two\n        Why.\n"
    _, problems = quizzes.expand(md, PAGE)
    assert problems and "exactly one marked right" in problems[0]


def test_expand_needs_an_explanation_for_each_choice():
    md = "!!! quiz\n\n    Q?\n\n    - [ ] One\n    - [x] Two\n        Why.\n"
    _, problems = quizzes.expand(md, PAGE)
    assert problems and "'One' has no explanation" in problems[0]


@pytest.mark.parametrize("verdict", ["Right:", "No,", "Correct.", "Not this one."])
def test_expand_refuses_an_explanation_that_repeats_the_verdict(verdict):
    md = f"!!! quiz\n\n    Q?\n\n    - [ ] One\n        Why.\n    - [x] Two\n        {verdict} 2\n"
    _, problems = quizzes.expand(md, PAGE)
    assert problems and f"'Two' starts with {verdict!r}" in problems[0]
