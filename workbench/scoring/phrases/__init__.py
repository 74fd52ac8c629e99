"""Refusal detection by rules on what a response says, for any model family.

The package's modules, one job each:

- ``vocabulary``: the phrasings of each rule kind and the regexes that classify sentences;
- ``rules``: the rule kinds (strong and weak, documented there) and matching one in a sentence;
- ``sentences``: reading a response (normalised, unquoted, split into sentences) and what a
  sentence is besides a rule's match (a lecture, a list of steps, degenerate output);
- ``questions``: what a question asks for and whether a sentence gives it;
- ``evidence``: the evidence that a refusal is partial (``EVIDENCE``, ``PARTIAL_EVIDENCE``);
- ``decision``: the verdict (:func:`detect_refusal`, :class:`PhraseDecision`, :func:`is_refusal`)
  and the early-stopping rule (:func:`refusal_settled`).

These rules were written from the kinds of refusal seen across model families and checked on the
development part of ``data/labels`` and on the development halves of outside labelled sets
(``benchmarks/detectors.py``: XSTest's human-labelled answers of GPT-4, Llama-2 and Mistral,
GPTFuzz's labelled ChatGPT answers, SELECT's released answers of six models); the test parts
measure them (``python -m workbench scoring agreement``, ``python benchmarks/detectors.py DIR``).
"""

from workbench.scoring.keywords import KEYWORDS, keyword_refusal
from workbench.scoring.phrases.decision import (
    PhraseDecision,
    detect_refusal,
    is_refusal,
    refusal_settled,
)
from workbench.scoring.phrases.evidence import EVIDENCE, PARTIAL_EVIDENCE
from workbench.scoring.phrases.rules import KINDS

__all__ = [
    "EVIDENCE",
    "KEYWORDS",
    "KINDS",
    "PARTIAL_EVIDENCE",
    "PhraseDecision",
    "detect_refusal",
    "is_refusal",
    "keyword_refusal",
    "refusal_settled",
]
