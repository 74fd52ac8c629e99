"""SELECT figures: one function per figure, a consistent colour per technique.

Figures are plain matplotlib ``Figure`` objects (no pyplot state), drawn at one column's width
with 8 pt text (:mod:`workbench.plots.style`; ``plot_against_release`` takes a page). Every bar
is labelled with its value, so a zero is a visible "0.00", not a missing bar (the dot plots,
whose numbers are in the table the notebook shows beside them, are not); captions say how many
targets and questions a number rests on and how its interval was computed; data that cannot make
a meaningful figure gives a :class:`~workbench.plots.save.NoFigure` with the reason.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.plots.save import (
    FIGURE_WIDTHS,
    FONT_SIZE,
    TECHNIQUE_ORDER,
    NoFigure,
    fit_lines,
    new_figure,
    technique_palette,
)
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

METRICS = ("abstention", "generalization", "specificity")
COLUMN = FIGURE_WIDTHS["column"]
#: Atomic concepts and compositions in :func:`plot_atomic_vs_compositions`: (colour, marker).
KIND_STYLE = {"atomic": ("#222222", "o"), "composition": ("#d55e00", "D")}


def _order(techniques) -> list[str]:
    present = list(dict.fromkeys(techniques))
    return [t for t in TECHNIQUE_ORDER if t in present] + [
        t for t in present if t not in TECHNIQUE_ORDER
    ]


def _num(value) -> float:
    return float("nan") if value is None or pd.isna(value) else float(value)


@paper_figure
def plot_technique_metrics(
    table: pd.DataFrame, title: str | None = None, n_boot: int | None = None
):
    """Grouped bars: abstention, generalization, specificity (and far specificity, when
    measured) per technique, mean over targets with 95% bootstrap intervals (or SELECT's
    t-intervals), each value written beside its bar."""
    techniques = _order(table["technique"])
    pal = technique_palette()
    metrics = list(METRICS) + (
        ["far_specificity"]
        if table.get("far_specificity") is not None and table["far_specificity"].notna().any()
        else []
    )
    rows = [table[table["technique"] == t].iloc[0] for t in techniques]
    values = np.array([[_num(r[m]) for r in rows] for m in metrics])
    lo = np.array(
        [[max(0.0, _num(r[m]) - _num(r.get(f"{m}_lo", r[m]))) for r in rows] for m in metrics]
    )
    hi = np.array(
        [[max(0.0, _num(r.get(f"{m}_hi", r[m])) - _num(r[m])) for r in rows] for m in metrics]
    )
    targets = int(table["targets"].max()) if "targets" in table else None
    parts = []
    if targets:
        parts.append(f"mean over {targets} target concept{'s' if targets != 1 else ''};")
    if "interval" in table and (table["interval"] == "t").all():
        parts += ["error bars: 95% t-intervals over concepts", "(SELECT's aggregation)"]
    else:
        parts.append("error bars: 95% bootstrap intervals")
        if n_boot:
            parts.append(f"({n_boot} resamples of targets and questions)")
    groups = [m.replace("_", " ") for m in metrics]
    caption = fit_lines(parts, axes_width(COLUMN, groups), FONT_SIZE)
    caption = f"{title}\n{caption}" if title else caption
    fig = new_figure(
        "column",
        figure_height(
            hbar_axes_height(len(metrics), len(techniques)),
            caption.count("\n") + 1,
            techniques,
        ),
    )
    ax = fig.subplots()
    bars = grouped_hbars(
        ax,
        groups,
        techniques,
        values.reshape(len(metrics), len(techniques)),
        [pal.get(t) for t in techniques],
        lo.reshape(values.shape),
        hi.reshape(values.shape),
    )
    ax.set_xlabel("rate")
    ax.set_title(caption, fontsize=FONT_SIZE)
    legend_below(fig, bars)
    return fig


@paper_figure
def plot_by_level(levels: pd.DataFrame):
    """Each metric (one panel each, on one scale) at each taxonomy level of the target, one
    marker per technique (levels are categories: no lines through them), with the range over
    that level's targets and ``n`` targets per level."""
    if levels["target_level"].nunique() < 2:
        return NoFigure("all targets sit at one taxonomy level")
    pal = technique_palette()
    techniques = _order(levels["technique"])
    lvls = sorted(levels["target_level"].unique())
    fig = new_figure("column", figure_height(3 * 1.0, 0, techniques))
    axes = panel_grid(fig, len(METRICS), 1)
    step = 0.7 / max(1, len(techniques))
    counts = levels.groupby("target_level")["n_targets"].max() if "n_targets" in levels else None
    handles = []
    for ax, metric in zip(axes, METRICS):
        for i, tech in enumerate(techniques):
            f = levels[levels["technique"] == tech].set_index("target_level")
            xs = [lvls.index(lv) + (i - (len(techniques) - 1) / 2) * step for lv in f.index]
            lo = (f[metric] - f[f"{metric}_min"]).clip(lower=0) if f"{metric}_min" in f else None
            hi = (f[f"{metric}_max"] - f[metric]).clip(lower=0) if f"{metric}_max" in f else None
            bars = ax.errorbar(
                xs,
                f[metric],
                yerr=None if lo is None else [lo, hi],
                fmt="o",
                ms=3.5,
                capsize=1.5,
                lw=0.8,
                color=pal.get(tech),
                label=tech,
            )
            if ax is axes[0]:
                handles.append(bars)
        ax.set_title(metric, pad=2)
        ax.set_xticks(
            range(len(lvls)),
            [f"{lv} (n={int(counts[lv])})" if counts is not None else str(lv) for lv in lvls],
        )
    axes[-1].set_xlabel("target level (n: targets at that level)")
    axes[0].set_ylim(-0.02, 1.05)
    fig.supylabel("rate (mean over targets; bars: min to max)", fontsize=FONT_SIZE)
    legend_below(fig, handles, techniques)
    return fig


@paper_figure
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

    fig = new_figure("column", 1.6 + 0.3 * len(order))
    ax = fig.subplots()
    values = corr.loc[order, order]
    sns.heatmap(
        values,
        vmin=-1,
        vmax=1,
        cmap="vlag",
        # two decimals without the leading zero (-.83): a cell a column's width can hold
        annot=values.map(lambda v: "" if pd.isna(v) else f"{v:.2f}".replace("0.", ".", 1)),
        fmt="",
        square=True,
        cbar_kws={"label": "Spearman ρ", "orientation": "horizontal", "shrink": 0.6},
        ax=ax,
        annot_kws={"fontsize": FONT_SIZE},
    )
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    ax.set_title(
        f"universality: {metric} across "
        + (f"{n_concepts} concepts" if n_concepts else "concepts"),
    )
    ax.set_xlabel("")
    ax.set_ylabel("")
    return fig


@paper_figure
def plot_generalization_errors(errors: pd.DataFrame):
    """Share of missed descendant questions explained by the model not knowing the IS-A
    relation, per technique (``n``: the missed questions it rests on)."""
    if errors.empty or errors["explained_share"].isna().all():
        return NoFigure(
            "no missed descendant question could be attributed (no misses, or the "
            "IS-A probe is uninformative)"
        )
    pal = technique_palette()
    techniques = _order(errors["technique"])
    rows = [errors[errors["technique"] == t].iloc[0] for t in techniques]
    groups = [f"{t} (n={int(r['misses'])})" for t, r in zip(techniques, rows)]
    width = axes_width(COLUMN, groups)
    caption = fit_lines(["generalization errors explained", "by missing IS-A knowledge"], width)
    xlabel = fit_lines(
        ["share of misses explained", "(n: missed descendant questions)"],
        width,
    )
    fig = new_figure(
        "column", figure_height(hbar_axes_height(len(techniques), 1), caption.count("\n") + 2)
    )
    ax = fig.subplots()
    grouped_hbars(
        ax,
        groups,
        ["explained"],
        np.array([[_num(r["explained_share"])] for r in rows]),
        [[pal.get(t) for t in techniques]],
        missing="none probed",
    )
    ax.set_xlabel(xlabel)
    ax.set_title(caption)
    return fig


