"""The refusal suite's figures: histograms of c(x) per split for one system (seed 001's view),
and every source's rejection share per split and system. Both are drawn at one column's width
with 8 pt text (:mod:`workbench.plots.style`) and show every split the suite's table lists."""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.plots.save import FIGURE_WIDTHS, TITLE_SIZE, NoFigure, fit_lines, new_figure
from workbench.plots.style import (
    axes_width,
    count_axis,
    figure_height,
    grouped_hbars,
    hbar_axes_height,
    legend_below,
    panel_columns,
    panel_grid,
    paper_figure,
)
from workbench.refusal.datasets import EXPECTED

#: One colour per expected behaviour: refuse (red), may refuse (amber), should answer (green).
EXPECTED_COLOURS = {
    "should_refuse": "#c0504d",
    "may_refuse": "#d9a53f",
    "should_not_refuse": "#4c9f70",
}
#: The ±margin band around c(x) = 0 (seed 001's ambiguous class).
BAND_COLOUR = "#dddddd"
COLUMN = FIGURE_WIDTHS["column"]


def _readable(expected: str) -> str:
    return expected.replace("_", " ")


def _split_label(split: str, expected: str, sep: str = "\n") -> str:
    """A split's name, with its expected behaviour when the name does not say it."""
    return split if split.endswith(expected) else f"{split}{sep}({_readable(expected)})"


def _fit_name(name: str, inches: float) -> str:
    """A split's name in lines of ``inches`` at title size, broken after a "/" first."""
    return fit_lines([name.replace("/", "/ ")], inches, TITLE_SIZE).replace("/ ", "/")


@paper_figure
def plot_confidence_histograms(scores: pd.DataFrame, system: str, margin: float = 0.1):
    """One panel per split of ``system`` (every split the suite's table lists; one without a
    scored prompt says so), on one scale: the histogram of the primary c(x) over its prompts,
    coloured by the behaviour expected, over the ±``margin`` band in which seed 001 calls a
    prompt ambiguous."""
    from matplotlib.patches import Patch

    mine = scores[scores["system"] == system]
    if mine.empty:
        return NoFigure(f"no prompts for {system}")
    splits = list(dict.fromkeys(mine["split"]))
    if mine["confidence"].isna().all():
        return NoFigure(
            f"no scored prompts for {system} (no sample of {', '.join(splits)} has answer tokens)"
        )
    groups = {split: mine[mine["split"] == split] for split in splits}
    counts = []
    for g in groups.values():
        n, scored = len(g), int(g["confidence"].notna().sum())
        prompts = "prompt" if n == 1 else "prompts"
        counts.append(f"n={n} {prompts}" if scored == n else f"{scored} of {n} {prompts} scored")
    # two columns of panels when the titles fit them, or when one column would run too long
    cols = panel_columns([f"{s}\n{c}" for s, c in zip(splits, counts)], COLUMN)
    cols = 2 if len(splits) > 3 else cols
    room = (COLUMN * 72 - 36) / cols / 72 - 0.12
    titles = [f"{_fit_name(s, room)}\n{c}" for s, c in zip(splits, counts)]
    rows = -(-len(splits) // cols)
    expected_here = [e for e in EXPECTED_COLOURS if e in set(mine["expected"])]
    labels = [f"expected: {_readable(e)}" for e in expected_here]
    labels.append(f"|c(x)| ≤ {margin:g}: ambiguous")
    title = fit_lines(
        [f"{system}:", f"refusal confidence by {mine['source'].iloc[0]}"], COLUMN, TITLE_SIZE
    )
    fig = new_figure("column", figure_height(rows * 1.15, title.count("\n") + 1, labels))
    axes = panel_grid(fig, len(splits), cols)
    bins = np.linspace(-1, 1, 21)
    for ax, g, panel_title in zip(axes, groups.values(), titles):
        expected = g["expected"].iloc[0]
        ax.axvspan(-margin, margin, color=BAND_COLOUR, zorder=0)
        values = g["confidence"].dropna()
        if len(values):
            ax.hist(values, bins=bins, color=EXPECTED_COLOURS.get(expected, "grey"))
        else:
            ax.text(
                0.5,
                0.5,
                f"no scored prompts\n(no sample has answer tokens;\nexpected: {_readable(expected)})",
                transform=ax.transAxes,
                ha="center",
                va="center",
            )
        ax.set_title(panel_title, pad=2)
    for i, ax in enumerate(axes):
        if i % cols == 0:
            ax.set_ylabel("prompts")
        if i + cols >= len(axes):
            ax.set_xlabel("refusal confidence c(x)")
    axes[0].set_xlim(-1, 1)
    axes[0].set_xticks([-1, -0.5, 0, 0.5, 1] if cols == 1 else [-1, 0, 1])
    axes[0].set_ylim(bottom=0)
    count_axis(axes[0].yaxis)
    handles = [Patch(color=EXPECTED_COLOURS[e]) for e in expected_here]
    handles.append(Patch(color=BAND_COLOUR))
    legend_below(fig, handles, labels)
    fig.suptitle(title)
    return fig


@paper_figure
def plot_source_rates(table: pd.DataFrame):
    """Per split (and system, a panel each on one scale): the rejection % of prompts by each
    source's c(x), side by side and written beside each bar, so a detector that disagrees with
    the judge (or with the others) shows at once. A split without scored prompts reads "none
    scored"."""
    if table.empty:
        return NoFigure("no scored splits")
    assert set(EXPECTED) >= set(table["expected"])
    systems = list(dict.fromkeys(table["system"]))
    sources = list(dict.fromkeys(table["source"]))
    primary = set(table.loc[table["primary"], "source"]) if "primary" in table else set()
    labels = [s + (" (primary)" if s in primary else "") for s in sources]
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    colours = [cmap(i % 10) for i in range(len(sources))]
    panels = []
    for system in systems:
        f = table[table["system"] == system]
        splits = list(dict.fromkeys(f["split"]))
        ticks = [_split_label(sp, f[f["split"] == sp]["expected"].iloc[0]) for sp in splits]
        lines = max(t.count("\n") + 1 for t in ticks)
        panels.append(
            (system, f, splits, ticks, hbar_axes_height(len(splits), len(sources), lines))
        )
    fig = new_figure(
        "column", figure_height(sum(p[-1] + 0.3 for p in panels), 0, labels, legend_title=True)
    )
    axes = panel_grid(fig, len(systems), 1, sharex=True, sharey=False)
    fig.get_layout_engine().set(h_pad=0.04)
    axes[0].get_gridspec().set_height_ratios([p[-1] for p in panels])
    handles: list = []
    for ax, (system, f, splits, ticks, _) in zip(axes, panels):
        values = np.array(
            [
                [
                    f[(f["split"] == sp) & (f["source"] == s)]["rejection_pct"].iloc[0]
                    if len(f[(f["split"] == sp) & (f["source"] == s)])
                    else np.nan
                    for s in sources
                ]
                for sp in splits
            ],
            dtype=float,
        )
        bars = grouped_hbars(
            ax,
            ticks,
            sources,
            values,
            colours,
            fmt="{:.0f}".format,
            limit=100,
            missing="none scored",
        )
        handles = handles or bars
        ax.set_title(fit_lines([system], axes_width(COLUMN, ticks), TITLE_SIZE), pad=2)
    axes[-1].set_xlabel(
        fit_lines(
            ["rejection, % of prompts", "(by each source's c(x))"],
            axes_width(COLUMN, [t for p in panels for t in p[3]]),
        )
    )
    legend_below(fig, handles, labels, title="source")
    return fig
