"""Scoring: refusal detectors usable on any technique's output."""

from workbench.scoring.phrases import (PhraseDecision, detect_refusal, is_refusal, keyword_refusal,
                                       refusal_settled)

__all__ = ["PhraseDecision", "detect_refusal", "is_refusal", "keyword_refusal", "refusal_settled"]
