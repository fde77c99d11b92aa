"""Build side of docs/checkpointing.md: the step-through widget's runs and the committed timings.

`explorer` replays gradflow_ref's `checkpoint_sequential` on small MLPs and records, for every
layer count and segment count the widget offers, the order in which layers run forward, run
again and finish backward. The committed benchmark runs are gradflow_site/pages/bench.py's.
"""

from __future__ import annotations

from functools import partial

import torch

from gradflow_ref.checkpointing import checkpoint_sequential, measure, mlp

__all__ = [
    "MAX_LAYERS",
    "explorer",
    "layer_events",
    "static_table",
    "widget",
]

MAX_LAYERS = 16  # the widget's largest network; every (layers, segments) pair up to it is stored


def layer_events(layers, segments: int, h: torch.Tensor):
    """Measure checkpoint_sequential forward and backward; return its stats and layer events.

    Events in order: F<i>, layer i runs in the forward pass; R<i>, it runs again during
    backward (recomputed); B<i>, layer i's backward is done (its input's gradient arrived).
    """
    events, ran, handles = [], set(), []
    h = h.detach().requires_grad_()

    def before(i):
        def hook(module, args):
            events.append(f"{'R' if i in ran else 'F'}{i}")
            ran.add(i)

        return hook

    def after(i):
        def hook(module, args, out):
            if len(ran) < len(layers):  # forward pass, not the last layer: a_i feeds layer i + 1
                out.register_hook(lambda grad: events.append(f"B{i + 1}"))

        return hook

    for i, layer in enumerate(layers, start=1):
        handles.append(layer.register_forward_pre_hook(before(i)))
        handles.append(layer.register_forward_hook(after(i)))
    h.register_hook(lambda grad: events.append("B1"))
    try:
        stats = measure(partial(checkpoint_sequential, layers, segments, h), layers)
    finally:
        for handle in handles:
            handle.remove()
    return stats, " ".join(events)


def explorer(max_layers: int = MAX_LAYERS, start: tuple[int, int] = (16, 4)) -> dict:
    """Return the widget's payload: events, activations held and recomputations per run.

    Keys of "runs" are "<layers>/<segments>"; "held" is in activations of one layer's output.
    """
    tiny = torch.randn(1, 4, generator=torch.Generator().manual_seed(0))
    runs = {}
    for n_layers in range(2, max_layers + 1):
        stack = mlp(n_layers, 4)
        for segments in range(1, n_layers + 1):
            counted, events = layer_events(stack, segments, tiny)
            runs[f"{n_layers}/{segments}"] = {
                "events": events,
                "held": counted.saved_bytes // tiny.nbytes,
                "recomputed": counted.recomputed,
            }
    return {"runs": runs, "max_layers": max_layers, "start": list(start)}


def static_table(data: dict, n_layers: int = 16) -> str:
    """Return the HTML table a reader without JavaScript sees: one row per segment count."""
    import markdown

    from gradflow_site.render import table

    rows = []
    for s in (1, 2, 4, 8, 16):
        if s <= n_layers:
            run = data["runs"][f"{n_layers}/{s}"]
            rows.append([s, n_layers // s, run["held"], run["recomputed"]])
    headers = ["segments", "segment length K", "activations held after forward", "recomputed"]
    return markdown.markdown(table(headers, rows, align="rrrr"), extensions=["tables"])


def widget(data: dict) -> str:
    """Return the widget's HTML for the page to print (its title and caption are Markdown)."""
    from gradflow_site.widgets import widget as make_widget

    return make_widget("checkpointing", data, static=static_table(data))
