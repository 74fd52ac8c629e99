"""Tables written next to the results: the per-concept summary CSV."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from workbench.paths import atomic_file
from workbench.scoring.metrics import summarize

SUMMARY_COLUMNS = [
    "model",
    "technique",
    "concept",
    "concept_name",
    "concept_kind",
    "level",
    "abstention",
    "generalization",
    "specificity",
    "far_specificity",
    "overall",
    "n_target",
    "n_descendant",
    "n_specificity",
    "n_unrelated",
]


def summary_table(rows: pd.DataFrame, detector: str = "refused_phrase") -> pd.DataFrame:
    """One row per (model, technique, concept) with SELECT's metrics and question counts."""
    s = summarize(
        rows,
        detector,
        ["model", "technique", "target", "target_name", "target_kind", "target_level"],
    )
    s = s.rename(
        columns={
            "target": "concept",
            "target_name": "concept_name",
            "target_kind": "concept_kind",
            "target_level": "level",
        }
    )
    return s[SUMMARY_COLUMNS]


def write_summary(
    rows: pd.DataFrame, path: str | os.PathLike, detector: str = "refused_phrase"
) -> pd.DataFrame:
    table = summary_table(rows, detector)
    path = Path(path)
    with atomic_file(path) as tmp:
        table.to_csv(tmp, index=False, float_format="%.4f")
    return table
