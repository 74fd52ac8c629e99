"""Figures of the steering gate: the trade-off between firing on the concept and off it (drawn
at one column's width: :mod:`workbench.plots.style`)."""

from __future__ import annotations

import pandas as pd

from workbench.plots.save import new_figure
from workbench.plots.style import figure_height, legend_below, panel_grid, paper_figure


@paper_figure
def plot_gate_tradeoff(curve: pd.DataFrame, per_target: pd.DataFrame):
    """Mean TPR (target and descendant questions) against mean FPR on near and on far concepts'
    questions (a panel each, on one scale), one line per setting as every threshold is raised or
    lowered; the settings' operating points (offset 0) are circled. ``n`` targets per setting
    in the legend."""
    from matplotlib.lines import Line2D

    n = per_target.groupby("setting")["target"].nunique()
    settings = list(dict.fromkeys(curve["setting"]))
    labels = [f"{name} (n={n.get(name, 0)})" for name in settings]
    labels += ["operating point (offset 0)", "chance"]
    fig = new_figure("column", figure_height(2 * 1.7, 0, labels))
    axes = panel_grid(fig, 2, 1)
    handles: dict = {}
    for ax, fpr, title in (
        (axes[0], "fpr_near", "near concepts (siblings, parent, ancestors)"),
        (axes[1], "fpr_far", "far concepts (elsewhere in the taxonomy)"),
    ):
        for name, label in zip(settings, labels):
            f = curve[curve["setting"] == name].sort_values("offset")
            tpr = (f["tpr_target"] + f["tpr_descendant"]) / 2
            (line,) = ax.plot(f[fpr], tpr, marker=".", label=label)
            handles.setdefault(label, line)
            at = f["offset"].abs().idxmin()
            ax.plot(
                f.loc[at, fpr],
                tpr.loc[at],
                marker="o",
                ms=7,
                color=line.get_color(),
                markerfacecolor="none",
            )
        handles["chance"] = ax.plot([0, 1], [0, 1], ls=":", color="0.6", lw=1)[0]
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(title, pad=2)
        ax.set_ylabel("TPR (target, descendants)")
    axes[-1].set_xlabel("false-positive rate")
    handles["operating point (offset 0)"] = Line2D(
        [], [], marker="o", ms=7, ls="none", color="0.3", markerfacecolor="none"
    )
    legend_below(fig, [handles[label] for label in labels], labels)
    return fig
