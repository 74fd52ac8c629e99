"""Does the model know that a descendant IS-A its target? True/False probes by log-probability.

Each statement ("Rivers can be classified as a member, a subtype or a subcategory of bodies of
water.", :func:`~workbench.taxonomy.questions.isa_statement`: one wording for instances, classes
and compositions, grammatical with SELECT's plural names) is asked as a True/False question;
the model's score is log P(True) - log P(False) for its reply, read from its log-probabilities
(:func:`workbench.generation.options.option_probabilities`), never parsed from text. Because a
small model may lean to one word whatever the statement, the scores are calibrated on control
pairs from the taxonomy: known-true statements (a concept and one of its ancestors) and
known-false ones (a concept and an unrelated class of the ancestor's level). The threshold is
the midpoint between the two groups' mean scores. The probe is *uninformative* (and the
generalization-error analysis says so instead of plotting) when the controls are not separated
(AUROC below ``min_auroc``) or when, even calibrated, it calls at least 90% of known-true
controls false or of known-false controls true.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from workbench.generation import render_prompts
from workbench.generation.options import option_probabilities
from workbench.taxonomy.questions import RelationProbe, isa_statement, relation_probes

if TYPE_CHECKING:
    from workbench.generation.backend import Backend
    from workbench.taxonomy.benchmark import Benchmark

TRUE_FALSE = [["True", " True", "true", " true"], ["False", " False", "false", " false"]]


def true_false_scores(lm: Backend, statements: list[str], batch_size: int = 32) -> list[float]:
    """log P(True) - log P(False) for each statement asked as a True/False question."""
    prompts = [RelationProbe("", "", s, True).prompt for s in statements]
    texts = render_prompts(lm.tokenizer, prompts)
    dists = option_probabilities(lm, texts, TRUE_FALSE, batch_size)
    eps = 1e-12
    return [math.log(d.probs[0] + eps) - math.log(d.probs[1] + eps) for d in dists]


@dataclass(frozen=True)
class ProbeCalibration:
    """How the probe behaves on control statements whose truth the taxonomy knows."""

    threshold: float
    auroc: float
    n_true: int
    n_false: int
    true_called_false: float  # share of known-true controls the calibrated probe calls false
    false_called_true: float
    raw_true_called_false: float  # the same without calibration (score < 0)
    raw_false_called_true: float
    informative: bool
    reason: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _auroc(pos: list[float], neg: list[float]) -> float:
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def calibrate(
    true_scores: list[float],
    false_scores: list[float],
    min_auroc: float = 0.6,
    degenerate: float = 0.9,
) -> ProbeCalibration:
    """The midpoint threshold between the controls' mean scores, and whether the probe is
    informative (see the module docstring)."""
    mt = sum(true_scores) / len(true_scores) if true_scores else float("nan")
    mf = sum(false_scores) / len(false_scores) if false_scores else float("nan")
    threshold = (mt + mf) / 2
    auroc = _auroc(true_scores, false_scores)
    tcf = sum(s <= threshold for s in true_scores) / max(1, len(true_scores))
    fct = sum(s > threshold for s in false_scores) / max(1, len(false_scores))
    reason = ""
    if not true_scores or not false_scores:
        reason = "no control statements"
    elif not auroc >= min_auroc:
        reason = (
            f"controls not separated: AUROC {auroc:.2f} < {min_auroc} (known-true mean "
            f"score {mt:.2f}, known-false {mf:.2f})"
        )
    elif tcf >= degenerate or fct >= degenerate:
        reason = (
            f"degenerate: calls {tcf:.0%} of known-true controls false and {fct:.0%} of "
            "known-false ones true"
        )
    return ProbeCalibration(
        threshold,
        auroc,
        len(true_scores),
        len(false_scores),
        tcf,
        fct,
        sum(s < 0 for s in true_scores) / max(1, len(true_scores)),
        sum(s > 0 for s in false_scores) / max(1, len(false_scores)),
        informative=not reason,
        reason=reason,
    )


def control_probes(bench: Benchmark, targets, n: int = 24, seed: int = 0) -> list[RelationProbe]:
    """Known-true and known-false IS-A statements from the atomic taxonomy, away from the
    targets' subtrees (``n`` of each at most)."""
    tax = bench.atomic
    avoid = {c for t in targets if t in tax for c in tax.subtree(t)}
    rng = random.Random(seed)
    pool = sorted(c.id for c in tax if c.id not in avoid and tax.level(c.id) >= 2)
    rng.shuffle(pool)
    true: list[RelationProbe] = []
    false: list[RelationProbe] = []
    for cid in pool:
        for p in relation_probes(tax, cid, negatives=1, seed=seed):
            (true if p.expected else false).append(p)
        if len(true) >= n and len(false) >= n:
            break
    return true[:n] + false[:n]


def probe_descendants(
    lm: Backend, bench: Benchmark, targets, model_name: str, n_controls: int = 24, seed: int = 0
) -> tuple[pd.DataFrame, ProbeCalibration]:
    """One row per (target, descendant): the probe's score, P(True) and calibrated decision
    ``known`` (None when the probe is uninformative), and the calibration on control pairs."""
    probes, keys = [], []
    for t in targets:
        tax = bench.taxonomy_of(t)
        for d in tax.descendants(t):
            probes.append(RelationProbe(d, t, isa_statement(tax[d], tax[t]), True))
            keys.append((t, d))
    controls = control_probes(bench, targets, n_controls, seed)
    scores = true_false_scores(lm, [p.statement for p in probes + controls])
    ctrl = scores[len(probes) :]
    cal = calibrate(
        [s for s, p in zip(ctrl, controls) if p.expected],
        [s for s, p in zip(ctrl, controls) if not p.expected],
    )
    rows = [
        {
            "model": model_name,
            "target": t,
            "question_concept": d,
            "statement": p.statement,
            "score": s,
            "p_true": 1 / (1 + math.exp(-s)),
            "known": (s > cal.threshold) if cal.informative else None,
        }
        for (t, d), p, s in zip(keys, probes, scores)
    ]
    return pd.DataFrame(rows), cal
