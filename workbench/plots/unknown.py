"""Figures for responses to the unknown."""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.plots.save import new_figure


def plot_by_confidence(levels: pd.DataFrame, xlabel: str = "verbalized confidence (0-10)"):
    """Refusal rate and accuracy at each confidence level, with the diagonal."""
    fig = new_figure(9, 3.2)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, col, title in (
        (axes[0], "refusal_rate", "refusal rate"),
        (axes[1], "accuracy", "accuracy"),
    ):
        f = levels.dropna(subset=[col])
        ax.plot(
            [0, 10],
            [0, 1] if col == "accuracy" else [1, 0],
            ls="--",
            color="0.6",
            lw=1,
            label="calibrated" if col == "accuracy" else "ideal (refuse when unsure)",
        )
        ax.plot(f["confidence"], f[col], marker="o")
        for _, r in f.iterrows():
            ax.annotate(
                f"{int(r['n'])}",
                (r["confidence"], r[col]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
        ax.set_xlabel(xlabel)
        ax.set_title(title, fontsize=10)
        ax.set_xlim(-0.5, 10.5)
        ax.legend(fontsize=8, frameon=False)
    axes[0].set_ylabel("rate")
    axes[0].set_ylim(-0.02, 1.05)
    return fig


def plot_uncertainty_histograms(rows: pd.DataFrame):
    """Next-token entropy and prompt perplexity, answerable against unanswerable."""
    fig = new_figure(9, 3.2)
    axes = fig.subplots(1, 2)
    for ax, col, log in ((axes[0], "entropy", False), (axes[1], "perplexity", True)):
        vals = rows[col].replace([np.inf, -np.inf], np.nan).dropna()
        data = np.log10(vals) if log else vals
        bins = np.linspace(data.min(), data.max(), 25) if len(data) else 10
        for part, colour in (("answerable", "#4c72b0"), ("unanswerable", "#dd8452")):
            v = rows.loc[rows["partition"] == part, col].replace([np.inf, -np.inf], np.nan).dropna()
            ax.hist(np.log10(v) if log else v, bins=bins, alpha=0.6, label=part, color=colour)
        ax.set_xlabel("log10 prompt perplexity" if log else "next-token entropy (nats)")
        ax.set_ylabel("questions")
        ax.legend(fontsize=8, frameon=False)
    return fig
