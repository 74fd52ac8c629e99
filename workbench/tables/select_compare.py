"""A run beside SELECT's released models: the same metrics, the same aggregation, the same
concepts where they overlap.

``side_by_side(run_rows, released_rows)`` aggregates both with SELECT's method
(:func:`workbench.scoring.metrics.select_table`: per-seed refusal rates averaged over seeds, the
mean over concepts, a Student-t interval) under one detector, once over the run's own targets
(``concepts="same"``: the released rows cut to the targets the run has) and once over every
concept the release has (``concepts="all"``). The plot draws one panel per metric.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.scoring.metrics import METRICS, harmonic_mean, select_table, technique_table

#: The release's models in the order SELECT's tables list them.
RELEASE_ORDER = (
    "Gemma-2-IT-2B",
    "Gemma-2-IT-9B",
    "LLaMa-3.1-Instruct-8B",
    "Mistral-Instruct-7B-v3",
    "GPT-3.5-U",
    "GPT-4o-U",
)


def technique_summary(
    rows: pd.DataFrame,
    detector: str,
    aggregate: str = "bootstrap",
    n_boot: int = 1000,
    by=("model", "technique"),
) -> pd.DataFrame:
    """The techniques table in one shape for either aggregation: ``<metric>``, ``<metric>_lo``,
    ``<metric>_hi`` per technique (and model), ``targets`` and ``interval`` (how the bounds were
    made). ``select``'s bounds are mean ± the t half-width; its overall is the harmonic mean of
    the mean abstention and specificity, as SELECT's ``performance_score``."""
    if aggregate != "select":
        return technique_table(rows, detector, n_boot=n_boot, by=by).assign(interval="bootstrap")
    tidy = select_table(rows, detector, by=by, split_kinds=False)
    out = []
    for key, f in tidy.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        rec = dict(zip(by, key))
        for _, r in f.iterrows():
            ci = 0.0 if np.isnan(r["ci"]) else r["ci"]
            rec[r["metric"]] = r["mean"]
            rec[f"{r['metric']}_lo"], rec[f"{r['metric']}_hi"] = r["mean"] - ci, r["mean"] + ci
        for m in METRICS:
            rec.setdefault(m, np.nan)
        rec["overall"] = harmonic_mean(rec["abstention"], rec["specificity"])
        rec["targets"] = int(f["n_concepts"].max())
        rec["interval"] = "t"
        out.append(rec)
    return pd.DataFrame(out)


def side_by_side(
    run_rows: pd.DataFrame, released_rows: pd.DataFrame, detector: str, techniques=None
) -> pd.DataFrame:
    """SELECT-aggregated metrics of the run's models and the released models (of the run's
    kinds of target: atoms beside atoms, compositions beside compositions), tidy:
    ``source`` (run / release), ``model``, ``technique``, ``concepts`` (same / all), ``metric``,
    ``mean``, ``ci``, ``n_concepts``. Techniques are those of the run (``base`` has no released
    counterpart) unless given."""
    techniques = list(techniques or run_rows["technique"].unique())
    rel = released_rows[released_rows["technique"].isin(techniques)]
    if "target_kind" in rel and "target_kind" in run_rows:  # atoms beside atoms
        rel = rel[rel["target_kind"].isin(set(run_rows["target_kind"]))]
    targets = set(run_rows["target"])
    parts = [
        select_table(
            run_rows[run_rows["technique"].isin(techniques)], detector, split_kinds=False
        ).assign(source="run", concepts="same"),
        select_table(rel[rel["target"].isin(targets)], detector, split_kinds=False).assign(
            source="release", concepts="same"
        ),
        select_table(rel, detector, split_kinds=False).assign(source="release", concepts="all"),
    ]
    out = pd.concat([p for p in parts if len(p)], ignore_index=True)
    order = {m: i for i, m in enumerate(RELEASE_ORDER)}
    out["_o"] = [
        (0 if s == "run" else 1, order.get(m, len(order)), m)
        for s, m in zip(out["source"], out["model"])
    ]
    out = out.sort_values(["concepts", "_o"], kind="stable").drop(columns="_o")
    return out.reset_index(drop=True)[
        ["source", "model", "technique", "concepts", "metric", "mean", "ci", "n_concepts"]
    ]


def wide(table: pd.DataFrame) -> pd.DataFrame:
    """``side_by_side`` as a paper table: one row per (concepts, model, technique), one column
    per metric, cells "mean ± ci" with the number of concepts."""

    def cell(r) -> str:
        ci = "" if np.isnan(r["ci"]) else f" ± {r['ci']:.2f}"
        return f"{r['mean']:.2f}{ci} (n={r['n_concepts']})"

    t = table.assign(cell=table.apply(cell, axis=1))
    w = t.pivot_table(
        index=["concepts", "source", "model", "technique"],
        columns="metric",
        values="cell",
        aggfunc="first",
        sort=False,
    )
    w.columns.name = None
    return w
