"""SELECT figures: one function per figure, a consistent colour per technique."""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.plots.save import TECHNIQUE_ORDER, technique_palette

METRICS = ("abstention", "generalization", "specificity")


def _order(techniques) -> list[str]:
    present = list(dict.fromkeys(techniques))
    return [t for t in TECHNIQUE_ORDER if t in present] + [t for t in present if t not in TECHNIQUE_ORDER]


def plot_technique_metrics(table: pd.DataFrame, title: str | None = None):
    """Grouped bars: abstention, generalization, specificity per technique, 95% bootstrap CIs."""
    import matplotlib.pyplot as plt

    techniques = _order(table["technique"])
    pal = technique_palette()
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    width = 0.8 / len(techniques)
    x = np.arange(len(METRICS))
    for i, tech in enumerate(techniques):
        row = table[table["technique"] == tech].iloc[0]
        vals = [row[m] for m in METRICS]
        lo = [row[m] - row.get(f"{m}_lo", row[m]) for m in METRICS]
        hi = [row.get(f"{m}_hi", row[m]) - row[m] for m in METRICS]
        ax.bar(x + (i - (len(techniques) - 1) / 2) * width, vals, width, yerr=[lo, hi], capsize=2,
               label=tech, color=pal.get(tech), error_kw={"lw": 0.8})
    ax.set_xticks(x, METRICS)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("rate")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def plot_by_level(levels: pd.DataFrame):
    """Each metric against the target's taxonomy level, one line per technique."""
    import matplotlib.pyplot as plt

    pal = technique_palette()
    fig, axes = plt.subplots(1, 3, figsize=(10, 3), sharey=True)
    for ax, metric in zip(axes, METRICS):
        for tech in _order(levels["technique"]):
            f = levels[levels["technique"] == tech].sort_values("target_level")
            ax.plot(f["target_level"], f[metric], marker="o", label=tech, color=pal.get(tech))
        ax.set_title(metric, fontsize=10)
        ax.set_xlabel("target level")
        ax.set_xticks(sorted(levels["target_level"].unique()))
    axes[0].set_ylabel("rate")
    axes[0].set_ylim(-0.02, 1.02)
    axes[-1].legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def plot_universality(corr: pd.DataFrame, metric: str = "abstention"):
    """Heatmap of Spearman correlations of a per-concept metric between techniques."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    order = _order(corr.index)
    fig, ax = plt.subplots(figsize=(4.8, 4))
    sns.heatmap(corr.loc[order, order], vmin=-1, vmax=1, cmap="vlag", annot=True, fmt=".2f",
                square=True, cbar_kws={"label": "Spearman ρ"}, ax=ax, annot_kws={"fontsize": 8})
    ax.set_title(f"universality: {metric} across concepts", fontsize=10)
    ax.set_xlabel("")
    ax.set_ylabel("")
    return fig


def plot_generalization_errors(errors: pd.DataFrame):
    """Share of missed descendant questions explained by the model not knowing the IS-A relation."""
    import matplotlib.pyplot as plt

    pal = technique_palette()
    techniques = _order(errors["technique"])
    fig, ax = plt.subplots(figsize=(6, 3))
    vals = [errors.loc[errors["technique"] == t, "explained_share"].iloc[0] for t in techniques]
    ax.bar(techniques, vals, color=[pal.get(t) for t in techniques])
    for i, t in enumerate(techniques):
        n = errors.loc[errors["technique"] == t, "misses"].iloc[0]
        ax.annotate(f"n={n}", (i, 0.02 if np.isnan(vals[i]) else vals[i] + 0.02), ha="center", fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("share of misses explained")
    ax.set_title("generalization errors explained by missing IS-A knowledge", fontsize=10)
    ax.tick_params(axis="x", rotation=20)
    return fig


def plot_atomic_vs_compositions(table: pd.DataFrame):
    """Metrics per technique for atomic concepts and compositions side by side."""
    import matplotlib.pyplot as plt

    pal = technique_palette()
    kinds = [k for k in ("atomic", "composition") if k in set(table["target_kind"])]
    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 3.2), sharey=True, squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        f = table[table["target_kind"] == kind]
        techniques = _order(f["technique"])
        width = 0.8 / max(1, len(techniques))
        x = np.arange(len(METRICS))
        for i, tech in enumerate(techniques):
            row = f[f["technique"] == tech].iloc[0]
            ax.bar(x + (i - (len(techniques) - 1) / 2) * width, [row[m] for m in METRICS], width,
                   color=pal.get(tech), label=tech)
        ax.set_xticks(x, METRICS)
        ax.set_title(kind + ("s" if kind == "composition" else " concepts"), fontsize=10)
    axes[0][0].set_ylabel("rate")
    axes[0][0].set_ylim(0, 1.05)
    axes[0][-1].legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def plot_confidence_histograms(scores: pd.DataFrame):
    """Histogram of the refusal confidence c(x) per technique (seed 001's view)."""
    import matplotlib.pyplot as plt

    pal = technique_palette()
    techniques = _order(scores["technique"])
    fig, axes = plt.subplots(1, len(techniques), figsize=(2.6 * len(techniques), 2.6), sharey=True, squeeze=False)
    for ax, tech in zip(axes[0], techniques):
        vals = scores.loc[scores["technique"] == tech, "confidence"].dropna()
        ax.hist(vals, bins=np.linspace(-1, 1, 11), color=pal.get(tech))
        ax.set_title(tech, fontsize=9)
        ax.set_xlabel("c(x)")
    axes[0][0].set_ylabel("prompts")
    return fig


def plot_compliance(shares: pd.DataFrame):
    """Stacked bars: % compliance / ambiguous / rejection / unscored per technique."""
    import matplotlib.pyplot as plt

    techniques = _order(shares["technique"])
    cols = ["compliance", "ambiguous", "rejection", "unscored"]
    colours = ["#4c9f70", "#c9c9c9", "#c0504d", "#eeeeee"]
    fig, ax = plt.subplots(figsize=(6.5, 3))
    bottom = np.zeros(len(techniques))
    for col, colour in zip(cols, colours):
        vals = np.array([shares.loc[shares["technique"] == t, col].iloc[0] if col in shares else 0 for t in techniques])
        ax.bar(techniques, vals, bottom=bottom, label=col, color=colour)
        bottom += vals
    ax.set_ylabel("% of prompts")
    ax.set_ylim(0, 100)
    ax.tick_params(axis="x", rotation=20)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig
