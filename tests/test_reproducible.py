"""Reproducible on any day: the built site carries the last commit's date, not the build's."""

from __future__ import annotations

import datetime
import re
import subprocess

import pytest

from tests._site import ROOT


@pytest.mark.build
def test_sitemap_dates_are_the_last_commits(site):
    epoch = subprocess.run(
        ["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    if not epoch.isdigit():
        pytest.skip("not a git checkout")
    day = datetime.datetime.fromtimestamp(int(epoch), datetime.UTC).date().isoformat()
    dates = set(re.findall(r"<lastmod>([^<]+)</lastmod>", (site / "sitemap.xml").read_text()))
    assert dates == {day}, f"sitemap dates {dates}, last commit {day}"


def test_build_date_comes_from_the_last_commit(monkeypatch):
    """The hook hands MkDocs the commit's time, so a build tomorrow writes the same dates."""
    from mkdocs.utils import get_build_date

    from gradflow_site import provenance

    epoch = provenance.commit_epoch(ROOT)
    if epoch is None:
        pytest.skip("not a git checkout")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    day = datetime.datetime.fromtimestamp(int(epoch), datetime.UTC).date().isoformat()
    assert get_build_date() == day
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(int(epoch) + 3 * 86400))
    assert get_build_date() != day  # MkDocs does read it: the date is not simply today's
