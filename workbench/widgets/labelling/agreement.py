"""Every detector's agreement with the labels given so far, and the phrase detector's ``partial``
flag against labelled partial refusals."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from workbench.scoring.agreement import scores
from workbench.widgets.labelling.answers import detector_columns


def label_agreement(
    frame: pd.DataFrame, labels: Mapping[str, str], by: str | None = None
) -> pd.DataFrame:
    """Each detector column's agreement with the labels given so far (partial counted as
    refusal), overall or per value of ``by``: ``detector``, [``by``], ``n``, ``accuracy``,
    ``kappa``, ``precision``, ``recall``. Rows where a detector has no decision are left out of
    its n."""
    done = frame[frame["label_key"].isin(list(labels))]
    truth = done["label_key"].map(lambda k: labels[k] != "compliance")
    groups = (
        [(None, done.index)]
        if by is None or by not in done
        else [(k, g.index) for k, g in done.groupby(by, sort=True)]
    )
    rows = []
    for col in detector_columns(frame):
        for key, idx in groups:
            pred = done.loc[idx, col]
            ok = pred.notna()
            s = scores([bool(t) for t in truth[idx][ok]], [bool(p) for p in pred[ok]])
            rec: dict[str, object] = {"detector": col.removeprefix("refused_")}
            if by is not None and by in done:
                rec[by] = key
            rec.update({k: s[k] for k in ("n", "accuracy", "kappa", "precision", "recall")})
            rows.append(rec)
    return pd.DataFrame(rows)


def partial_flag(frame: pd.DataFrame, labels: Mapping[str, str]) -> dict | None:
    """The phrase detector's ``partial`` flag against labelled partial refusals (None when the
    rows have no flag)."""
    if "phrase_partial" not in frame:
        return None
    done = frame[frame["label_key"].isin(list(labels)) & frame["phrase_partial"].notna()]
    return scores(
        [labels[k] == "partial" for k in done["label_key"]],
        [bool(v) for v in done["phrase_partial"]],
    )
