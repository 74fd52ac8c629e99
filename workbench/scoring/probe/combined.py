"""The ``combined`` detector: the phrase detector's decision, overruled where the probe is
sure of the opposite.

The rules and the probe fail on different answers: the rules on refusal styles they were not
written for, the probe on long answers that lecture before they help. The combination keeps
the rule's decision unless the probe's calibrated P(refused) says otherwise with at least
``overrule`` confidence (P >= overrule for a refusal the rules missed; P <= 1 - overrule for
a compliance the rules called a refusal). ``overrule`` is chosen on the development halves of
the labelled sets, never on the answers a table reports, and saved with the head.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def combine(
    phrase: Sequence[bool] | np.ndarray, p_refused: Sequence[float] | np.ndarray, overrule: float
) -> np.ndarray:
    """Per answer: refused by the combination of the phrase decision and the probe's P."""
    ph = np.asarray(phrase, dtype=bool)
    p = np.asarray(p_refused, dtype=float)
    return np.where(ph, p > 1 - overrule, p >= overrule)


def combined_partial(refused, phrase_partial, probe_partial) -> np.ndarray:
    """A refusal the combination makes is partial where either detector calls it so."""
    return np.asarray(refused, bool) & (
        np.asarray(phrase_partial, bool) | np.asarray(probe_partial, bool)
    )
