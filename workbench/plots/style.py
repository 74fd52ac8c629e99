"""Figures legible at a paper's width: every figure function draws at one column's width
(:data:`~workbench.plots.save.FIGURE_WIDTHS`) with text of :data:`~workbench.plots.save.FONT_SIZE`
points, so that ``save_figure(fig, name, width="column")`` prints it at that size.

The rules the helpers here keep (``tests/test_figure_legibility.py`` checks them on every
figure of the notebooks): no text under 8 pt on the page and none off it or over other text;
integer ticks on an axis that counts (prompts, questions); one scale for panels that are
compared; every colour and band named in a legend (or by the tick its bar sits on). Values are
written beside horizontal bars (never rotated text between narrow bars), and a legend goes
below the panels (a legend to their right takes a third of a column).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from workbench.plots.save import (
    FIGURE_WIDTHS,
    FONT_SIZE,
    PAPER_RC,
    TITLE_SIZE,
    NoFigure,
    text_width,
)

#: Room per horizontal bar, in points: a value written beside a bar (FONT_SIZE text is as
#: tall as its size) does not touch the next bar's.
BAR_PITCH = 9.5
#: Share of a group's room its bars take (the rest separates groups).
GROUP_FILL = 0.8


def paper_figure(draw: Callable) -> Callable:
    """Decorate a figure function: it draws under :data:`~workbench.plots.save.PAPER_RC`
    (8 pt text, 9 pt titles, legends without frames), tick labels included."""

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        import matplotlib

        # rcParams are global: a figure another thread starts meanwhile would get 8 pt text too
        with matplotlib.rc_context(PAPER_RC):
            fig = draw(*args, **kwargs)
            if not isinstance(fig, NoFigure):
                for ax in fig.axes:  # ticks are made when drawn, after this context
                    ax.tick_params(labelsize=FONT_SIZE)
        return fig

    return wrapper


def axes_width(inches: float, tick_labels: Sequence[str] = (), ylabel: bool = False) -> float:
    """Inches left for an axes in a figure ``inches`` wide beside its y tick labels (and a y
    label): the width a caption above it may take."""
    labels = max((text_width(str(t)) for t in tick_labels), default=0.0)
    return inches - (labels + 14 + (1.6 * FONT_SIZE if ylabel else 0)) / 72


def count_axis(axis) -> None:
    """Integer ticks on an axis that counts things (prompts, questions, concepts)."""
    from matplotlib.ticker import MaxNLocator

    # min_n_ticks=1: with counts of 0-1 (a small limit) MaxNLocator would otherwise give up on
    # integers for want of three of them, and tick 0.4, 0.8
    axis.set_major_locator(MaxNLocator(nbins="auto", integer=True, min_n_ticks=1))


def legend_columns(labels: Sequence[str], inches: float, size: float = FONT_SIZE) -> int:
    """How many legend entries fit side by side in ``inches`` (at most all of them)."""
    handle = (1.5 + 0.6) * size  # handlelength and handletextpad below, in font sizes
    widest = max((text_width(str(label), size) for label in labels), default=0.0) + handle
    room = inches * 72 - 2 * 0.5 * size - 6
    gap = 1.2 * size
    n = max(1, int((room + gap) // (widest + gap)))
    return min(n, max(1, len(labels)))


def legend_below(fig, handles, labels: Sequence[str] | None = None, title: str | None = None):
    """A legend under every panel, in as many columns as the figure's width holds."""
    if labels is None:
        labels = [h.get_label() for h in handles]
    labels = list(labels)
    return fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=legend_columns(labels, fig.get_size_inches()[0]),
        title=title,
        handlelength=1.5,
        handletextpad=0.6,
        columnspacing=1.2,
        borderpad=0.5,
    )


def panel_columns(titles: Sequence[str], inches: float, most: int = 2) -> int:
    """Columns for one panel per title: as many as ``most`` while every title's widest line
    fits a panel, otherwise one."""
    for cols in range(min(most, max(1, len(titles))), 1, -1):
        panel = (inches * 72 - 36) / cols - 8  # 36 pt of y tick labels and label
        if all(text_width(t, TITLE_SIZE) <= panel for t in titles):
            return cols
    return 1


def hbar_axes_height(n_groups: int, n_series: int, label_lines: int = 1) -> float:
    """Inches an axes of ``n_groups`` groups of ``n_series`` horizontal bars needs (each group
    named by a tick label of ``label_lines`` lines)."""
    group = max(n_series * BAR_PITCH / GROUP_FILL, label_lines * 1.25 * FONT_SIZE + 4)
    return n_groups * group / 72 + 0.15


