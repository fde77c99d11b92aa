"""The phone rendering of a wide figure: narrower, its text no smaller than PHONE_MIN_PT.

render.svg adds it beside the figure's own rendering, and CSS shows one of the two
(gradflow.css, .gf-figure__wide / __narrow). Titles and labels wrap at the figure's edge,
legends take two columns at most, and panels laid out three or more to a row go two to a row.
"""

from __future__ import annotations

import re

from gradflow_site.figure_svg import svg_text

__all__ = ["PHONE_INCHES", "PHONE_MIN_PT", "narrow_svg"]

# A 390 px phone leaves about 350 CSS px for a figure. 3.6 in (259 pt) is drawn at its natural
# 4/3 px per pt there, so 9 pt text is 12 CSS px: 11 px or more even if the tight bounding
# box adds a tenth to the width.
PHONE_INCHES = 3.6
PHONE_MIN_PT = 9.0


def narrow_svg(fig, label: str) -> str | None:
    """Return a phone-width rendering of `fig` with text at PHONE_MIN_PT or more, or None.

    None when the figure is already narrow enough. Axes laid out in one row of three or more
    are rearranged two to a row, so each panel keeps a readable width.
    """
    from matplotlib.text import Text

    width, height = fig.get_size_inches()
    small = [t for t in fig.findobj(Text) if t.get_text() and t.get_fontsize() < PHONE_MIN_PT]
    if width <= PHONE_INCHES + 0.25 and not small:
        return None
    tall = max(height * 1.1, _two_per_row(fig))
    for text in small:
        text.set_fontsize(PHONE_MIN_PT)
    _phone_text(fig)
    _fit_phone_width(fig, min(width, PHONE_INCHES), tall)
    # the two renderings sit in one page: every element id of this one gets a prefix
    # one draw: _fit_phone_width made the figure as wide as its cropped image, so titles wrap
    # at the same place against either (savefig's "tight" would draw it twice)
    text = svg_text(fig, label, one_draw=True)
    text = re.sub(r'\bid="([^"]+)"', r'id="phone-\1"', text)
    return re.sub(r'(url\(#|href="#)([^)"]+)', r"\1phone-\2", text)


def _two_per_row(fig) -> float:
    """Put panels laid out in three or more columns two to a row, in reading order.

    Returns the height (inches) the new rows need, or 0 when the layout stays.
    """
    axes = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    spans = [ax.get_subplotspec() for ax in axes]
    cols = max((sp.colspan.stop for sp in spans), default=1)
    if cols < 3 or not all(len(sp.colspan) == 1 and len(sp.rowspan) == 1 for sp in spans):
        return 0.0

    def reading_order(ax):
        spec = ax.get_subplotspec()
        return spec.rowspan.start, spec.colspan.start

    order = sorted(axes, key=reading_order)
    n_rows = -(-len(order) // 2)
    grid = fig.add_gridspec(n_rows, 2)
    for i, ax in enumerate(order):
        ax.set_subplotspec(grid[i // 2, i % 2])
    return 2.0 * n_rows


def _phone_text(fig) -> None:
    """Wrap titles and labels at the figure's edge; legends in two columns at most; tick
    labels at PHONE_MIN_PT or more."""
    for ax in fig.axes:  # titles and labels wrap at the figure's edge instead of widening it
        for text in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label):
            text.set_wrap(True)
    for text in fig.texts:
        text.set_wrap(True)
    for ax in fig.axes:  # a legend of three or more columns: two on a phone
        legend = ax.get_legend()
        if legend is not None and getattr(legend, "_ncols", 1) > 2:
            ax.legend(
                handles=legend.legend_handles,
                labels=[t.get_text() for t in legend.get_texts()],
                ncols=2,
                loc=legend._loc,
                title=legend.get_title().get_text() or None,
                fontsize=max(PHONE_MIN_PT, legend.get_texts()[0].get_fontsize()),
            )
    for ax in fig.axes:  # tick labels are made at draw time, at the size tick_params holds
        for axis, which in (("x", ax.xaxis), ("y", ax.yaxis)):
            labels = which.get_ticklabels()
            if labels and labels[0].get_fontsize() < PHONE_MIN_PT:
                ax.tick_params(axis=axis, labelsize=PHONE_MIN_PT)


def _fit_phone_width(fig, width: float, tall: float) -> None:
    """Size `fig` to `width` x `tall` inches and lay it out so its saved image is that wide."""
    import warnings

    fig.set_size_inches(width, tall)
    with warnings.catch_warnings():
        # tight_layout warns on axes it cannot fit (colorbars, insets); the figure still renders
        warnings.simplefilter("ignore")
        fig.tight_layout()
        # labels and legends outside the axes widen the saved (tight) image: narrow the figure
        # by that much, twice at most, so the image itself is PHONE_INCHES wide
        for _ in range(2):
            extra = fig.get_tightbbox(fig.canvas.get_renderer()).width - PHONE_INCHES
            if extra <= 0.05:
                break
            fig.set_size_inches(max(1.5, fig.get_size_inches()[0] - extra), tall)
            fig.tight_layout()
