"""Interactive widgets: build-time data from gradflow_ref, drawn in the browser by small scripts.

An executed block computes a widget's data with gradflow_ref and prints `widget(...)` with
`html="1"`. The page then holds a `<figure data-gf-widget>` with the data as JSON in a
`data-gf-data` attribute (instant navigation strips `<script type="application/json">`) and a
static figure that readers without JavaScript see. `docs/assets/widgets/loader.js` finds the
figure, loads `core.js` and `<name>.js` (only on pages that have a widget), and mounts it.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

__all__ = ["TITLE", "widget", "rounded", "WIDGET_DIR", "DATA_BUDGET"]

WIDGET_DIR = Path(__file__).resolve().parents[1] / "docs" / "assets" / "widgets"
DATA_BUDGET = 500 * 1024  # bytes of JSON per page (tests/test_widgets.py sums a page's widgets)
TITLE = "@@gf-title@@"  # a widget's title, filled from its caption's bold lead (extension.py)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _finite(value, where: str = "data"):
    """Return `value` with tuples as lists; raise on NaN/inf (JSON has no spelling for them)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(
            f"widget: {where} is {value!r}; JSON cannot carry it. Encode it explicitly "
            "(for example None, or a string such as 'inf') and handle it in the script."
        )
    if isinstance(value, dict):
        return {str(k): _finite(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def widget(
    name: str,
    data: dict,
    static: str,
    title: str | None = None,
    caption: str | None = None,
    needs: tuple[str, ...] = (),
) -> str:
    """Return the HTML of an interactive widget for an executed block to print (`html="1"`).

    Args:
        name: the widget's script, `docs/assets/widgets/<name>.js` (lowercase, `_` allowed).
        data: JSON-serialisable values computed at build time; floats must be finite.
        static: HTML shown without JavaScript (an `svg(...)` figure or a table), hidden once
            the script has mounted the live widget.
        title: the widget's accessible name and visible heading, e.g. "Clip a gradient". Leave
            it out in chapters: the `/// caption` after the block gives it (its leading bold
            text; gradflow_site/extension.py).
        caption: optional sentence under the widget (plain text).
        needs: shared scripts in docs/assets/widgets/ (names without .js) that the loader runs
            before `<name>.js`, for logic two widgets use (e.g. "precision").

    Raises:
        ValueError: unknown widget name, empty title or static, non-finite data, or data
            over the page budget.

    Example:
        >>> print(widget("clipping", {"max_norm": 1.0}, svg(fig, alt), "Clip a gradient"))
    """
    _check_scripts(name, needs)
    if title is None:
        title = TITLE
    if not title.strip():
        raise ValueError("widget: `title` must name the widget, got an empty string.")
    if not static or not static.strip():
        raise ValueError(
            f"widget {name!r}: `static` must hold the figure shown without JavaScript, got ''."
        )
    payload = json.dumps(_finite(data), separators=(",", ":"), sort_keys=True, allow_nan=False)
    if len(payload) > DATA_BUDGET:
        raise ValueError(
            f"widget {name!r}: data is {len(payload) / 1024:.0f} KiB, over the "
            f"{DATA_BUDGET // 1024} KiB page budget; sample the grid more coarsely or round."
        )
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    deps = f' data-gf-needs="{" ".join(needs)}"' if needs else ""
    return (
        f'<figure class="gf-widget" data-gf-widget="{name}"{deps} '
        f'data-gf-data="{html.escape(payload, quote=True)}" '
        f'aria-label="{html.escape(title.strip(), quote=True)}">'
        f'<p class="gf-widget__title">{html.escape(title.strip())}</p>'
        f'<div class="gf-widget__static">{static}</div>{cap}</figure>'
    )


def _check_scripts(name, needs: tuple[str, ...]) -> None:
    """Raise ValueError unless `name` and every one of `needs` has its script."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"widget: `name` must match [a-z][a-z0-9_]*, got {name!r}.")
    script = WIDGET_DIR / f"{name}.js"
    if not script.exists():
        raise ValueError(
            f"widget: `name` {name!r} has no script; create docs/assets/widgets/{name}.js."
        )
    for need in needs:
        if not _NAME.match(need) or not (WIDGET_DIR / f"{need}.js").exists():
            raise ValueError(
                f"widget {name!r}: `needs` names {need!r}, which is not a script in "
                f"docs/assets/widgets/; create {need}.js or fix the name."
            )


def rounded(values, digits: int = 4):
    """Return `values` (nested lists/dicts of floats) rounded to `digits` significant digits.

    Keeps widget payloads small; the rounding is far below what a figure can show.
    """
    if isinstance(values, dict):
        return {k: rounded(v, digits) for k, v in values.items()}
    if isinstance(values, (list, tuple)):
        return [rounded(v, digits) for v in values]
    if isinstance(values, float) and math.isfinite(values) and values != 0.0:
        return float(f"{values:.{digits}g}")
    return values
