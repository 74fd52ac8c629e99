"""Refusal detectors by name: every result table keeps each one's decision.

``phrase`` is the workbench's rule detector (``workbench.scoring.phrases``), ``keyword`` the
workbench's keyword baseline, ``unknownbench`` UnknownBench's exact keyword rule. Result rows
hold ``refused_<name>``; metrics and notebooks take that column name as ``detector`` (a judge's
verdicts, where a notebook adds them, are ``refused_judge``).

``select_phrase``, ``select_keyword``, ``select_phr_kw`` and ``select_heuristic`` are SELECT's own
four decisions (``workbench.scoring.select_refusal``); they need SELECT's keywords, so only a benchmark
imported from a SELECT release clone (one with a ``select_protocol``) has them:
:func:`detectors_for` adds them for such a benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from workbench.errors import ConfigError
from workbench.registry import Registry
from workbench.scoring.keywords import keyword_refusal, unknownbench_refusal
from workbench.scoring.phrases import detect_refusal

if TYPE_CHECKING:
    from workbench.taxonomy.benchmark import Benchmark


class Detector(Protocol):
    """``fn(text, question=None) -> refused``: one detector's decision on a response."""

    def __call__(self, text: str, question: str | None = None, /) -> bool: ...


DETECTORS: Registry[Detector] = Registry(
    "detector",
    {
        "phrase": lambda text, question=None: detect_refusal(text, question=question).refused,
        "keyword": lambda text, question=None: keyword_refusal(text),
        "unknownbench": lambda text, question=None: unknownbench_refusal(text),
    },
)
#: SELECT's decisions: detector name -> the key of ``SelectRefusalRule.decide``.
SELECT_DETECTORS = {
    "select_phrase": "phrase",
    "select_keyword": "keyword",
    "select_phr_kw": "phr+kw",
    "select_heuristic": "heuristic",
}
#: Detectors that read a model (the learned refusal probe, ``workbench.scoring.probe``, and
#: ``combined``, the phrase detector overruled where the probe is sure): not decided per row as
#: answers are written, but added to a whole table where a detector parameter names one
#: (:func:`with_detector`), batched and cached per text.
LEARNED = ("probe", "combined")
#: The columns results may hold, for ``detector=`` parameters (``refused_select_*`` only where
#: the benchmark has SELECT's protocol).
DETECTOR_COLUMNS = tuple(f"refused_{name}" for name in [*DETECTORS, *SELECT_DETECTORS, *LEARNED])
_RULES: dict[int, tuple] = {}  # id(protocol) -> (protocol, its SelectRefusalRule)


def _select_rule(protocol):
    cached = _RULES.get(id(protocol))
    if cached is None or cached[0] is not protocol:
        from workbench.scoring.select_refusal import SelectRefusalRule

        if len(_RULES) > 8:
            _RULES.clear()
        cached = _RULES[id(protocol)] = (protocol, SelectRefusalRule(protocol))
    return cached[1]


def detectors_for(bench: Benchmark | None = None) -> dict[str, Detector]:
    """The built-in detectors, plus SELECT's four when ``bench`` has a ``select_protocol``."""
    protocol = getattr(bench, "select_protocol", None)
    if protocol is None:
        return dict(DETECTORS)
    rule = _select_rule(protocol)
    last: dict[str, Any] = {}  # the last text decided ("text") and its four flags ("flags")

    def decide(text: str) -> dict[str, bool]:  # the four share one keyword scan per text
        if last.get("text") != text:
            last.update(text=text, flags=rule.decide(text))
        return last["flags"]

    out = dict(DETECTORS)
    for name, method in SELECT_DETECTORS.items():
        out[name] = lambda text, question=None, _m=method: decide(text)[_m]
    return out


def detector_decisions(
    text: str, question: str | None = None, detectors: Mapping[str, Callable] | None = None
) -> dict[str, bool]:
    """Every detector's decision on one response (to ``question``, when known), as
    ``{"refused_<name>": bool}``; ``detectors`` as :func:`detectors_for` gives them (default:
    the built-ins)."""
    chosen = DETECTORS if detectors is None else detectors
    return {f"refused_{name}": bool(fn(text, question)) for name, fn in chosen.items()}


def with_detector(rows, column: str, progress: bool = False):
    """``rows`` with the ``column`` a detector parameter names: as they are when they hold it,
    with the learned probe's columns added when it is ``refused_probe`` (a run's rows, SELECT's
    released answers: any table with a ``response`` column)."""
    if column in rows or column.removeprefix("refused_") not in LEARNED:
        return rows
    from workbench.scoring.probe import add_probe_columns

    return add_probe_columns(rows, progress=progress)


def check_detector(column: str, extra: tuple[str, ...] = (), bench: Benchmark | None = None) -> str:
    """``column`` if results hold it, else a one-line error listing the ones they do. With
    ``bench``, a ``refused_select_*`` column needs the benchmark to have SELECT's protocol."""
    known = DETECTOR_COLUMNS + tuple(extra)
    if column not in known:
        raise ConfigError(f"unknown detector {column!r}; known: {', '.join(known)}")
    name = column.removeprefix("refused_")
    if (
        bench is not None
        and name in SELECT_DETECTORS
        and column not in extra
        and getattr(bench, "select_protocol", None) is None
    ):
        raise ConfigError(
            f"detector {column!r} needs SELECT's refusal keywords: import the release "
            "with `python -m workbench taxonomy import-select <clone>` (a clone of "
            "github.com/kinshuk-h/SELECT with its templates/ and src/, not only data/)"
        )
    return column
