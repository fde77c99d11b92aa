"""Search finds the chapter that teaches an API name first, in Material's own search.

tests/search_rank.mjs runs Material's bundled search worker in Node on the built index, so the
ranking is the one a reader gets in the browser (same tokenizer, pipeline and scoring); a browser
test types two of the names into the search box of the published site and reads the first result.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from urllib.parse import urlsplit

import pytest

from tests._browser import open_page, require
from tests._site import ROOT

TEACHES = {
    "GradScaler": "loss_scaling/",
    "gradscaler": "loss_scaling/",
    "torch.amp.GradScaler": "loss_scaling/",
    "clip_grad_norm_": "clipping/",
    "no_sync": "accumulation/",
    "checkpoint_sequential": "checkpointing/",
    "torch.amp": "loss_scaling/",
    "use_reentrant": "checkpointing/",
}


def ranks(site, queries) -> dict[str, list[str]]:
    node = shutil.which("node")
    require(node is not None, "node is not installed")
    out = subprocess.run(
        [node, str(ROOT / "tests" / "search_rank.mjs"), str(site), *queries],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return {
        q: [hit.split("#")[0].split()[0] for hit in hits] for q, hits in json.loads(out).items()
    }


@pytest.mark.build
def test_search_ranks_the_teaching_chapter_first(site):
    found = ranks(site, list(TEACHES))
    wrong = {q: hits[:3] for q, hits in found.items() if not hits or hits[0] != TEACHES[q]}
    assert not wrong, f"first results (expected {TEACHES}): {wrong}"


# the search box as a reader uses it, in the browser, on the index the site publishes: "/"
# opens search (Material's shortcut), the query is typed, and the first result is read
FIRST_RESULT = """() => document.querySelector('.md-search-result__list a.md-search-result__link')
  ?.getAttribute('href')"""


@pytest.mark.build
@pytest.mark.browser
@pytest.mark.parametrize("query", ["gradscaler", "clip_grad_norm_"])
def test_search_box_in_the_browser_puts_the_teaching_chapter_first(
    browser, searchable_server, query
):
    with open_page(browser, searchable_server, "telephone/", mount=False) as (page, record):
        page.keyboard.press("/")
        page.keyboard.type(query)
        page.wait_for_function(FIRST_RESULT, timeout=10_000)
        first = page.evaluate(FIRST_RESULT)
        assert urlsplit(first).path == "/" + TEACHES[query], first
        assert not record["errors"]
