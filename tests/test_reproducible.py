"""Reproducible on any day and in any process: the built site carries the last commit's date,
and two clean builds write the same bytes. Here a small site with every kind of output the
build renders is built twice; `make repro` builds the whole guide twice (CI runs it)."""

from __future__ import annotations

import datetime
import re
import subprocess
from pathlib import Path

import pytest

from tests._site import ROOT, child_config, mkdocs_build

# inline values, a figure (SVG), a table, a quiz, a widget and its data, MathML, and the lab of
# telephone.md (a notebook to download)
PAGES = {
    "index.md": "# Home\n\n$$\nf^{L} = \\prod_{k=1}^{L} f\n$$\n\nSee [the game](telephone.md).\n",
    "telephone.md": """# The telephone game

[Download this chapter as a notebook](labs/telephone.ipynb){ .md-button download }

A product of $L$ factors.

```python exec="1" source="above" result="text" session="t"
import torch
torch.manual_seed(0)
x = torch.rand(4)
print(f"{x.sum():.4f}")
```

The sum is `{python} f"{x.sum():.4f}"`, the largest of `{python} len(x)` is
`{python} f"{x.max():.4f}"`.

```python exec="1" session="t"
from gradflow_site.render import table
print(table(["value", "square"], [[f"{v:.3f}", f"{v * v:.3f}"] for v in x.tolist()], "rr"))
```

```python exec="1" html="1" session="t"
import matplotlib.pyplot as plt
from gradflow_site.render import svg
fig, ax = plt.subplots()
ax.plot(x.tolist())
print(svg(fig))
```

/// caption
**Four random numbers.** In the order drawn.
///

```python exec="1" html="1" session="t"
from gradflow_site.pages import telephone as page
print(page.widget())
```

/// caption
**The telephone game, layer by layer.** Gradient norms for the factor on the slider.
///

!!! question "Which factor keeps the message?"

    Fifty people pass a number on, each multiplying it by the same factor.

    ??? quiz "A. Exactly one"

        **Correct.** Any other factor shrinks or grows it geometrically.

    ??? quiz "B. Anything close to one"

        **Not this one.** 0.95 to the fiftieth power is under a tenth.
""",
}


@pytest.mark.build
def test_two_clean_builds_write_the_same_bytes(tmp_path):
    # the first runs the chapters in a process each, the second both in one process
    cfg = child_config(tmp_path / "project", PAGES)
    (tmp_path / "project" / "docs" / "labs").mkdir()
    lab = (ROOT / "docs" / "labs" / "telephone.ipynb").read_bytes()
    (tmp_path / "project" / "docs" / "labs" / "telephone.ipynb").write_bytes(lab)
    sites = [tmp_path / "parallel", tmp_path / "serial"]
    for site, workers in zip(sites, (2, 1)):
        result = mkdocs_build(site, config=cfg, workers=workers)
        assert result.returncode == 0, result.stdout + result.stderr
    files = sorted(p.relative_to(sites[0]) for p in sites[0].rglob("*") if p.is_file())
    html = (sites[0] / "telephone" / "index.html").read_text(encoding="utf-8")
    for part in (
        "<math",
        "<svg",
        "<table",
        "data-gf-data=",
        'class="quiz"',
        "labs/telephone.ipynb",
    ):
        assert part in html, f"the test site renders no {part}"
    assert "labs/telephone.ipynb" in set(map(str, files))
    assert sorted(p.relative_to(sites[1]) for p in sites[1].rglob("*") if p.is_file()) == files
    differ = [str(f) for f in files if (sites[0] / f).read_bytes() != (sites[1] / f).read_bytes()]
    assert not differ, f"two clean builds differ in: {differ}"


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
    from types import SimpleNamespace

    from mkdocs.utils import get_build_date

    from gradflow_site import hooks

    epoch = hooks._git("log", "-1", "--format=%ct")
    if not epoch:
        pytest.skip("not a git checkout")
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)  # restored after the test
    config = hooks.on_config(SimpleNamespace(extra={}))
    day = datetime.datetime.fromtimestamp(int(epoch), datetime.UTC).date().isoformat()
    assert get_build_date() == day
    assert config.extra["verified"]["commit"].startswith(
        hooks._git("rev-parse", "--short=12", "HEAD")
    )
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(int(epoch) + 3 * 86400))
    assert get_build_date() != day  # MkDocs does read it: the date is not simply today's


@pytest.mark.build
def test_the_sitemap_keeps_the_docs_order_whatever_order_the_runs_finish(tmp_path):
    # MkDocs reads the pages in the order their runs finish; the last build's timings put b's
    # run first here, and the sitemap (and the search index) must still follow the docs
    block = '```python exec="1" session="{0}"\nprint("{0}")\n```\n'
    pages = {"index.md": "# Home\n", **{f"{n}.md": f"# {n}\n\n" + block.format(n) for n in "ab"}}
    cfg = child_config(tmp_path / "project", pages)
    site = tmp_path / "site"
    Path(f"{site}.cache").mkdir()
    Path(f"{site}.cache", "seconds.json").write_text('{"docs/a.md": 0.1, "docs/b.md": 9.0}')
    result = mkdocs_build(site, config=cfg)
    assert result.returncode == 0, result.stdout + result.stderr
    locs = re.findall(r"<loc>[^<]*/gradient-flow/([^<]*)</loc>", (site / "sitemap.xml").read_text())
    assert locs == ["", "a/", "b/"]
