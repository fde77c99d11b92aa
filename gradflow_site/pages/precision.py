"""Build side of docs/precision.md: the bits and numberline widgets and their static tables.

Both widgets get every format's fields from gradflow_ref.precision.FORMATS; their no-JavaScript
tables hold what gradflow_ref.precision stores for a few values.
"""

from __future__ import annotations

import math

import torch

from gradflow_ref.precision import FORMATS, bit_fields, classify, stored_value

__all__ = ["LINE_VALUES", "bits_widget", "formats", "numberline_widget", "svg"]

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