@paper_figure
def plot_atomic_vs_compositions(table: pd.DataFrame):
    """Each metric (one panel each, on one scale) per technique for atomic concepts and
    compositions: a marker each (the mean over their targets), joined, so the gap reads at
    once. The numbers are in the table (``technique_table(..., by=(..., "target_kind", ...))``)."""
    kinds = [k for k in ("atomic", "composition") if k in set(table["target_kind"])]
    if not kinds:
        return NoFigure("no targets")
    techniques = _order(table["technique"])
    labels = []
    for kind in kinds:
        f = table[table["target_kind"] == kind]
        n = int(f["targets"].max()) if "targets" in f else None
        name = "atomic concepts" if kind == "atomic" else "compositions"
        labels.append(name + (f" (mean over {n} targets)" if n else ""))
    panel = len(techniques) * 11 / 72 + 0.2
    fig = new_figure("column", figure_height(len(METRICS) * panel, 0, labels))
    axes = panel_grid(fig, len(METRICS), 1)
    y = np.arange(len(techniques))
    handles = []
    for ax, metric in zip(axes, METRICS):
        points = []
        for kind, label in zip(kinds, labels):
            f = table[table["target_kind"] == kind].set_index("technique")
            vals = np.array([_num(f[metric].get(t)) for t in techniques])
            points.append(vals)
            colour, marker = KIND_STYLE[kind]
            (line,) = ax.plot(vals, y, ls="none", marker=marker, ms=4, color=colour, label=label)
            if ax is axes[0]:
                handles.append(line)
        if len(points) == 2:  # the gap between the two
            ax.hlines(y, np.fmin(*points), np.fmax(*points), color="0.7", lw=1, zorder=0)
        ax.set_yticks(y, techniques)
        ax.set_ylim(len(techniques) - 0.5, -0.5)
        ax.set_title(metric, pad=2)
        ax.grid(axis="x", color="0.92", lw=0.6)
        ax.set_axisbelow(True)
    axes[0].set_xlim(-0.02, 1.02)
    axes[-1].set_xlabel("rate (mean over targets)")
    legend_below(fig, handles, labels)
    return fig


