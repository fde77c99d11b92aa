"""Build side of docs/cheatsheet.md: the figures behind its rules, computed from the site's data.

`measured` reads the frozen records the rules follow from (chapter 8's learning-rate and width
sweeps, the arena's race, chapter 10's gallery) and measures what chapter 8 measures at build
(the gradient through 48 blocks at initialisation, the loss of predicting bytes by frequency),
with chapter 8's own code (snippets/transformer.py). The committed GPU and CPU speeds are
gradflow_site/pages/bench.py's.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from gradflow_site.pages import arena, diagnosis, sweeps
from gradflow_site.pages.transformer import unigram_loss

__all__ = ["DEEP", "chapter8_code", "measured", "state_bytes_per_param"]

ROOT = Path(__file__).resolve().parents[2]
DEEP = 48  # blocks: the depth at which chapter 8 shows what depth-scaled init does


def chapter8_code() -> dict:
    """Return the namespace of snippets/transformer.py's imports, profile and groups sections."""
    from gradflow_site.labs import sections

    code = dict(sections(ROOT / "snippets" / "transformer.py"))
    namespace: dict = {"__name__": "cheatsheet_chapter8"}
    for name in ("imports", "profile", "groups"):
        exec(compile(code[name], f"snippets/transformer.py:{name}", "exec"), namespace)  # noqa: S102
    return namespace


def measured() -> SimpleNamespace:
    """Return the records and the figures the cheat sheet's rules quote.

    Returns:
        A namespace: `lr`, `width`, `race`, `gallery` (the records), `ceiling` (the loss below
        which a learning rate trains, chapter 8's), `unigram` (the byte frequencies' held-out
        loss), `ratio_on` and `ratio_off` (block 1's gradient over block 48's at
        initialisation, with depth-scaled init and without it, seeds 0 to 2), `gallery_rows`
        (chapter 10's summary per failure).

    Raises:
        RuntimeError: a record is stale (gradflow_site.records.load).
    """
    ns = chapter8_code()
    lr = sweeps.record("transformer_lr")

    def ratio(depth_init: bool, seed: int) -> float:
        p = ns["grad_profile"](DEEP, "pre", depth_init, seed)
        return (p[0] / p[-1]).item()

    gallery = diagnosis.gallery()
    return SimpleNamespace(
        lr=lr,
        width=sweeps.record("transformer_width"),
        race=arena.record(),
        gallery=gallery,
        gallery_rows=diagnosis.summary(gallery),
        ceiling=sweeps.ceiling(lr),
        unigram=unigram_loss(ns["train_data"], ns["val_windows"]),
        ratio_on=ratio(True, 0),
        ratio_off=[ratio(False, seed) for seed in (0, 1, 2)],
    )


def state_bytes_per_param() -> int:
    """Bytes of state per parameter in gradflow_ref.memory's default (autocast) layout, AdamW."""
    from gradflow_ref.memory import MemoryConfig, training_memory

    one = training_memory(MemoryConfig(n_params=1))
    return one.total - one.activations
