"""Summary tables as LaTeX for papers: booktabs rules, intervals as ``mean ± half-width``, the
best value of each column in bold, a caption naming the model, n and the interval method.

One writer (:func:`latex_table`) and one function per summary table of the workbench, each
taking that table exactly as its function returns it:

=============================  =========================================================
:func:`select_latex`           :func:`workbench.scoring.metrics.select_table` (SELECT's
                               aggregation: Student-t over concepts)
:func:`technique_latex`        :func:`~workbench.scoring.metrics.technique_table` or
                               :func:`workbench.tables.select_compare.technique_summary`
                               (``<metric>_lo`` / ``_hi`` bounds)
:func:`side_by_side_latex`     :func:`workbench.tables.select_compare.side_by_side`
:func:`unknown_latex`          :func:`workbench.unknown.summarize_unknown`
:func:`editing_latex`          :func:`workbench.editing.edit_metrics`
:func:`concepts_latex`         :func:`workbench.experiments.report.summary_table` (per
                               concept: point rates, no interval)
=============================  =========================================================

:func:`to_latex` picks the right one from the table's columns. The output needs
``\\usepackage{booktabs}`` in the paper's preamble.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}

#: Direction of "best" per column of the workbench's tables (higher is better unless listed).
LOWER_IS_BETTER = {"mean_perplexity", "mean_entropy", "unparsed_confidence"}


def escape(text) -> str:
    """``text`` with LaTeX's special characters escaped."""
    return "".join(_SPECIAL.get(c, c) for c in str(text))


def _num(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x)) and not pd.isna(x)


def _fmt(value, ci, digits: int, percent: bool) -> str:
    if not _num(value):
        return "--"
    scale = 100 if percent else 1
    text = f"{value * scale:.{digits}f}"
    if _num(ci):
        text += rf" $\pm$ {ci * scale:.{digits}f}"
    return text


def latex_table(
    frame: pd.DataFrame,
    labels: Sequence[str],
    values: Sequence[str],
    *,
    ci: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    best: Callable[[str, pd.DataFrame], str | None] | str | None = "max",
    within: Sequence[str] = (),
    caption: str = "",
    label: str | None = None,
    digits: int = 2,
    percent: bool = False,
) -> str:
    """A booktabs ``table`` of ``frame``: ``labels`` columns as text, ``values`` as numbers
    with ``ci[value]`` (a half-width column) after ``$\\pm$``.

    ``best``: "max", "min", None, or ``best(column, group) -> "max" | "min" | None``; the best
    value of each column (within each group of ``within``, e.g. per model) is set in bold, ties
    all bold; none where the group has a single row. ``percent`` prints values x100."""
    ci = ci or {}
    headers = headers or {}
    frame = frame.reset_index(drop=True)
    bold = pd.DataFrame(False, index=frame.index, columns=list(values))
    groups = frame.groupby(list(within), sort=False, dropna=False) if within else [((), frame)]
    for _, g in groups:
        if len(g) < 2:
            continue
        for col in values:
            rule = best(col, g) if callable(best) else best
            vals = pd.to_numeric(g[col], errors="coerce")
            if rule not in ("max", "min") or vals.notna().sum() < 2:
                continue
            target = vals.max() if rule == "max" else vals.min()
            bold.loc[g.index[(vals.round(12) == round(target, 12)).to_numpy()], col] = True
    spec = "l" * len(labels) + "r" * len(values)
    head = " & ".join(escape(headers.get(c, c.replace("_", " "))) for c in [*labels, *values])
    lines = [r"\begin{table}[t]", r"\centering", rf"\caption{{{caption}}}"]
    if label:
        lines.append(rf"\label{{{label}}}")
    lines += [rf"\begin{{tabular}}{{{spec}}}", r"\toprule", head + r" \\", r"\midrule"]
    previous = None
    for i, row in frame.iterrows():
        key = tuple(row[c] for c in within)
        if previous is not None and within and key != previous:
            lines.append(r"\midrule")
        previous = key
        cells = [escape(row[c]) for c in labels]
        for col in values:
            text = _fmt(row[col], row[ci[col]] if col in ci else None, digits, percent)
            cells.append(rf"\textbf{{{text}}}" if bold.loc[i, col] else text)
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def caption_text(what: str, model, n: str, interval: str) -> str:
    """ "<what>. Model: <model>; n = <n>; <interval>." with LaTeX escaped."""
    models = [
        str(m)
        for m in (model if isinstance(model, (list, tuple, set, pd.Series)) else [model])
        if _num(m) and str(m)
    ]
    models = list(dict.fromkeys(models))
    text = (
        f"{escape(what)}. Model{'s' if len(models) > 1 else ''}: "
        f"{escape(', '.join(models) or 'not named')}; $n$ = {escape(n)}; {escape(interval)}."
    )
    return text.replace("±", r"$\pm$")


