"""Which questions the labeller walks through: answers grouped by question (same target and
question, side by side), filtered by technique, concept, relation, split, model and what to show
(unlabelled, labelled, detectors disagreeing, a detector disagreeing with the label)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from workbench.widgets.labelling.answers import detector_columns, model_column

#: The "show" filter: which questions to walk through.
SHOW = (
    ("all questions", "all"),
    ("with unlabelled answers", "unlabelled"),
    ("with labelled answers", "labelled"),
    ("where detectors disagree", "disagree"),
    ("where a detector disagrees with the label", "mismatch"),
    ("all, the probe's least sure first", "unsure"),
)
_ALL = "__all__"


def disagreement(frame: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """Per row: whether the detectors' decisions (those given) are not all the same."""
    if not columns:
        return pd.Series(False, index=frame.index)
    vals = frame[list(columns)].astype("boolean")
    return (
        (vals.max(axis=1, skipna=True) != vals.min(axis=1, skipna=True)).fillna(False).astype(bool)
    )


def mismatch(frame: pd.DataFrame, columns: Sequence[str], labels: Mapping[str, str]) -> pd.Series:
    """Per row: labelled, and some detector's decision differs from the label."""
    given = frame["label_key"].map(dict(labels))
    labelled = given.notna().to_numpy()
    truth = (given != "compliance").to_numpy()
    out = np.zeros(len(frame), dtype=bool)
    for c in columns:
        pred = frame[c].astype("boolean")
        out |= (
            labelled & pred.notna().to_numpy() & (pred.fillna(False).to_numpy(dtype=bool) != truth)
        )
    return pd.Series(out, index=frame.index)


def group_ids(frame: pd.DataFrame) -> np.ndarray:
    """Per row, its question's number (in order of first appearance): answers with the same
    target and question are shown side by side."""
    target = (
        frame["target"].astype(object).where(frame["target"].notna(), "")
        if "target" in frame
        else pd.Series("", index=frame.index, dtype=object)
    )
    codes, _ = pd.MultiIndex.from_arrays(
        [target.astype(str), frame["question"].astype(str)]
    ).factorize()
    return np.asarray(codes)


def question_groups(
    frame: pd.DataFrame,
    labels: Mapping[str, str],
    techniques: Sequence[str] | None = None,
    concept: str = _ALL,
    relation: str = _ALL,
    split: tuple[str | None, str] = (None, _ALL),
    show: str = "all",
    order: Sequence[str] | None = None,
    model: str = _ALL,
) -> list[list[int]]:
    """The questions to walk through, each as the row positions of its answers (ordered by
    technique, then model and sample), after the filters: techniques shown (None: all), a
    concept (``target``), a relation, ``split`` (column, value), a model, and ``show`` (``all``,
    ``unlabelled``, ``labelled``, ``disagree``, ``mismatch``: questions where at least one
    shown answer is such; ``unsure``: every question, those holding the answer the refusal
    probe is least sure of (P(refused) nearest 0.5) first)."""
    n = len(frame)
    keep = np.ones(n, dtype=bool)
    if techniques is not None:
        keep &= frame["technique"].isin(list(techniques)).to_numpy()
    if concept != _ALL and "target" in frame:
        keep &= (frame["target"] == concept).to_numpy()
    if relation != _ALL and "relation" in frame:
        keep &= (frame["relation"] == relation).to_numpy()
    col, value = split
    if col and value != _ALL:
        keep &= (frame[col].astype(str) == value).to_numpy()
    models = model_column(frame).astype(str)
    if model != _ALL:
        keep &= (models == model).to_numpy()
    if show in ("all", "unsure"):
        wanted = np.ones(n, dtype=bool)
    elif show in ("labelled", "unlabelled"):
        wanted = frame["label_key"].isin(list(labels)).to_numpy()
        wanted = wanted if show == "labelled" else ~wanted
    elif show == "disagree":
        wanted = disagreement(frame, detector_columns(frame)).to_numpy()
    else:
        wanted = mismatch(frame, detector_columns(frame), labels).to_numpy()
    gid = group_ids(frame)
    pos = np.flatnonzero(keep)
    pos = pos[np.isin(gid[pos], np.unique(gid[keep & wanted]))]
    if not len(pos):
        return []
    rank = {t: i for i, t in enumerate(order or dict.fromkeys(frame["technique"]))}
    tech = frame["technique"].map(rank).fillna(len(rank)).to_numpy()
    model_code = pd.factorize(models, sort=True)[0]
    sample = (
        pd.to_numeric(frame["sample"], errors="coerce").fillna(0).to_numpy()
        if "sample" in frame
        else np.zeros(n)
    )
    pos = pos[np.lexsort((pos, sample[pos], model_code[pos], tech[pos], gid[pos]))]
    cuts = np.flatnonzero(np.diff(gid[pos])) + 1
    groups = [g.tolist() for g in np.split(pos, cuts)]
    if show == "unsure" and "p_refused_probe" in frame:
        doubt = (frame["p_refused_probe"].astype(float) - 0.5).abs().to_numpy()
        groups.sort(key=lambda g: float(doubt[g].min()))  # stable: ties keep their order
    return groups
