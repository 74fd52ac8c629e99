"""The labels-file line for one label (see :mod:`workbench.scoring.labels`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from workbench.scoring.labels import model_family
from workbench.widgets.labelling.answers import SPLIT_COLUMNS, _model, _present

_RECORD_FIELDS = (
    "system",
    "technique",
    "target",
    "target_name",
    "relation",
    "dataset",
    "expected",
    "category",
    "prompt_id",
    "sample",
    "seed",
    "run",
)


def label_record(row: Mapping, label: str | None, source: str | None = None) -> dict:
    """The labels-file line for labelling ``row`` (``label`` None: withdrawing its label)."""
    model = _model(row)
    rec = {
        "key": row["label_key"],
        "label": label,
        "question": row["question"],
        "response": row["response"],
        "source": source or (f"run:{row['run']}" if _present(row.get("run")) else "labeller"),
        "model": model,
        "family": model_family(model),
    }
    for f in _RECORD_FIELDS:
        if _present(row.get(f)):
            v = row[f]
            rec[f] = v.item() if hasattr(v, "item") else v
    for c in SPLIT_COLUMNS:
        if _present(row.get(c)):
            rec["dataset_split"] = str(row[c])
            break
    rec["time"] = datetime.now(UTC).isoformat(timespec="seconds")
    return rec
