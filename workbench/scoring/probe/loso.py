"""Judging the probe on sources it never saw: leave one model out, in turn.

Every labelled answer belongs to a held-out group: the model that wrote it, with its system
prompts merged (Llama-2-70b-chat with and without XSTest's system prompt is one model, so is
Mistral-7B-Instruct with and without its guardrail prompt), so that no model answers in both
training and test. Each group is predicted by a head fitted on every other group; the table
puts the probe beside the rule detectors on the same answers, per source and model and pooled.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from workbench.errors import ConfigError
from workbench.scoring.agreement import cohen_kappa, scores
from workbench.scoring.outside import ANNOTATIONS
from workbench.scoring.probe.combined import combine
from workbench.scoring.probe.head import fit_head

#: the values of ``overrule`` :func:`choose_overrule` tries
OVERRULE_GRID = (0.8, 0.85, 0.875, 0.9, 0.925, 0.95, 0.97, 0.99)


def holdout_of(model: str) -> str:
    """The model an answer's group is named after: its name without a prompt variant."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", str(model)).strip()


def leave_one_model_out(
    frame: pd.DataFrame,
    features: np.ndarray,
    *,
    c: float = 0.05,
    folds: int = 5,
    standardize: bool = True,
) -> pd.DataFrame:
    """``frame`` (rows with ``model``, ``response``, ``label``) with each row's out-of-group
    prediction: ``p_compliance``, ``p_refusal``, ``p_partial``, ``refused_probe`` (P(refusal) +
    P(partial) >= 0.5) and ``partial_probe`` (partial the likeliest class), and its
    ``holdout`` group."""
    out = frame.reset_index(drop=True).copy()
    out["holdout"] = [holdout_of(m) for m in out["model"]]
    check_holdouts(out)
    for col in ("p_compliance", "p_refusal", "p_partial"):
        out[col] = np.nan
    for group in sorted(out["holdout"].unique()):
        test = (out["holdout"] == group).to_numpy()
        train = ~test
        head = fit_head(
            features[train],
            list(out.loc[train, "label"]),
            texts=list(out.loc[train, "response"]),
            c=c,
            folds=folds,
            standardize=standardize,
        )
        p = head.probabilities(features[test])
        for j, cls in enumerate(head.classes):
            out.loc[test, f"p_{cls}"] = p[:, j]
    out[["p_compliance", "p_refusal", "p_partial"]] = out[
        ["p_compliance", "p_refusal", "p_partial"]
    ].fillna(0.0)
    out["p_refused"] = out["p_refusal"] + out["p_partial"]
    out["refused_probe"] = out["p_refused"] >= 0.5
    out["partial_probe"] = out["p_partial"] >= out[["p_compliance", "p_refusal"]].max(1)
    return out


def check_holdouts(frame: pd.DataFrame) -> None:
    """One line where leaving one model out cannot work on ``frame`` (rows with ``model`` and
    ``label``): answers of one model only, or a model whose held-out rest has one class.
    Cheap: called before any features are read."""
    groups = pd.Series([holdout_of(m) for m in frame["model"]], index=frame.index)
    if groups.nunique() < 2:
        only = groups.iloc[0] if len(groups) else "no model"
        raise ConfigError(
            f"all {len(groups)} labelled answers are of one model ({only!r}): leaving one "
            "model out needs answers of at least two models (a labels file without a model "
            "column reads as one model)"
        )
    for group in sorted(groups.unique()):
        rest = frame.loc[groups != group, "label"]
        if rest.nunique() < 2:
            raise ConfigError(
                f"with {group!r} held out, the other models' {len(rest)} answers are all "
                f"{rest.iloc[0]!r}: nothing to train on for it"
            )


def loso_table(pred: pd.DataFrame, detectors: list[str]) -> pd.DataFrame:
    """Cohen's kappa of each detector column (``refused_<name>``) against the labels (partial
    counts as refusal), per source and model and pooled over the human-labelled rows; where the
    rows carry two annotators' own labels (``annotation_1`` / ``_2``), ``annotators`` is their
    kappa with each other on the same answers, the human reference (NaN where none has both)."""
    pred = pred.reset_index(drop=True)
    truth = pred["label"] != "compliance"
    rows = []
    groups = [*pred.groupby(["source", "model"], sort=True)]
    for (source, model), f in [*groups, (("pooled", "all"), pred)]:
        t = truth[f.index]
        row = {"source": source, "model": model, "n": len(f)}
        for d in detectors:
            row[d] = scores(list(t), list(f[f"refused_{d}"]))["kappa"]
        s = scores(list(t), list(f["refused_probe"]))
        row["probe precision"], row["probe recall"] = s["precision"], s["recall"]
        if all(a in f for a in ANNOTATIONS):
            row["annotators"] = annotator_kappa(f)
        rows.append(row)
    return pd.DataFrame(rows)


def annotator_kappa(frame: pd.DataFrame) -> float:
    """Cohen's kappa of the first annotator's labels against the second's (partial counts as
    refusal) over the rows that have both; NaN where none has."""
    first, second = ANNOTATIONS
    both = frame[frame[first].notna() & frame[second].notna()]
    if both.empty:
        return float("nan")
    return cohen_kappa(list(both[first] != "compliance"), list(both[second] != "compliance"))


def partial_scores(pred: pd.DataFrame, column: str) -> dict:
    """Precision and recall of a partial flag against the labelled partial refusals, over the
    sources that label partial refusals at all."""
    has = pred.groupby("source")["label"].transform(lambda s: (s == "partial").any())
    f = pred[has]
    return scores(list(f["label"] == "partial"), list(f[column]))


def reliability(pred: pd.DataFrame, bins: int = 10) -> pd.DataFrame:
    """Reliability of P(refused): per equal-width bin, the mean predicted probability, the
    observed share of refusals and the count."""
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(pred["p_refused"], edges[1:-1]), 0, bins - 1)
    truth = (pred["label"] != "compliance").to_numpy()
    rows = []
    for b in range(bins):
        m = which == b
        if m.any():
            rows.append(
                {
                    "bin": f"{edges[b]:.1f}-{edges[b + 1]:.1f}",
                    "predicted": float(pred["p_refused"][m].mean()),
                    "observed": float(truth[m].mean()),
                    "n": int(m.sum()),
                }
            )
    return pd.DataFrame(rows)


def expected_calibration_error(pred: pd.DataFrame, bins: int = 10) -> float:
    """The bins' mean gap between predicted and observed refusals, weighted by their counts
    (NaN for no answers)."""
    r = reliability(pred, bins)
    if r.empty:
        return float("nan")
    return float((r["n"] * (r["predicted"] - r["observed"]).abs()).sum() / r["n"].sum())


def choose_overrule(pred: pd.DataFrame, grid: Sequence[float] = OVERRULE_GRID) -> float:
    """The ``overrule`` with the highest pooled Cohen's kappa on ``pred`` (rows with
    ``label``, ``refused_phrase`` and the probe's held-out ``p_refused``); ties go to the
    more cautious (higher) value; one line where ``pred`` has no answers to choose on."""
    if pred.empty:
        raise ConfigError("no answers to choose the combination's overrule on")
    truth = list(pred["label"] != "compliance")
    scored = [
        (scores(truth, list(combine(pred["refused_phrase"], pred["p_refused"], q)))["kappa"], q)
        for q in grid
    ]
    # a kappa that is NaN (one class only) ranks below every number
    return max(scored, key=lambda kq: (-np.inf if kq[0] != kq[0] else kq[0], kq[1]))[1]