def legend_rows(labels: Sequence[str], inches: float = FIGURE_WIDTHS["column"]) -> int:
    return -(-len(labels) // legend_columns(labels, inches)) if len(labels) else 0


def figure_height(
    axes_inches: float,
    title_lines: int = 0,
    legend: Sequence[str] = (),
    inches: float = FIGURE_WIDTHS["column"],
    legend_title: bool = False,
) -> float:
    """Inches of a figure whose panels take ``axes_inches`` in all: room added for
    ``title_lines`` lines of title, the x ticks and label, and a legend of ``legend`` below."""
    rows = legend_rows(legend, inches) + (1 if legend_title and legend else 0)
    points = title_lines * 1.25 * TITLE_SIZE + 3.2 * FONT_SIZE + 10
    if rows:
        points += rows * 1.4 * FONT_SIZE + FONT_SIZE
    return axes_inches + points / 72


def panel_grid(fig, n: int, cols: int, sharex: bool = True, sharey: bool = True) -> list:
    """``n`` panels in rows of ``cols`` (the grid's spare cells hidden); a panel with no panel
    below it keeps its x tick labels."""
    rows = -(-n // cols)
    grid = fig.subplots(rows, cols, sharex=sharex, sharey=sharey, squeeze=False)
    flat = list(grid.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    for i, ax in enumerate(flat[:n]):
        if i + cols >= n:  # the lowest panel of its column
            ax.xaxis.set_tick_params(labelbottom=True)
    return flat[:n]


def grouped_hbars(
    ax,
    groups: Sequence[str],
    series: Sequence[str],
    values,
    colours: Sequence,
    lo=None,
    hi=None,
    fmt: Callable[[float], str] = "{:.2f}".format,
    limit: float = 1.0,
    missing: str = "n/a",
):
    """Horizontal bars: one group per ``groups`` (top to bottom, named by the y ticks), one bar
    per ``series`` in each (top to bottom, named by their colours' legend: ``label`` of each
    bar container; ``colours[j]`` one colour or one per group). ``values`` is groups x series
    (NaN: not measured, written ``missing``, once for a group of none); ``lo`` /
    ``hi`` the error bars' lengths below and above. Each value is written beside its bar (past
    its error bar); a zero bar gets a mark at the axis so it reads as measured. The value axis
    runs from 0 to ``limit`` with room for the numbers."""
    values = np.asarray(values, dtype=float)
    n = len(series)
    height = GROUP_FILL / max(1, n)
    y = np.arange(len(groups), dtype=float)
    containers = []
    for j, name in enumerate(series):
        ys = y + (j - (n - 1) / 2) * height
        vals = values[:, j]
        err = None
        ends = vals.copy()
        if lo is not None and hi is not None:
            low = np.nan_to_num(np.asarray(lo, dtype=float)[:, j])
            high = np.nan_to_num(np.asarray(hi, dtype=float)[:, j])
            err = [low, high]
            ends = vals + high
        bars = ax.barh(
            ys,
            np.nan_to_num(vals),
            height,
            xerr=err,
            color=colours[j],
            label=name,
            capsize=1.5,
            error_kw={"lw": 0.6},
        )
        containers.append(bars)
        for bar, yy, v, end, blank in zip(bars, ys, vals, ends, np.isnan(values).all(axis=1)):
            if blank:  # said once for the whole group, below
                continue
            ax.annotate(
                missing if np.isnan(v) else fmt(v),
                (0.0 if np.isnan(v) else end, yy),
                xytext=(2, 0),
                textcoords="offset points",
                ha="left",
                va="center",
            )
            if v == 0:
                ax.plot(
                    [0, 0],
                    [yy - height / 2, yy + height / 2],
                    lw=2,
                    color=bar.get_facecolor(),
                    solid_capstyle="butt",
                )
    for yy in y[np.isnan(values).all(axis=1)]:
        ax.annotate(
            missing, (0.0, yy), xytext=(2, 0), textcoords="offset points", ha="left", va="center"
        )
    ax.set_yticks(y, list(groups))
    ax.set_ylim(len(groups) - 0.5, -0.5)  # first group on top
    ax.set_xlim(0, limit * 1.22)
    ax.set_xticks(np.linspace(0, limit, 5))
    ax.tick_params(axis="y", length=0)
    return containers
