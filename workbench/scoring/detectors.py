"""Refusal detectors by name: every result table keeps each one's decision.

``phrase`` is the workbench's rule detector (``workbench.scoring.phrases``), ``keyword`` the
workbench's keyword baseline, ``unknownbench`` UnknownBench's exact keyword rule. Result rows
hold ``refused_<name>``; metrics and notebooks take that column name as ``detector`` (a judge's
verdicts, where a notebook adds them, are ``refused_judge``).
"""

from __future__ import annotations

from collections.abc import Callable

from workbench.errors import ConfigError
from workbench.scoring.keywords import keyword_refusal, unknownbench_refusal
from workbench.scoring.phrases import detect_refusal

DETECTORS: dict[str, Callable[[str, str | None], bool]] = {
    "phrase": lambda text, question=None: detect_refusal(text, question=question).refused,
    "keyword": lambda text, question=None: keyword_refusal(text),
    "unknownbench": lambda text, question=None: unknownbench_refusal(text),
}
#: The columns results hold, for ``detector=`` parameters.
DETECTOR_COLUMNS = tuple(f"refused_{name}" for name in DETECTORS)


def detector_decisions(text: str, question: str | None = None) -> dict[str, bool]:
    """Every detector's decision on one response (to ``question``, when known), as
    ``{"refused_<name>": bool}``."""
    return {f"refused_{name}": bool(fn(text, question)) for name, fn in DETECTORS.items()}


def check_detector(column: str, extra: tuple[str, ...] = ()) -> str:
    """``column`` if results hold it, else a one-line error listing the ones they do."""
    known = DETECTOR_COLUMNS + tuple(extra)
    if column not in known:
        raise ConfigError(f"unknown detector {column!r}; known: {', '.join(known)}")
    return column
