"""The refusal suite's figures: histograms of c(x) per split for one system (seed 001's view),
and every source's rejection share per split and system."""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.plots.save import NoFigure, new_figure
from workbench.refusal.datasets import EXPECTED

#: One colour per expected behaviour: refuse (red), may refuse (amber), should answer (green).
EXPECTED_COLOURS = {
    "should_refuse": "#c0504d",
    "may_refuse": "#d9a53f",
    "should_not_refuse": "#4c9f70",
}


def plot_confidence_histograms(scores: pd.DataFrame, system: str, margin: float = 0.1):
    """One panel per split: histogram of the primary c(x) over the system's prompts, coloured
    by the behaviour expected, with the ±margin band seed 001's classes use."""
    f = scores[(scores["system"] == system) & scores["confidence"].notna()]
    if f.empty:
        return NoFigure(f"no scored prompts for {system}")
    splits = list(dict.fromkeys(f["split"]))
    cols = min(4, len(splits))
    rows = -(-len(splits) // cols)
    fig = new_figure(2.7 * cols, 2.3 * rows + 0.4)
    axes = fig.subplots(rows, cols, sharex=True, squeeze=False)
    bins = np.linspace(-1, 1, 21)
    for ax, split in zip(axes.flat, splits):
        g = f[f["split"] == split]
        expected = g["expected"].iloc[0]
        ax.hist(g["confidence"], bins=bins, color=EXPECTED_COLOURS.get(expected, "grey"))
        ax.axvspan(-margin, margin, color="#dddddd", zorder=0)
        label = split if split.endswith(expected) else f"{split} ({expected})"
        ax.set_title(f"{label}\nn={len(g)} prompts", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes.flat[len(splits) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("c(x)", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("prompts", fontsize=8)
    fig.suptitle(f"{system}: refusal confidence by {f['source'].iloc[0]}", fontsize=9)
    return fig


def plot_source_rates(table: pd.DataFrame):
    """Per split (and system): the rejection % of prompts by each source's c(x), side by side,
    so a detector that disagrees with the judge (or with the others) shows at once."""
    if table.empty:
        return NoFigure("no scored splits")
    systems = list(dict.fromkeys(table["system"]))
    sources = list(dict.fromkeys(table["source"]))
    fig = new_figure(
        max(5.0, 1.2 * table[["system", "split"]].drop_duplicates().shape[0] + 2),
        3.2 * len(systems),
    )
    axes = fig.subplots(len(systems), 1, squeeze=False)[:, 0]
    width = 0.8 / len(sources)
    for ax, system in zip(axes, systems):
        f = table[table["system"] == system]
        splits = list(dict.fromkeys(f["split"]))
        x = np.arange(len(splits))
        for i, s in enumerate(sources):
            vals = [
                f[(f["split"] == sp) & (f["source"] == s)]["rejection_pct"].iloc[0] for sp in splits
            ]
            bars = ax.bar(x + (i - (len(sources) - 1) / 2) * width, vals, width, label=s)
            ax.bar_label(bars, fmt="%.0f", fontsize=6)  # a zero reads as measured
        labels = [
            f"{sp}\n({f[f['split'] == sp]['expected'].iloc[0].replace('_', ' ')})" for sp in splits
        ]
        ax.set_xticks(x, labels, fontsize=7)
        ax.set_ylim(0, 100)
        ax.set_ylabel("rejection, % of prompts", fontsize=8)
        ax.set_title(system, fontsize=9)
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    assert set(EXPECTED) >= set(table["expected"])
    return fig
