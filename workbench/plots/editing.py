"""Figures for categorical editing."""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.plots.save import new_figure

EDIT_METRICS = ("edit_success", "property_success", "consistency", "invariance")


def plot_edit_metrics(metrics: pd.DataFrame):
    """Overall metrics per editor, with chance marked."""
    import seaborn as sns

    f = metrics[metrics["subset"] == "overall"]
    editors = list(dict.fromkeys(f["editor"]))
    colours = dict(zip(editors, sns.color_palette("colorblind", len(editors))))
    fig = new_figure(7.5, 3.2)
    ax = fig.subplots()
    width = 0.8 / len(editors)
    x = np.arange(len(EDIT_METRICS))
    for i, e in enumerate(editors):
        vals = [f[(f.editor == e) & (f.metric == m)]["value"].mean() for m in EDIT_METRICS]
        ax.bar(x + (i - (len(editors) - 1) / 2) * width, vals, width, label=e, color=colours[e])
    chance = [f[f.metric == m]["chance"].mean() for m in EDIT_METRICS]
    ax.hlines(
        chance, x - 0.45, x + 0.45, colors="k", linestyles="--", lw=1, label="chance", zorder=3
    )
    ax.set_xticks(x, [m.replace("_", " ") for m in EDIT_METRICS])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def plot_consistency_by_group(metrics: pd.DataFrame):
    """Consistency per superordinate group and editor."""
    import seaborn as sns

    f = metrics[
        (metrics["metric"] == "consistency") & metrics["subset"].str.startswith("group=")
    ].copy()
    f["group"] = f["subset"].str.removeprefix("group=")
    fig = new_figure(7.5, 3.2)
    ax = fig.subplots()
    sns.barplot(f, x="group", y="value", hue="editor", ax=ax, palette="colorblind")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("consistency")
    ax.set_xlabel("superordinate group")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig
