"""Build side of docs/telephone.md: the telephone widget's measured gradients.

Everything is measured with gradflow_ref.telephone.network_gradients (orthogonal weights scaled
by the factor, so every layer's gain is exactly the factor).
"""

from __future__ import annotations

from gradflow_ref.telephone import network_gradients

__all__ = ["DEPTH", "FACTORS", "START", "layer1", "measured", "widget"]

DEPTH = 50  # layers of the widget's network, as in snippets/telephone.py
FACTORS = [round(0.7 + 0.02 * i, 2) for i in range(31)]  # the slider: 0.7 to 1.3
START = 0.9  # the factor the static figure shows


def layer1(factor: float, depth: int = DEPTH) -> float:
    """Return the gradient norm reaching layer 1, relative to the output's, at gain `factor`."""
    return network_gradients(factor, depth=depth)[0].item()


def measured(factors=FACTORS, depth: int = DEPTH) -> list[list[float]]:
    """Return, per factor, the gradient norm reaching each layer (layer 1 first)."""
    return [network_gradients(f, depth=depth).tolist() for f in factors]


def widget(factors=FACTORS, depth: int = DEPTH, start: float = START) -> str:
    """Return the telephone widget: a factor slider over bars of measured gradient norms."""
    import matplotlib.pyplot as plt

    from gradflow_site.render import plain_log_ticks, svg
    from gradflow_site.widgets import rounded
    from gradflow_site.widgets import widget as make_widget

    if start not in factors:
        raise ValueError(f"telephone.widget: `start` must be one of `factors`, got {start!r}.")
    grads = measured(factors, depth)
    fig, ax = plt.subplots(figsize=(6.4, 2.6))
    ax.bar(range(1, depth + 1), grads[factors.index(start)], color="#0072b2")
    ax.set_yscale("log")
    plain_log_ticks(ax)
    ax.set_xlabel("layer (1 = closest to the input)")
    ax.set_ylabel("gradient norm / output's")
    ax.set_title(f"Factor {start}: the gradient at each layer's input")
    data = {"factors": list(factors), "depth": depth, "grads": rounded(grads)}
    return make_widget("telephone", data, static=svg(fig))
