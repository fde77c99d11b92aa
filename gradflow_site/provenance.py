"""What a page says about how it was made: the torch, Python and commit that computed it.

`verified(root)` names them (the templates read them as `config.extra.verified`), and `stamp`
writes the line at the foot of every page, saying honestly what on that page was computed at
build. `use_commit_date(root)` makes a build reproducible on any day: MkDocs dates the pages and
sitemap.xml by the last commit, not by the day of the build.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

__all__ = ["commit", "commit_epoch", "stamp", "use_commit_date", "verified"]


def _git(root: Path, *args: str) -> str | None:
    """Return what `git ARGS` prints in `root`, stripped, or None outside a git checkout."""
    try:
        return subprocess.run(
            ["git", *args], cwd=root, check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def commit(root: Path) -> str:
    """Return the short commit of the checkout, with "+dirty" for uncommitted changes."""
    sha = _git(root, "rev-parse", "--short=12", "HEAD")
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    if sha is None or dirty is None:
        return "unknown (not a git checkout)"
    return sha + ("+dirty" if dirty else "")


def commit_epoch(root: Path) -> str | None:
    """Return the last commit's time as seconds since the epoch, or None outside git."""
    out = _git(root, "log", "-1", "--format=%ct")
    return out if out and out.isdigit() else None


def use_commit_date(root: Path) -> None:
    """Date the build by the last commit (SOURCE_DATE_EPOCH, which MkDocs reads).

    A caller's own SOURCE_DATE_EPOCH wins; outside git the build keeps today's date.
    """
    if "SOURCE_DATE_EPOCH" not in os.environ:
        epoch = commit_epoch(root)
        if epoch:
            os.environ["SOURCE_DATE_EPOCH"] = epoch


def verified(root: Path) -> dict[str, str]:
    """Return the torch and Python versions that compute the pages, and the commit."""
    import torch

    return {"torch": torch.__version__, "python": platform.python_version(), "commit": commit(root)}


def stamp(page_html: str, versions: dict[str, str]) -> str:
    """Return the stamp for the foot of `page_html`, from what `verified` returned."""
    if "results/" in page_html:
        # the page names the committed file each such figure comes from
        what = (
            "Every snippet on this page ran when the site was built; figures labelled as read "
            "from <code>results/</code> come from the committed run they name"
        )
    else:
        what = (
            "Every snippet on this page ran when the site was built and computed the numbers "
            "and figures beside it; figures quoted from a datasheet or a paper name their source"
        )
    return (
        f'<p class="gf-stamp">{what}: torch {versions["torch"]}, Python {versions["python"]}, '
        f"commit <code>{versions['commit']}</code>.</p>"
    )
