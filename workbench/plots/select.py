"""SELECT figures: one function per figure, a consistent colour per technique.

Figures are plain matplotlib ``Figure`` objects (no pyplot state). Every bar is labelled with its
value, so a zero is a visible "0.00", not a missing bar; captions say how many targets and
questions a number rests on and how its interval was computed; data that cannot make a
meaningful figure gives a :class:`~workbench.plots.save.NoFigure` with the reason.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.plots.save import (
    TECHNIQUE_ORDER,
    NoFigure,
    new_figure,
    technique_palette,
)

METRICS = ("abstention", "generalization", "specificity")


def _order(techniques) -> list[str]:
    present = list(dict.fromkeys(techniques))
    return [t for t in TECHNIQUE_ORDER if t in present] + [
        t for t in present if t not in TECHNIQUE_ORDER
    ]


def _bar_labels(ax, bars, values, tops=None) -> None:
    """The value above each bar (above its error bar when ``tops`` gives the upper ends); a zero
    gets a tick on the axis so it reads as measured."""
    tops = tops if tops is not None else values
    for bar, v, top in zip(bars, values, tops):
        if v is None or np.isnan(v):
            continue
        x = bar.get_x() + bar.get_width() / 2
        y = v if top is None or np.isnan(top) else max(v, top)
        ax.annotate(
            f"{v:.2f}",
            (x, y),
            xytext=(0, 2),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=5.5,
            rotation=90,
        )
        if v == 0:
            ax.plot(
                [bar.get_x(), bar.get_x() + bar.get_width()],
                [0.004, 0.004],
                lw=2,
                color=bar.get_facecolor(),
                solid_capstyle="butt",
            )


def plot_technique_metrics(
    table: pd.DataFrame, title: str | None = None, n_boot: int | None = None
):
    """Grouped bars: abstention, generalization, specificity (and far specificity, when
    measured) per technique, mean over targets with 95% bootstrap intervals."""
    techniques = _order(table["technique"])
    pal = technique_palette()
    metrics = list(METRICS) + (
        ["far_specificity"]
        if table.get("far_specificity") is not None and table["far_specificity"].notna().any()
        else []
    )
    fig = new_figure(8, 3.6)
    ax = fig.subplots()
    width = 0.8 / len(techniques)
    x = np.arange(len(metrics))
    for i, tech in enumerate(techniques):
        row = table[table["technique"] == tech].iloc[0]
        vals = [row[m] for m in metrics]
        lo = [max(0.0, row[m] - row.get(f"{m}_lo", row[m])) for m in metrics]
        hi = [max(0.0, row.get(f"{m}_hi", row[m]) - row[m]) for m in metrics]
        bars = ax.bar(
            x + (i - (len(techniques) - 1) / 2) * width,
            vals,
            width,
            yerr=[lo, hi],
            capsize=2,
            label=tech,
            color=pal.get(tech),
            error_kw={"lw": 0.8},
        )
        _bar_labels(ax, bars, vals, [v + h for v, h in zip(vals, hi)])
    ax.set_xticks(x, [m.replace("_", " ") for m in metrics])
    ax.set_ylim(0, 1.2)
    ax.set_ylabel("rate")
    targets = int(table["targets"].max()) if "targets" in table else None
    caption = (
        f"mean over {targets} target concept{'s' if targets != 1 else ''}; " if targets else ""
    )
    if "interval" in table and (table["interval"] == "t").all():
        caption += "error bars: 95% t-intervals over concepts (SELECT's aggregation)"
    else:
        caption += "error bars: 95% bootstrap intervals" + (
            f" ({n_boot} resamples of targets and questions)" if n_boot else ""
        )
    ax.set_title((f"{title}\n" if title else "") + caption, fontsize=8)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def plot_by_level(levels: pd.DataFrame):
    """Each metric at each taxonomy level of the target, one marker per technique (levels are
    categories: no lines through them), with the range over that level's targets and ``n``."""
    if levels["target_level"].nunique() < 2:
        return NoFigure("all targets sit at one taxonomy level")
    pal = technique_palette()
    techniques = _order(levels["technique"])
    fig = new_figure(10.5, 3.2)
    axes = fig.subplots(1, 3, sharey=True)
    lvls = sorted(levels["target_level"].unique())
    step = 0.7 / max(1, len(techniques))
    for ax, metric in zip(axes, METRICS):
        for i, tech in enumerate(techniques):
            f = levels[levels["technique"] == tech].set_index("target_level")
            xs = [lvls.index(lv) + (i - (len(techniques) - 1) / 2) * step for lv in f.index]
            lo = (f[metric] - f[f"{metric}_min"]).clip(lower=0) if f"{metric}_min" in f else None
            hi = (f[f"{metric}_max"] - f[metric]).clip(lower=0) if f"{metric}_max" in f else None
            ax.errorbar(
                xs,
                f[metric],
                yerr=None if lo is None else [lo, hi],
                fmt="o",
                ms=4,
                capsize=2,
                lw=0.8,
                color=pal.get(tech),
                label=tech,
            )
        ax.set_title(metric, fontsize=10)
        ax.set_xlabel("target level")
        counts = (
            levels.groupby("target_level")["n_targets"].max() if "n_targets" in levels else None
        )
        ax.set_xticks(
            range(len(lvls)),
            [f"{lv}\n(n={int(counts[lv])})" if counts is not None else str(lv) for lv in lvls],
            fontsize=8,
        )
    axes[0].set_ylabel("rate (mean over targets; bars: min-max)")
    axes[0].set_ylim(-0.02, 1.05)
    axes[-1].legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def plot_universality(
    corr: pd.DataFrame, metric: str = "abstention", n_concepts: int | None = None
):
    """Heatmap of Spearman correlations of a per-concept metric between techniques."""
    order = [t for t in _order(corr.index) if corr.loc[t].notna().sum() > 1]
    if len(order) < 2:
        return NoFigure("fewer than two techniques vary across concepts (Spearman is undefined)")
    if n_concepts is not None and n_concepts < 3:
        return NoFigure(f"only {n_concepts} target concepts: a rank correlation needs at least 3")
    import seaborn as sns

    fig = new_figure(5, 4.2)
    ax = fig.subplots()
    sns.heatmap(
        corr.loc[order, order],
        vmin=-1,
        vmax=1,
        cmap="vlag",
        annot=True,
        fmt=".2f",
        square=True,
        cbar_kws={"label": "Spearman ρ"},
        ax=ax,
        annot_kws={"fontsize": 8},
    )
    ax.set_title(
        f"universality: {metric} across "
        + (f"{n_concepts} concepts" if n_concepts else "concepts"),
        fontsize=10,
    )
    ax.set_xlabel("")
    ax.set_ylabel("")
    return fig


