"""Figures for responses to the unknown (drawn at one column's width: :mod:`workbench.plots.style`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.plots.save import FIGURE_WIDTHS, fit_lines, new_figure
from workbench.plots.style import (
    axes_width,
    count_axis,
    figure_height,
    legend_below,
    panel_grid,
    paper_figure,
)

#: Answerable and unanswerable questions: one colour each.
PARTITION_COLOURS = {"answerable": "#4c72b0", "unanswerable": "#dd8452"}
#: The two rates of :func:`plot_by_confidence`: their colours (a rate's guide is dashed in it).
RATE_COLOURS = {"refusal_rate": "#c0504d", "accuracy": "#4c72b0"}


@paper_figure
def plot_by_confidence(levels: pd.DataFrame, xlabel: str = "verbalized confidence (0-10)"):
    """Refusal rate and accuracy at each confidence level on one scale, each with its ideal
    (dashed: refuse when unsure; accuracy equal to the confidence), above the number of
    questions at each level."""
    labels = [
        "refusal rate",
        "ideal refusal: 1 - confidence/10",
        "accuracy",
        "calibrated: confidence/10",
        "questions at that level",
    ]
    text = fit_lines([xlabel], axes_width(FIGURE_WIDTHS["column"], ["0.00"], ylabel=True))
    fig = new_figure("column", figure_height(1.6 + 0.8, text.count("\n"), labels))
    rates, counts = panel_grid(fig, 2, 1, sharey=False)
    fig.get_layout_engine().set(h_pad=0.02)
    rates.get_gridspec().set_height_ratios([2, 1])
    handles = []
    for col, name in (("refusal_rate", "refusal rate"), ("accuracy", "accuracy")):
        colour = RATE_COLOURS[col]
        f = levels.dropna(subset=[col])
        (line,) = rates.plot(f["confidence"], f[col], marker="o", ms=3, color=colour, label=name)
        (guide,) = rates.plot(
            [0, 10],
            [0, 1] if col == "accuracy" else [1, 0],
            ls="--",
            color=colour,
            lw=0.9,
            alpha=0.6,
        )
        handles += [line, guide]
    rates.set_ylabel("rate")
    rates.set_ylim(-0.02, 1.05)
    handles.append(counts.bar(levels["confidence"], levels["n"], width=0.7, color="0.55"))
    counts.set_ylabel("questions")
    count_axis(counts.yaxis)
    counts.set_xlim(-0.5, 10.5)
    counts.set_xticks(range(0, 11, 2))
    counts.set_xlabel(text)
    legend_below(fig, handles, labels)
    return fig


@paper_figure
def plot_uncertainty_histograms(rows: pd.DataFrame):
    """Next-token entropy and prompt perplexity (a panel each), answerable against
    unanswerable questions."""
    fig = new_figure("column", figure_height(2 * 1.15 + 0.3, 0, list(PARTITION_COLOURS)))
    axes = panel_grid(fig, 2, 1, sharex=False, sharey=False)
    handles = {}
    for ax, col, log in ((axes[0], "entropy", False), (axes[1], "perplexity", True)):
        vals = rows[col].replace([np.inf, -np.inf], np.nan).dropna()
        data = np.log10(vals) if log else vals
        bins = np.linspace(data.min(), data.max(), 25) if len(data) else 10
        for part, colour in PARTITION_COLOURS.items():
            v = rows.loc[rows["partition"] == part, col].replace([np.inf, -np.inf], np.nan).dropna()
            _, _, bars = ax.hist(
                np.log10(v) if log else v, bins=bins, alpha=0.6, label=part, color=colour
            )
            handles[part] = bars
        ax.set_xlabel("log10 prompt perplexity" if log else "next-token entropy (nats)")
        ax.set_ylabel("questions")
        count_axis(ax.yaxis)
    legend_below(fig, list(handles.values()), list(handles))
    return fig
