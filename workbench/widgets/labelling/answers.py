"""A run's answers, ready to label: read from a run directory or a file, given a ``question`` and a
``technique``, detector decisions (``refused_*``) and a stable key per answer (``label_key``)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from workbench.errors import WorkbenchError

#: Columns that may hold a dataset split (a refusal suite's), in the order looked for.
SPLIT_COLUMNS = ("dataset_split", "split", "dataset")
_KEY_FIELDS = (
    "model",
    "system",
    "technique",
    "target",
    "dataset",
    "seed",
    "sample",
    "question",
    "response",
)


def _present(v) -> bool:
    return v is not None and v is not pd.NA and not (isinstance(v, float) and v != v)


def _model(row: Mapping):
    for c in ("model_id", "model"):
        if _present(row.get(c)):
            return row.get(c)
    return None


def _norm(v):
    """A value as JSON keys it: None for missing, plain Python numbers (1.0 -> 1)."""
    if v is None or v is pd.NA or (isinstance(v, float) and v != v):
        return None
    if hasattr(v, "item") and not isinstance(v, str):
        v = v.item()
    return int(v) if isinstance(v, float) and v.is_integer() else v


def model_column(frame: pd.DataFrame) -> pd.Series:
    """Per row, the model: ``model_id`` where given, else ``model`` (None when neither)."""
    out = pd.Series(None, index=frame.index, dtype=object)
    for c in ("model", "model_id"):
        if c in frame:
            out = frame[c].astype(object).where(frame[c].notna(), out)
    return out


def answer_keys(frame: pd.DataFrame) -> list[str]:
    """A stable id per answer: a hash of its model, technique, target, seed, sample, question and
    text (the same run, rerun, gives the same keys)."""
    cols = []
    for f in _KEY_FIELDS:
        s = model_column(frame) if f == "model" else frame[f] if f in frame else None  # noqa: SIM401 (DataFrame.get also hides other errors)
        cols.append([None] * len(frame) if s is None else [_norm(v) for v in s.tolist()])
    return [
        hashlib.sha1(json.dumps(vals, default=str).encode()).hexdigest()[:16] for vals in zip(*cols)
    ]


def answer_key(row: Mapping) -> str:
    """:func:`answer_keys` of one row."""
    return answer_keys(pd.DataFrame([dict(row)]))[0]


def answers_file(path: str | os.PathLike) -> Path:
    """The file :func:`load_answers` reads for ``path``: the file itself, or a run directory's
    ``results.parquet`` / ``rows.parquet``."""
    p = Path(path)
    if p.is_dir():
        p = next(
            (p / f for f in ("results.parquet", "rows.parquet") if (p / f).is_file()),
            p / "results.parquet",
        )
    return p


def load_answers(path: str | os.PathLike) -> pd.DataFrame:
    """A run's rows: a run directory (an experiment's ``results.parquet`` or the refusal suite's
    ``rows.parquet``), or a ``.parquet``, ``.csv`` or ``.jsonl`` file of rows with ``question``
    (or ``prompt``) and ``response``."""
    p = answers_file(path)
    if not p.is_file():
        raise WorkbenchError(
            f"no answers at {p} (a run directory with results.parquet or "
            "rows.parquet, or a .parquet / .csv / .jsonl file)"
        )
    if p.suffix not in (".parquet", ".csv", ".jsonl"):
        raise WorkbenchError(f"{p} is not a .parquet, .csv or .jsonl file of answers")
    try:
        if p.suffix == ".parquet":
            frame = pd.read_parquet(p)
        elif p.suffix == ".csv":
            frame = pd.read_csv(p)
        else:
            frame = pd.read_json(p, lines=True, dtype=False)
    except (ValueError, OSError, UnicodeDecodeError) as e:  # pyarrow's and pandas' errors too
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise WorkbenchError(f"{p} does not read as {p.suffix[1:]} rows ({first})") from None
    lacking = [
        c for c in (("question", "prompt"), ("response",)) if not set(c) & set(frame.columns)
    ]
    if lacking:
        raise WorkbenchError(
            f"{p} has no {' or '.join(map(repr, lacking[0]))} column; its columns: "
            + ", ".join(map(str, frame.columns))
        )
    return frame


def detector_columns(frame: pd.DataFrame) -> list[str]:
    """The ``refused_*`` columns, the judge's last."""
    cols = [c for c in frame.columns if str(c).startswith("refused_")]
    return sorted(cols, key=lambda c: c == "refused_judge")


def prepare_answers(rows: pd.DataFrame, rescore: bool = False) -> pd.DataFrame:
    """Rows ready to label: positional index, a ``question`` (the suite's ``prompt``), a
    ``technique`` (``answer`` when absent), a ``label_key``, and detector columns (computed with
    the current rules when the rows have none, or when ``rescore``)."""
    from workbench.scoring.detectors import DETECTORS, detector_decisions
    from workbench.scoring.phrases import detect_refusal

    frame = rows.reset_index(drop=True)
    if "question" not in frame and "prompt" in frame:
        frame["question"] = frame["prompt"]
    missing = {"question", "response"} - set(frame.columns)
    if missing:
        raise WorkbenchError(
            f"answers need columns question and response; missing {sorted(missing)} "
            f"(have: {', '.join(map(str, rows.columns))})"
        )
    if "technique" not in frame:
        frame["technique"] = "answer"
    if rescore or not detector_columns(frame):
        decided = [detector_decisions(r, q) for q, r in zip(frame["question"], frame["response"])]
        for name in DETECTORS:
            frame[f"refused_{name}"] = [d[f"refused_{name}"] for d in decided]
        frame["phrase_partial"] = [
            detect_refusal(r, question=q).partial
            for q, r in zip(frame["question"], frame["response"])
        ]
    frame["label_key"] = answer_keys(frame)
    return frame
