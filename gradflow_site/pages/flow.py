"""Build side of docs/flow.md: the flow widget's measured gradient profiles and its table.

Every profile is measured with gradflow_ref.flow (build_mlp, gradient_norms) in float64: at a
multiplier of 16 the gradient reaches about 1e48, beyond float32's ceiling. The networks and the
input batch are the page's own (snippets/flow.py), so the widget shows the figure's numbers.
"""

from __future__ import annotations

import inspect
import math
import re
from dataclasses import dataclass

import torch

from gradflow_ref import flow
from gradflow_ref.flow import MLPConfig, build_mlp, gradient_norms

__all__ = [
    "DEPTHS",
    "MULTIPLIERS",
    "PAIRS",
    "SHOWN",
    "Profiles",
    "batch",
    "crossing",
    "profiles",
    "reference_source",
    "widget",
]

PAIRS = [("sigmoid", "xavier"), ("tanh", "xavier"), ("relu", "he"), ("identity", "xavier")]
DEPTHS = [2, 4, 6, 8, 10, 15, 20, 30, 40]  # the depth slider
MULTIPLIERS = [2 ** (k / 2) / 4 for k in range(13)]  # the multiplier slider, as the page's `scales`
SHOWN = [0.25, 0.5, 1.0, 2.0, 4.0]  # the static table's columns


def batch() -> torch.Tensor:
    """Return the page's input batch: torch.manual_seed(0); torch.randn(32, 64), in float64."""
    return torch.randn(32, 64, generator=torch.Generator().manual_seed(0)).double()


def reference_source() -> str:
    """Return gradflow_ref.flow.gradient_norms without its docstring, as a Markdown code block."""
    source = inspect.getsource(flow.gradient_norms)
    return "```python\n" + re.sub(r'\n    """.*?"""\n', "\n", source, count=1, flags=re.S) + "```"


def crossing(scales, ratios) -> float:
    """Return the first of `scales` whose ratio (layer 1 / last layer) reaches 1."""
    for scale, ratio in zip(scales, ratios):
        if float(ratio) >= 1:
            return scale
    raise ValueError(f"crossing: no ratio reaches 1 over `scales` {scales[0]} to {scales[-1]}.")


@dataclass
class Profiles:
    """Gradient norm reaching each layer's input, relative to the output's."""

    pairs: list  # (activation, init), as PAIRS
    depths: list  # as DEPTHS
    multipliers: list  # as MULTIPLIERS
    ratios: dict  # activation -> [multiplier][depth] -> list of `depth` ratios, layer 1 first

    def at(self, activation: str, multiplier: float, depth: int) -> list[float]:
        """Return the profile of one network, layer 1 first."""
        by_m = self.ratios[activation]
        return by_m[self.multipliers.index(multiplier)][self.depths.index(depth)]

    def layer1(self, activation: str, multiplier: float, depth: int) -> float:
        """Return the ratio reaching layer 1 of one network."""
        return self.at(activation, multiplier, depth)[0]


def profiles(pairs=PAIRS, depths=DEPTHS, multipliers=MULTIPLIERS, x=None) -> Profiles:
    """Measure every (activation, multiplier, depth) the widget can show.

    Args:
        pairs: (activation, init) of each network family.
        depths: the depths measured.
        multipliers: the multipliers on the init's weights measured.
        x: the input batch, shape (batch, 64); `batch()` when None. Measured in float64 on CPU.
    """
    x = batch() if x is None else x.detach().to("cpu", torch.float64)
    out_norm = math.sqrt(x.numel())  # the loss is out.sum(): the output's gradient is all ones
    ratios = {}
    for activation, init in pairs:
        ratios[activation] = []
        for m in multipliers:
            # build_mlp draws the layers in order from one seeded generator, so the first d
            # blocks of the deepest network are exactly build_mlp(depth=d): one build each
            cfg = MLPConfig(depth=max(depths), activation=activation, init=init, scale=m)
            net = build_mlp(cfg, dtype=torch.float64)
            ratios[activation].append(
                [(gradient_norms(net[: 2 * d], x) / out_norm).tolist() for d in depths]
            )
    return Profiles(list(pairs), list(depths), list(multipliers), ratios)


def widget(p: Profiles, shown=SHOWN, depth: int = 20) -> str:
    """Return the flow widget; without JavaScript, a table of layer 1 at `depth` by multiplier."""
    import markdown

    from gradflow_site.render import table
    from gradflow_site.widgets import widget as make_widget

    static = markdown.markdown(
        table(
            ["activation (init)"] + [f"×{m:g}" for m in shown],
            [[f"{a} ({i})"] + [f"{p.at(a, m, depth)[0]:.1e}" for m in shown] for a, i in p.pairs],
            align="l" + "r" * len(shown),
        ),
        extensions=["tables"],
    )
    data = {
        "activations": [a for a, _ in p.pairs],
        "inits": [i for _, i in p.pairs],
        "depths": p.depths,
        "scales": p.multipliers,
        # log10 of (gradient norm at each layer's input / output's), layer 1 first:
        # [activation][multiplier][depth] -> list of `depth` values; 3 decimals is 0.1 %
        "log10": {
            a: [[[round(math.log10(v), 3) for v in prof] for prof in by_d] for by_d in by_m]
            for a, by_m in p.ratios.items()
        },
    }
    return make_widget("flow", data, static=static)