def _n_range(values) -> str:
    vals = sorted({int(v) for v in values if _num(v)})
    if not vals:
        return "?"
    return f"{vals[0]:,}" if len(vals) == 1 else f"{vals[0]:,}-{vals[-1]:,}"


def _model(table: pd.DataFrame, model: str | None):
    if model is not None:
        return model
    return list(table["model"].unique()) if "model" in table else None


def _mean_ci_wide(table: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """Tidy (``keys``, metric, mean, ci) rows as one row per ``keys``: a ``<metric>`` and a
    ``<metric>_ci`` column per metric (in the rows' order), and those metrics."""
    wide = table.pivot_table(
        index=keys, columns="metric", values=["mean", "ci"], aggfunc="first", sort=False
    )
    metrics = list(dict.fromkeys(table["metric"]))
    flat = pd.DataFrame({c: wide.index.get_level_values(c) for c in keys})
    for m in metrics:
        flat[m] = wide[("mean", m)].to_numpy()
        flat[f"{m}_ci"] = wide[("ci", m)].to_numpy()
    return flat, metrics


# -- the workbench's summary tables ---------------------------------------------------------------
def select_latex(
    table: pd.DataFrame,
    *,
    model: str | None = None,
    caption: str | None = None,
    label: str | None = None,
    percent: bool = True,
    digits: int = 1,
    confidence: float = 0.95,
) -> str:
    """:func:`~workbench.scoring.metrics.select_table`'s tidy rows: one row per (target kind,
    model,) technique, one column per metric, "mean ± t half-width"; the best technique per
    column and model in bold."""
    by = [c for c in table.columns if c not in ("metric", "mean", "ci", "n_concepts")]
    flat, metrics = _mean_ci_wide(table, by)
    within = [c for c in ("target_kind", "model") if c in by]
    what = (
        caption
        or "Refusal metrics per technique (SELECT's aggregation" + (", %" if percent else "") + ")"
    )
    cap = caption_text(
        what,
        _model(table, model),
        f"{_n_range(table['n_concepts'])} concepts per cell",
        f"± half-width of the {confidence:.0%} Student-t interval over concepts "
        "(per-seed rates averaged over seeds)",
    )
    return latex_table(
        flat,
        by,
        metrics,
        ci={m: f"{m}_ci" for m in metrics},
        within=within,
        caption=cap,
        label=label,
        digits=digits,
        percent=percent,
    )


def technique_latex(
    table: pd.DataFrame,
    *,
    model: str | None = None,
    caption: str | None = None,
    label: str | None = None,
    metrics: Sequence[str] | None = None,
    percent: bool = True,
    digits: int = 1,
) -> str:
    """:func:`~workbench.scoring.metrics.technique_table` (or ``technique_summary``): one row
    per (model,) technique, "mean ± half the interval's width" per metric."""
    from workbench.scoring.metrics import METRICS

    metrics = [m for m in (metrics or METRICS) if m in table]
    labels = [c for c in ("model", "technique") if c in table]
    frame = table.copy()
    for m in metrics:
        lo, hi = frame.get(f"{m}_lo"), frame.get(f"{m}_hi")
        frame[f"{m}_ci"] = (hi - lo) / 2 if lo is not None and hi is not None else float("nan")
    method = set(frame["interval"]) if "interval" in frame else {"bootstrap"}
    interval = (
        "± half-width of the 95% Student-t interval over concepts"
        if method == {"t"}
        else "± half the width of the 95% percentile bootstrap interval (targets, then "
        "questions, resampled)"
    )
    n = _n_range(frame["targets"]) + " targets" if "targets" in frame else "?"
    cap = caption_text(
        caption or "Metrics per technique" + (" (%)" if percent else ""),
        _model(table, model),
        n,
        interval,
    )
    return latex_table(
        frame,
        labels,
        metrics,
        ci={m: f"{m}_ci" for m in metrics},
        within=["model"] if "model" in labels else (),
        caption=cap,
        label=label,
        digits=digits,
        percent=percent,
    )


def side_by_side_latex(
    table: pd.DataFrame,
    *,
    caption: str | None = None,
    label: str | None = None,
    percent: bool = True,
    digits: int = 1,
) -> str:
    """:func:`workbench.tables.select_compare.side_by_side`: the run's models beside SELECT's released
    ones, per concept set; the best per column within each concept set in bold."""
    keys = ["concepts", "source", "model", "technique"]
    flat, metrics = _mean_ci_wide(table, keys)
    cap = caption_text(
        caption or "A run beside SELECT's released models" + (" (%)" if percent else ""),
        list(table["model"].unique()),
        f"{_n_range(table['n_concepts'])} concepts per cell",
        "± half-width of the 95% Student-t interval over concepts",
    )
    return latex_table(
        flat,
        keys,
        metrics,
        ci={m: f"{m}_ci" for m in metrics},
        within=["concepts"],
        caption=cap,
        label=label,
        digits=digits,
        percent=percent,
    )


def _wald(p: pd.Series, n: pd.Series, z: float = 1.959963984540054) -> pd.Series:
    p = pd.to_numeric(p, errors="coerce")
    return z * (p * (1 - p) / n).pow(0.5)


def unknown_latex(
    summary: pd.DataFrame,
    *,
    model: str | None = None,
    caption: str | None = None,
    label: str | None = None,
    columns: Sequence[str] = ("refusal_rate", "accuracy", "mean_confidence"),
    percent: bool = False,
    digits: int = 2,
) -> str:
    """:func:`~workbench.unknown.summarize_unknown` (several models' summaries concatenated
    with a ``model`` column compare them): rates with normal-approximation 95% intervals from
    ``n``; the best model per task and partition in bold (refusal: higher on unanswerable
    questions, lower on answerable ones)."""
    columns = [c for c in columns if c in summary]
    labels = [c for c in ("task", "partition", "model") if c in summary]
    frame = summary.sort_values([c for c in ("task", "partition") if c in summary], kind="stable")
    rates = {c for c in columns if c.endswith(("_rate", "accuracy"))}
    ci = {}
    for c in columns:
        if c in rates:
            frame[f"{c}_ci"] = _wald(frame[c], frame["n"])
            ci[c] = f"{c}_ci"

    def best(col: str, group: pd.DataFrame) -> str | None:
        if col.endswith("refusal_rate"):
            return "max" if (group["partition"] == "unanswerable").all() else "min"
        return "min" if col in LOWER_IS_BETTER else "max"

    detector = ", ".join(sorted(set(summary["detector"]))) if "detector" in summary else "refusal"
    what = caption or f"UnknownBench per task and partition (refusal by {detector})"
    cap = caption_text(
        what,
        _model(summary, model),
        _n_range(summary["n"]) + " questions per row",
        "rates ± half-width of the normal-approximation (Wald) 95% interval",
    )
    return latex_table(
        frame,
        labels,
        columns,
        ci=ci,
        best=best,
        within=[c for c in ("task", "partition") if c in labels],
        caption=cap,
        label=label,
        digits=digits,
        percent=percent,
    )


def editing_latex(
    metrics: pd.DataFrame,
    *,
    model: str | None = None,
    subset: str = "overall",
    caption: str | None = None,
    label: str | None = None,
    percent: bool = False,
    digits: int = 2,
) -> str:
    """:func:`~workbench.editing.edit_metrics` for one ``subset``: one row per editor, one column
    per metric (accuracy ± normal-approximation 95% interval from its n); the best editor per
    column in bold."""
    f = metrics[metrics["subset"] == subset]
    order = [
        m
        for m in ("edit_success", "property_success", "consistency", "invariance")
        if m in set(f["metric"])
    ]
    wide = f.pivot_table(
        index="editor", columns="metric", values=["value", "n"], aggfunc="first", sort=False
    )
    frame = pd.DataFrame({"editor": wide.index})
    for m in order:
        frame[m] = wide[("value", m)].to_numpy()
        frame[f"{m}_ci"] = _wald(frame[m], pd.Series(wide[("n", m)].to_numpy()))
    what = caption or f"Editing metrics ({subset.replace('=', ': ')})"
    cap = caption_text(
        what,
        model,
        _n_range(f["n"]) + " queries per cell",
        "± half-width of the normal-approximation (Wald) 95% interval",
    )
    return latex_table(
        frame,
        ["editor"],
        order,
        ci={m: f"{m}_ci" for m in order},
        caption=cap,
        label=label,
        digits=digits,
        percent=percent,
    )


def concepts_latex(
    summary: pd.DataFrame,
    *,
    caption: str | None = None,
    label: str | None = None,
    metrics: Sequence[str] = ("abstention", "generalization", "specificity", "overall"),
    percent: bool = True,
    digits: int = 1,
) -> str:
    """:func:`workbench.experiments.report.summary_table` (one row per model, technique and
    concept): point rates only (one concept per row: no interval over concepts); the best
    technique per model and concept in bold."""
    metrics = [m for m in metrics if m in summary]
    labels = [c for c in ("model", "concept_name", "technique") if c in summary]
    frame = summary.sort_values(
        [c for c in ("model", "concept_name") if c in summary], kind="stable"
    )
    cap = caption_text(
        caption or "Metrics per concept" + (" (%)" if percent else ""),
        list(summary["model"].unique()) if "model" in summary else None,
        _n_range(summary["n_target"]) + " target questions per row"
        if "n_target" in summary
        else "?",
        "point estimates, no intervals (one concept per row)",
    )
    return latex_table(
        frame,
        labels,
        metrics,
        within=[c for c in ("model", "concept_name") if c in labels],
        caption=cap,
        label=label,
        digits=digits,
        percent=percent,
    )


def to_latex(table: pd.DataFrame, **kwargs) -> str:
    """The LaTeX of any summary table of the workbench, chosen by its columns (keyword
    arguments go to the matching function: ``model``, ``caption``, ``label``, ...)."""
    cols = set(table.columns)
    if {"source", "concepts", "metric", "mean", "ci"} <= cols:
        return side_by_side_latex(table, **kwargs)
    if {"metric", "mean", "ci", "n_concepts"} <= cols:
        return select_latex(table, **kwargs)
    if {"task", "partition", "n"} <= cols:
        return unknown_latex(table, **kwargs)
    if {"editor", "metric", "subset", "value", "n"} <= cols:
        return editing_latex(table, **kwargs)
    if "technique" in cols and any(c.endswith("_lo") for c in cols):
        return technique_latex(table, **kwargs)
    if {"technique", "concept", "abstention"} <= cols:
        return concepts_latex(table, **kwargs)
    from workbench.errors import WorkbenchError

    raise WorkbenchError(
        f"to_latex: not one of the workbench's summary tables (columns {sorted(cols)})"
    )


def write_latex(text: str, path: str | os.PathLike) -> Path:
    """Write ``text`` to ``path`` (``.tex``) atomically; the same table gives the same bytes."""
    from workbench.paths import write_text_atomic

    p = Path(path)
    write_text_atomic(p, text)
    return p