@paper_figure
def plot_confidence_histograms(scores: pd.DataFrame):
    """Histogram of the refusal confidence c(x) per technique (seed 001's view), one panel per
    technique, all on one scale."""
    pal = technique_palette()
    techniques = _order(scores["technique"])
    counts = {
        t: int(scores.loc[scores["technique"] == t, "confidence"].notna().sum()) for t in techniques
    }
    titles = [f"{t}\nn={counts[t]} prompts" for t in techniques]
    cols = panel_columns(titles, COLUMN)
    rows = -(-len(techniques) // cols)
    fig = new_figure("column", figure_height(rows * 1.05, 0, techniques))
    axes = panel_grid(fig, len(techniques), cols)
    handles = []
    for ax, tech, title in zip(axes, techniques, titles):
        vals = scores.loc[scores["technique"] == tech, "confidence"].dropna()
        _, _, bars = ax.hist(vals, bins=np.linspace(-1, 1, 11), color=pal.get(tech), label=tech)
        handles.append(bars)
        ax.set_title(title, pad=2)
    for i, ax in enumerate(axes):
        if i % cols == 0:
            ax.set_ylabel("prompts")
        if i + cols >= len(axes):
            ax.set_xlabel("c(x)")
    count_axis(axes[0].yaxis)
    axes[0].set_xlim(-1, 1)
    legend_below(fig, handles, techniques)
    return fig


@paper_figure
def plot_compliance(shares: pd.DataFrame):
    """Stacked bars: % compliance / ambiguous / rejection / unscored of prompts per technique."""
    techniques = _order(shares["technique"])
    cols = ["compliance", "ambiguous", "rejection", "unscored"]
    colours = ["#4c9f70", "#c9c9c9", "#c0504d", "#eeeeee"]
    n = [
        int(shares.loc[shares["technique"] == t, "prompts"].iloc[0])
        if "prompts" in shares
        else None
        for t in techniques
    ]
    fig = new_figure("column", figure_height(len(techniques) * 16 / 72 + 0.15, 0, cols))
    ax = fig.subplots()
    y = np.arange(len(techniques))
    left = np.zeros(len(techniques))
    handles = []
    for col, colour in zip(cols, colours):
        vals = np.array(
            [
                shares.loc[shares["technique"] == t, col].iloc[0] if col in shares else 0
                for t in techniques
            ]
        )
        handles.append(
            ax.barh(y, vals, left=left, label=col, color=colour, edgecolor="white", linewidth=0.4)
        )
        left += vals
    ax.set_yticks(
        y,
        [f"{t} (n={k})" for t, k in zip(techniques, n)]
        if all(v is not None for v in n)
        else techniques,
    )
    ax.set_ylim(len(techniques) - 0.5, -0.5)
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel("% of prompts (n: prompts)")
    ax.set_xlim(0, 100)
    legend_below(fig, handles, cols)
    return fig


@paper_figure
def plot_against_release(table: pd.DataFrame, concepts: str = "same"):
    """One panel per SELECT metric (on one scale): per technique, a marker for each model with
    its 95% t-interval over concepts: the run's first (larger, outlined), then SELECT's released
    models. ``table`` is :func:`workbench.tables.select_compare.side_by_side`'s (the numbers are in
    it); ``concepts`` picks the released rows over the run's own targets (``same``) or every
    released concept (``all``). Many numbers side by side: drawn for a page's width
    (``width="page"``)."""
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
    page = FIGURE_WIDTHS["page"]
    n_run = int(run["n_concepts"].max())
    n_rel = int(rel["n_concepts"].max())
    caption = fit_lines(
        [
            f"this run ({n_run} concept{'s' if n_run != 1 else ''}) beside SELECT's released "
            f"models ({'the same' if concepts == 'same' else 'all their'} {n_rel} concepts);",
            "SELECT's aggregation, 95% t-intervals (drawn within [0, 1])",
        ],
        page - 0.1,
        FONT_SIZE,
    )
    labels = [m + (" (this run)" if m in run_models else "") for m in models]
    pitch = 6.5 / 72  # inches per model within a technique
    axes_in = len(techniques) * max(len(models) * pitch / 0.8, 0.25) + 0.15
    fig = new_figure("page", figure_height(axes_in, caption.count("\n") + 1, labels, inches=page))
    axes = np.atleast_1d(fig.subplots(1, len(metrics), sharex=True, sharey=True))
    cmap = __import__("matplotlib").colormaps["tab10"]
    colors = {m: cmap(i % 10) for i, m in enumerate(models)}
    step = 0.8 / len(models)
    y = np.arange(len(techniques))
    handles = []
    for ax, metric in zip(axes, metrics):
        for i, model in enumerate(models):
            f = data[(data["model"] == model) & (data["metric"] == metric)].set_index("technique")
            vals = np.array([f["mean"].get(t, np.nan) for t in techniques], dtype=float)
            errs = np.array([f["ci"].get(t, np.nan) for t in techniques], dtype=float)
            errs = np.nan_to_num(errs)
            # a rate's interval drawn within [0, 1] (few concepts make t-intervals very wide)
            lo = np.where(np.isnan(vals), 0.0, np.minimum(errs, np.nan_to_num(vals)))
            hi = np.where(np.isnan(vals), 0.0, np.minimum(errs, 1 - np.nan_to_num(vals)))
            mine = model in run_models
            marks = ax.errorbar(
                vals,
                y + (i - (len(models) - 1) / 2) * step,
                xerr=[lo, hi],
                fmt="D" if mine else "o",
                ms=4.5 if mine else 3.5,
                mec="black" if mine else colors[model],
                mew=0.6,
                capsize=1,
                elinewidth=0.7,
                color=colors[model],
                label=labels[i],
            )
            if ax is axes[0]:
                handles.append(marks)
        ax.set_title(metric, pad=2)
        ax.grid(axis="x", color="0.92", lw=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel("rate")
    axes[0].set_yticks(y, techniques)
    axes[0].set_ylim(len(techniques) - 0.5, -0.5)
    axes[0].set_xlim(-0.02, 1.02)
    fig.suptitle(caption, fontsize=FONT_SIZE)
    legend_below(fig, handles, labels)
    return fig
