"""SELECT's aggregation of an imported run's rows."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.tables.select_results.release import SelectResultsError
from workbench.tables.select_results.schema import SELECT_FLAGS


def detector_columns(detectors: list[str]) -> list[str]:
    """The refusal columns an import writes (what SELECT's table can aggregate): each
    registered detector's ``refused_<name>`` (``detectors``), then SELECT's stored flags."""
    return [f"refused_{d}" for d in detectors] + list(SELECT_FLAGS.values())


def check_detector(detector: str, detectors: list[str]) -> None:
    """Raise SelectResultsError, listing the known columns, unless ``detector`` is one an
    import with these ``detectors`` writes: asked before the import, not after it."""
    known = detector_columns(detectors)
    if detector not in known:
        raise SelectResultsError(
            f"no refusal column {detector!r} in an imported run; known: {', '.join(known)}"
        )


def select_results_table(results: str | os.PathLike, detector: str = "select_flag_heuristic"):
    """SELECT's aggregation (:func:`workbench.scoring.metrics.select_table`) of an imported run's
    ``results.parquet``, reading only the columns it needs."""
    import pandas as pd

    from workbench.scoring.metrics import select_table

    path = Path(results)
    path = path / "results.parquet" if path.is_dir() else path
    cols = ["target_kind", "model", "technique", "eval_type", "target", "seed", detector]
    try:
        rows = pd.read_parquet(path, columns=cols)
    except (OSError, KeyError, ValueError) as e:  # pyarrow's message holds the whole schema
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SelectResultsError(
            f"{path}: cannot read {detector!r} and its keys ({first})"
        ) from None
    return select_table(rows, detector)
