"""SELECT's aggregation of an imported run's rows."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.select.results.release import SelectResultsError


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
    except (OSError, KeyError, ValueError) as e:
        raise SelectResultsError(f"{path}: cannot read {detector!r} and its keys ({e})") from None
    return select_table(rows, detector)