def plot_generalization_errors(errors: pd.DataFrame):
    """Share of missed descendant questions explained by the model not knowing the IS-A relation."""
    if errors.empty or errors["explained_share"].isna().all():
        return NoFigure(
            "no missed descendant question could be attributed (no misses, or the "
            "IS-A probe is uninformative)"
        )
    pal = technique_palette()
    techniques = _order(errors["technique"])
    fig = new_figure(6, 3)
    ax = fig.subplots()
    vals = [errors.loc[errors["technique"] == t, "explained_share"].iloc[0] for t in techniques]
    bars = ax.bar(
        techniques, [0 if np.isnan(v) else v for v in vals], color=[pal.get(t) for t in techniques]
    )
    _bar_labels(ax, bars, vals)
    for i, t in enumerate(techniques):
        n = errors.loc[errors["technique"] == t, "misses"].iloc[0]
        ax.annotate(
            f"n={n}" + (" (none probed)" if np.isnan(vals[i]) else ""),
            (i, -0.08),
            ha="center",
            fontsize=7,
            annotation_clip=False,
        )
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("share of misses explained")
    ax.set_title(
        "generalization errors explained by missing IS-A knowledge\n"
        "(n: missed descendant questions)",
        fontsize=9,
    )
    ax.tick_params(axis="x", rotation=20, pad=12)
    return fig


