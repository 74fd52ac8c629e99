"""Figures of the steering gate: the trade-off between firing on the concept and off it."""

from __future__ import annotations

import pandas as pd

from workbench.plots.save import new_figure


def plot_gate_tradeoff(curve: pd.DataFrame, per_target: pd.DataFrame):
    """Mean TPR (target and descendant questions) against mean FPR on near and on far concepts'
    questions, one line per setting as every threshold is raised or lowered; the settings'
    operating points (offset 0) are marked. ``n`` targets per setting in the legend."""
    fig = new_figure(8, 3.4)
    axes = fig.subplots(1, 2, sharey=True)
    n = per_target.groupby("setting")["target"].nunique()
    for ax, fpr, title in (
        (axes[0], "fpr_near", "near concepts (siblings, parent, ancestors)"),
        (axes[1], "fpr_far", "far concepts (elsewhere in the taxonomy)"),
    ):
        for name, f in curve.groupby("setting", sort=False):
            f = f.sort_values("offset")
            tpr = (f["tpr_target"] + f["tpr_descendant"]) / 2
            (line,) = ax.plot(f[fpr], tpr, marker=".", label=f"{name} (n={n.get(name, 0)})")
            at = f["offset"].abs().idxmin()
            ax.plot(
                f.loc[at, fpr],
                tpr.loc[at],
                marker="o",
                ms=8,
                color=line.get_color(),
                markerfacecolor="none",
            )
        ax.plot([0, 1], [0, 1], ls=":", color="0.6", lw=1)
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("false-positive rate")
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("true-positive rate (target, descendants)")
    axes[1].legend(fontsize=7, frameon=False, loc="lower right")
    return fig
