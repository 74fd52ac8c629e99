"""Figures for categorical editing (drawn at one column's width: :mod:`workbench.plots.style`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.plots.save import new_figure
from workbench.plots.style import (
    BAR_PITCH,
    GROUP_FILL,
    figure_height,
    grouped_hbars,
    hbar_axes_height,
    legend_below,
    paper_figure,
)

EDIT_METRICS = ("edit_success", "property_success", "consistency", "invariance")


@paper_figure
def plot_edit_metrics(metrics: pd.DataFrame):
    """Overall metrics per editor (each value written beside its bar), with chance marked."""
    import seaborn as sns

    f = metrics[metrics["subset"] == "overall"]
    editors = list(dict.fromkeys(f["editor"]))
    colours = sns.color_palette("colorblind", len(editors))
    fig = new_figure(
        "column",
        figure_height(hbar_axes_height(len(EDIT_METRICS), len(editors)), 0, [*editors, "chance"]),
    )
    ax = fig.subplots()
    values = np.array(
        [
            [f[(f.editor == e) & (f.metric == m)]["value"].mean() for e in editors]
            for m in EDIT_METRICS
        ]
    )
    handles = grouped_hbars(
        ax, [m.replace("_", " ") for m in EDIT_METRICS], editors, values, colours
    )
    chance = [f[f.metric == m]["chance"].mean() for m in EDIT_METRICS]
    y = np.arange(len(EDIT_METRICS))
    handles.append(
        ax.vlines(
            chance, y - 0.45, y + 0.45, colors="k", linestyles="--", lw=1, label="chance", zorder=3
        )
    )
    ax.set_xlabel("accuracy")
    legend_below(fig, handles)
    return fig


@paper_figure
def plot_consistency_by_group(metrics: pd.DataFrame):
    """Consistency per superordinate group and editor."""
    import seaborn as sns

    f = metrics[
        (metrics["metric"] == "consistency") & metrics["subset"].str.startswith("group=")
    ].copy()
    f["group"] = f["subset"].str.removeprefix("group=").str.replace("_", " ")
    editors = list(dict.fromkeys(f["editor"]))
    groups = f["group"].nunique()
    fig = new_figure(
        "column",
        figure_height(groups * len(editors) * BAR_PITCH / GROUP_FILL / 72 + 0.15, 0, editors),
    )
    ax = fig.subplots()
    sns.barplot(f, y="group", x="value", hue="editor", ax=ax, palette="colorblind", errorbar=None)
    ax.set_xlim(0, 1.05)
    ax.set_xlabel("consistency")
    ax.set_ylabel("superordinate group")
    ax.tick_params(axis="y", length=0)
    handles, labels = ax.get_legend_handles_labels()
    ax.get_legend().remove()
    legend_below(fig, handles, labels)
    return fig
