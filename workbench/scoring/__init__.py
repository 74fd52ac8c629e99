"""Scoring: refusal detectors usable on any technique's output."""

from workbench.scoring.keywords import (
    UNKNOWNBENCH_KEYWORDS,
    keyword_refusal,
    unknownbench_correct,
    unknownbench_refusal,
)
from workbench.scoring.phrases import (
    PhraseDecision,
    detect_refusal,
    is_refusal,
    refusal_settled,
)

__all__ = [
    "UNKNOWNBENCH_KEYWORDS",
    "PhraseDecision",
    "detect_refusal",
    "is_refusal",
    "keyword_refusal",
    "refusal_settled",
    "unknownbench_correct",
    "unknownbench_refusal",
]
