"""The build process: one torch thread, rarer garbage collections, torch's caches under .cache/.

hooks.py sets one thread per numerical library in the environment when MkDocs loads it, before
torch and numpy are imported; `configure` does the rest once the configuration is read.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

__all__ = ["GC_THRESHOLD", "collect_rarely", "configure", "freeze"]

# The pages' sessions keep many small torch and matplotlib objects alive, none of them garbage:
# Python's default thresholds would walk them again and again through a build, and once more in
# a last full collection at exit. Collections are rarer for the whole build, and after a one-off
# build everything left is frozen (`freeze`), so the exit does not walk it.
GC_THRESHOLD = (50_000, 20, 100)


def collect_rarely() -> None:
    """Collect garbage at GC_THRESHOLD for the rest of the build."""
    gc.set_threshold(*GC_THRESHOLD)


def freeze() -> None:
    """Leave every object the build holds out of collections from now on (the process ends)."""
    gc.freeze()


def configure(root: Path) -> None:
    """Set up this process to compute the pages of the checkout at `root`."""
    import torch

    # one intra-op thread: faster for the guide's tiny models on a shared machine, and the
    # printed numbers do not depend on how many cores the build machine has
    torch.set_num_threads(1)
    # read by the executed labs' setup cell (gradflow_site/labs.py): batch each cell's output
    os.environ["GRADFLOW_SITE_BUILD"] = "1"
    # torch's compiler cache (created when an optimizer first steps) goes under .cache/, not
    # into the temporary directory, where every build would leave a folder
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(root / ".cache" / "torchinductor"))
