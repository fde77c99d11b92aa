"""gradflow_site/parallel.py: the pages whose blocks start ranks stay with the build."""

from __future__ import annotations

import re

from gradflow_site.parallel import LAST_PAGES, RANK_PAGES, SLOW_PAGES
from tests._site import ROOT

# what starts ranks (gradflow_ref._ranks.run_ranks) from a chapter's blocks
STARTERS = ("ddp_accumulation(", "measure_fsdp2(", "one_and_two(", "stop_and_resume(")
STARTERS += ("initial_losses(", "page.ranks(")
INCLUDE = re.compile(r'--8<--\s+"(snippets/[^":]+)')


def starts_ranks(page) -> bool:
    text = page.read_text(encoding="utf-8")
    text += "".join((ROOT / f).read_text(encoding="utf-8") for f in INCLUDE.findall(text))
    return any(s in text for s in STARTERS)


def test_rank_pages_are_exactly_the_pages_that_start_ranks():
    found = sorted(p.name for p in (ROOT / "docs").glob("*.md") if starts_ranks(p))
    assert found == sorted(RANK_PAGES)


def test_last_pages_are_exactly_the_pages_that_train_in_process():
    found = sorted(
        p.name
        for p in (ROOT / "docs").glob("*.md")
        if "from train import"
        in p.read_text(encoding="utf-8")
        + "".join((ROOT / f).read_text(encoding="utf-8") for f in INCLUDE.findall(p.read_text()))
    )
    assert found == sorted(LAST_PAGES)


def test_slow_pages_are_chapters_the_fork_may_render():
    assert all((ROOT / "docs" / page).is_file() for page in SLOW_PAGES), SLOW_PAGES
    assert not set(SLOW_PAGES) & set(RANK_PAGES + LAST_PAGES)