def plot_atomic_vs_compositions(table: pd.DataFrame):
    """Metrics per technique for atomic concepts and compositions side by side."""
    pal = technique_palette()
    kinds = [k for k in ("atomic", "composition") if k in set(table["target_kind"])]
    if not kinds:
        return NoFigure("no targets")
    fig = new_figure(5 * len(kinds), 3.4)
    axes = fig.subplots(1, len(kinds), sharey=True, squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        f = table[table["target_kind"] == kind]
        techniques = _order(f["technique"])
        width = 0.8 / max(1, len(techniques))
        x = np.arange(len(METRICS))
        for i, tech in enumerate(techniques):
            row = f[f["technique"] == tech].iloc[0]
            vals = [row[m] for m in METRICS]
            bars = ax.bar(
                x + (i - (len(techniques) - 1) / 2) * width,
                vals,
                width,
                color=pal.get(tech),
                label=tech,
            )
            _bar_labels(ax, bars, vals)
        n = int(f["targets"].max()) if "targets" in f else None
        ax.set_xticks(x, METRICS)
        ax.set_title(
            kind
            + ("s" if kind == "composition" else " concepts")
            + (f" (mean over {n} targets)" if n else ""),
            fontsize=9,
        )
    axes[0][0].set_ylabel("rate")
    axes[0][0].set_ylim(0, 1.15)
    axes[0][-1].legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def plot_confidence_histograms(scores: pd.DataFrame):
    """Histogram of the refusal confidence c(x) per technique (seed 001's view)."""
    pal = technique_palette()
    techniques = _order(scores["technique"])
    fig = new_figure(2.6 * len(techniques), 2.8)
    axes = fig.subplots(1, len(techniques), sharey=True, squeeze=False)
    for ax, tech in zip(axes[0], techniques):
        vals = scores.loc[scores["technique"] == tech, "confidence"].dropna()
        ax.hist(vals, bins=np.linspace(-1, 1, 11), color=pal.get(tech))
        ax.set_title(f"{tech} (n={len(vals)} prompts)", fontsize=8)
        ax.set_xlabel("c(x)")
    axes[0][0].set_ylabel("prompts")
    return fig


def plot_compliance(shares: pd.DataFrame):
    """Stacked bars: % compliance / ambiguous / rejection / unscored per technique."""
    techniques = _order(shares["technique"])
    cols = ["compliance", "ambiguous", "rejection", "unscored"]
    colours = ["#4c9f70", "#c9c9c9", "#c0504d", "#eeeeee"]
    fig = new_figure(6.8, 3.1)
    ax = fig.subplots()
    bottom = np.zeros(len(techniques))
    for col, colour in zip(cols, colours):
        vals = np.array(
            [
                shares.loc[shares["technique"] == t, col].iloc[0] if col in shares else 0
                for t in techniques
            ]
        )
        ax.bar(techniques, vals, bottom=bottom, label=col, color=colour)
        bottom += vals
    n = [
        int(shares.loc[shares["technique"] == t, "prompts"].iloc[0])
        if "prompts" in shares
        else None
        for t in techniques
    ]
    if all(v is not None for v in n):
        ax.set_xticks(range(len(techniques)), [f"{t}\n(n={k})" for t, k in zip(techniques, n)])
    ax.set_ylabel("% of prompts")
    ax.set_ylim(0, 100)
    ax.tick_params(axis="x", rotation=20)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def plot_against_release(table: pd.DataFrame, concepts: str = "same"):
    """One panel per SELECT metric: per technique, a bar for each model: the run's first
    (hatched), then SELECT's released models; 95% t-intervals over concepts. ``table`` is
    :func:`workbench.select.compare.side_by_side`'s; ``concepts`` picks the released rows over
    the run's own targets (``same``) or every released concept (``all``)."""
    run = table[table["source"] == "run"]
    rel = table[(table["source"] == "release") & (table["concepts"] == concepts)]
    if run.empty:
        return NoFigure("the run has no rows to compare")
    if rel.empty:
        return NoFigure(f"the release has no rows for these techniques and {concepts} concepts")
    data = pd.concat([run, rel], ignore_index=True)
    models = list(dict.fromkeys(data["model"]))
    run_models = set(run["model"])
    techniques = _order(t for t in data["technique"] if t in set(run["technique"]))
    metrics = [m for m in METRICS if m in set(data["metric"])]
    fig = new_figure(3.6 * len(metrics) + 1.6, 3.4)
    axes = np.atleast_1d(fig.subplots(1, len(metrics), sharey=True))
    cmap = __import__("matplotlib").colormaps["tab10"]
    colors = {m: cmap(i % 10) for i, m in enumerate(models)}
    width = 0.8 / len(models)
    x = np.arange(len(techniques))
    for ax, metric in zip(axes, metrics):
        for i, model in enumerate(models):
            f = data[(data["model"] == model) & (data["metric"] == metric)].set_index("technique")
            vals = [f["mean"].get(t, np.nan) for t in techniques]
            errs = [0.0 if np.isnan(f["ci"].get(t, np.nan)) else f["ci"].get(t) for t in techniques]
            # a rate's interval drawn within [0, 1] (few concepts make t-intervals very wide)
            lo = [min(e, v) if not np.isnan(v) else 0.0 for v, e in zip(vals, errs)]
            hi = [min(e, 1 - v) if not np.isnan(v) else 0.0 for v, e in zip(vals, errs)]
            bars = ax.bar(
                x + (i - (len(models) - 1) / 2) * width,
                vals,
                width,
                yerr=[lo, hi],
                capsize=1.5,
                color=colors[model],
                error_kw={"lw": 0.6},
                hatch="//" if model in run_models else None,
                edgecolor="black" if model in run_models else None,
                linewidth=0.4,
                label=model + (" (this run)" if model in run_models else ""),
            )
            _bar_labels(ax, bars, vals, [v + h for v, h in zip(vals, hi)])
        ax.set_xticks(x, techniques, rotation=30, ha="right", fontsize=8)
        ax.set_title(metric, fontsize=9, pad=2)
        ax.set_ylim(0, 1.3)
    axes[0].set_ylabel("rate")
    n_run = int(run["n_concepts"].max())
    n_rel = int(rel["n_concepts"].max())
    fig.suptitle(
        f"this run ({n_run} concept{'s' if n_run != 1 else ''}) beside SELECT's released "
        f"models ({'the same' if concepts == 'same' else 'all their'} {n_rel} concepts); "
        "SELECT's aggregation, 95% t-intervals (drawn within [0, 1])",
        fontsize=8,
    )
    axes[-1].legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig
