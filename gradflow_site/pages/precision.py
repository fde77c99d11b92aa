"""Build side of docs/precision.md: the bits and numberline widgets and their static tables,
the number-line and training-loss figures.

Both widgets get every format's fields from gradflow_ref.precision.FORMATS; their no-JavaScript
tables hold what gradflow_ref.precision stores for a few values. Datasheet peaks come from
gradflow_ref.hardware (re-exported as `peak_flops` for the page's sentences).
"""

from __future__ import annotations

import math

import torch

from gradflow_ref.hardware import peak_flops
from gradflow_ref.precision import FORMATS, bit_fields, classify, stored_value, ulp

__all__ = [
    "LINE_VALUES",
    "bits_widget",
    "format_table",
    "formats",
    "number_line_figure",
    "numberline_widget",
    "peak_flops",
    "stall_figure",
    "svg",
]

LINE_VALUES = (1e-8, 3e-5, 1e-3, 0.1, 1000.001, 70000.0)  # the numberline's static table rows
_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def svg(fig) -> str:
    """Return `fig` as inline SVG for the page (render.svg; the caption names it)."""
    from gradflow_site.render import svg as render_svg

    return render_svg(fig)


def formats() -> list[dict]:
    """Return every format's fields as the widgets' shared script (precision.js) reads them."""
    return [
        {
            "name": f.name,
            "label": f.label,
            "bits": f.bits,
            "exponent_bits": f.exponent_bits,
            "mantissa_bits": f.mantissa_bits,
            "bias": f.bias,
            "emin": f.emin,
            "has_inf": f.has_inf,
            "saturates": f.saturates,
            "max": f.max,
            "min_normal": f.min_normal,
            "min_subnormal": f.min_subnormal,
            # torch's own NaN: the one pattern a cast of NaN produces
            "nan_code": torch.tensor(math.nan).to(f.dtype).view(_INTS[f.bytes]).item() % 2**f.bits,
        }
        for f in FORMATS.values()
    ]


def format_table(names=("float32", "bfloat16", "float16")) -> str:
    """Return a Markdown table of each format's bits, range and precision (FORMATS' fields).

    Raises:
        ValueError: a name that is not a key of gradflow_ref.precision.FORMATS.
    """
    from gradflow_site.render import table

    unknown = [n for n in names if n not in FORMATS]
    if unknown:
        raise ValueError(f"format_table: `names` must be keys of FORMATS, got {unknown}.")
    head = ["format", "sign / exp / mantissa", "largest", "smallest normal"]
    head += ["smallest subnormal", "machine epsilon", "decimal digits", "bytes"]
    rows = [
        [
            f.label,
            f"1 / {f.exponent_bits} / {f.mantissa_bits}",
            f"{f.max:.4g}",
            f"{f.min_normal:.3g}",
            f"{f.min_subnormal:.3g}",
            f"{f.eps:.3g}",
            f"{f.decimal_digits:.2f}",
            str(f.bytes),
        ]
        for f in (FORMATS[n] for n in names)
    ]
    return table(head, rows, align="l" + "r" * (len(head) - 1))


def _html_table(headers, rows, align: str) -> str:
    import markdown

    from gradflow_site.render import table

    return markdown.markdown(table(headers, rows, align=align), extensions=["tables"])


def bits_widget(start: float = 0.1) -> str:
    """Return the bits widget; without JavaScript, a table of `start`'s bits in every format."""
    from gradflow_site.widgets import widget

    rows = [
        [f.label, f"`{bit_fields(start, f).pattern}`", f"{stored_value(start, f):.10g}"]
        for f in FORMATS.values()
    ]
    static = _html_table(["Format", f"Bits of {start:g}", "Stored value"], rows, "llr")
    data = {"formats": formats(), "start": f"{start:g}"}
    return widget("bits", data, static=static, needs=("precision",))


def numberline_widget(values=LINE_VALUES, start: float = 3e-5) -> str:
    """Return the numberline widget; without JavaScript, a table of what each format stores."""
    from gradflow_site.widgets import widget

    def cell(x, f):
        kind = classify(x, f)
        return f"{stored_value(x, f):.6g}" + ("" if kind == "normal" else f" ({kind})")

    rows = [[f"{x:g}"] + [cell(x, f) for f in FORMATS.values()] for x in values]
    labels = [f.label for f in FORMATS.values()]
    static = _html_table(["Value", *labels], rows, "r" * (len(labels) + 1))
    data = {"formats": formats(), "lo": -9, "hi": 5, "start": start}
    return widget("numberline", data, static=static, needs=("precision",))


def number_line_figure(centre: float = 1000.0, half_width: float = 10.0, marks=(1003.0, 1000.001)):
    """Return a figure of the values BF16, FP16 and FP32 can hold around `centre`.

    Formats with more than 200 values in the window are drawn as a solid bar; `marks` are
    dotted vertical lines.

    Raises:
        ValueError: `half_width` is not positive.
    """
    import matplotlib.pyplot as plt

    if not half_width > 0:
        raise ValueError(f"number_line_figure: `half_width` must be positive, got {half_width}.")
    fig, ax = plt.subplots(figsize=(7, 2.4))
    for row, name in enumerate(("bfloat16", "float16", "float32")):
        step = ulp(centre, name)
        ticks = torch.arange(centre - half_width, centre + half_width + step / 2, step)
        if len(ticks) < 200:
            ax.plot(ticks, [row] * len(ticks), "|", markersize=14)
        else:
            ax.plot([centre - half_width, centre + half_width], [row, row], linewidth=6)
        ax.text(centre + half_width * 1.05, row, f"spacing {step:g}", va="center", fontsize="small")
    for x in marks:
        ax.axvline(x, color="grey", linestyle=":", linewidth=1)
    ax.set_yticks([0, 1, 2], ["BF16", "FP16", "FP32"])
    ax.set_ylim(-0.7, 2.7)
    ax.set_xlim(centre - half_width * 1.05, centre + half_width * 1.35)
    ax.set_xlabel("value")
    ax.set_title(f"Representable values around {centre:g}")
    return fig


def stall_figure(runs: dict):
    """Return the training-loss figure of pure BF16 against FP32 weights under autocast.

    Args:
        runs: {(pure_bf16, seed): (losses, frozen)} as snippets/precision.py's stall section makes.

    Raises:
        ValueError: `runs` is empty.
    """
    import matplotlib.pyplot as plt

    from gradflow_site.render import plain_log_ticks

    if not runs:
        raise ValueError("stall_figure: `runs` must hold at least one (pure_bf16, seed) run.")
    fig, ax = plt.subplots(figsize=(7, 3.6))
    labels = {True: "pure BF16 (weights and AdamW moments)", False: "FP32 weights, BF16 autocast"}
    styles = {True: ("C0", "-"), False: ("C1", "--")}
    labelled = set()
    for (pure, _seed), (losses, _frozen) in runs.items():
        color, style = styles[pure]
        label = None if pure in labelled else labels[pure]
        ax.plot(losses, color=color, linestyle=style, linewidth=1.2, label=label)
        labelled.add(pure)
    ax.set_yscale("log")
    plain_log_ticks(ax)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (MSE)")
    ax.set_title(f"Same model and data, AdamW lr 1e-3, {len({s for _, s in runs})} seeds each")
    ax.legend()
    return fig
