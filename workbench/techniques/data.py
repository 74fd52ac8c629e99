"""Which questions a technique may learn from, and which the evaluation asks.

Techniques see only *train* and *validation* questions; evaluation uses *eval* questions. For a
target concept c: related questions are about c and its descendants D(c); "near" unrelated ones
about SELECT's specificity set (ancestors and siblings, what specificity is measured on); "far"
unrelated ones about
concepts outside c's subtree, ancestry and that near set. Sampling is seeded by the target id.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field

from workbench.taxonomy.benchmark import Benchmark
from workbench.taxonomy.questions import FewShotExample, ReferenceAnswer, _rng


@dataclass(frozen=True)
class LabelledQuestion:
    """A question with the concept it is about and its relation to the target."""

    question: str
    concept_id: str
    relation: str  # "target" | "descendant" | "parent" | "sibling" | "ancestor" | "unrelated"

    @property
    def related(self) -> bool:
        return self.relation in ("target", "descendant")


def _pool(bench: Benchmark, ids: list[str], split: str, relation: str) -> list[LabelledQuestion]:
    return [LabelledQuestion(q, c, relation) for c in ids if c in bench.questions
            for q in bench.questions[c].split(split)]


def _spread(pool: list[LabelledQuestion], n: int, rng: random.Random) -> list[LabelledQuestion]:
    """Up to ``n`` questions spread over as many concepts as possible (round robin)."""
    by_concept: dict[str, list[LabelledQuestion]] = {}
    for q in pool:
        by_concept.setdefault(q.concept_id, []).append(q)
    order = sorted(by_concept)
    rng.shuffle(order)
    for c in order:
        rng.shuffle(by_concept[c])
    out: list[LabelledQuestion] = []
    while len(out) < n and any(by_concept[c] for c in order):
        for c in order:
            if by_concept[c] and len(out) < n:
                out.append(by_concept[c].pop())
    return out


@dataclass(frozen=True)
class TargetData:
    """The learning material for one target concept (SELECT's proportions by default).

    ``examples`` are the few-shot examples the benchmark ships for the target (may be empty);
    ``answers`` the benchmark's reference replies to the training questions here (may be empty).
    """

    target: str
    related: list[LabelledQuestion]
    unrelated: list[LabelledQuestion]
    val_related: list[LabelledQuestion]
    val_unrelated: list[LabelledQuestion]
    examples: tuple[FewShotExample, ...] = ()
    answers: dict[str, ReferenceAnswer] = field(default_factory=dict)

    def fingerprint(self) -> str:
        """A hash of every question and label (and shipped examples and answers), for artifact
        provenance."""
        payload = [(q.question, q.concept_id, q.relation) for group in
                   (self.related, self.unrelated, self.val_related, self.val_unrelated) for q in group]
        extra = [[e.to_dict() for e in self.examples],
                 [self.answers[k].to_dict() for k in sorted(self.answers)]]
        if not self.examples and not self.answers:
            extra = []  # keeps the fingerprints of benchmarks without them unchanged
        return hashlib.sha256(json.dumps([self.target, payload] + extra).encode()).hexdigest()[:16]


def target_data(bench: Benchmark, target: str, *, n_target: int = 15, n_descendant: int = 5,
                n_far: int = 15, n_near: int = 5, n_val: int = 10, seed: int = 0) -> TargetData:
    """Train and validation questions for ``target`` (atomic or composition).

    Related: ``n_target`` target questions + ``n_descendant`` descendant questions (target
    questions fill in when there are no descendants). Unrelated: ``n_near`` from SELECT's
    specificity set (``Benchmark.near_concepts``: ancestors and siblings) + ``n_far`` from
    elsewhere (concepts outside the subtree, its ancestry and that set; near ones fill in when
    there are too few). Validation draws ``n_val`` per group from the validation split the same
    way.
    """
    tax = bench.taxonomy_of(target)
    rng = _rng(seed, target)
    desc = tax.descendants(target)
    near_rel = bench.near_concepts(target)
    near = list(near_rel)
    excluded = set(tax.subtree(target)) | set(tax.ancestors(target)) | set(near)
    far = sorted(c for c in tax.concepts if c not in excluded)

    def related(split: str, n_t: int, n_d: int) -> list[LabelledQuestion]:
        d = _spread(_pool(bench, desc, split, "descendant"), n_d, rng)
        t = _spread(_pool(bench, [target], split, "target"), n_t + (n_d - len(d)), rng)
        return t + d

    def unrelated(split: str, n_f: int, n_n: int) -> list[LabelledQuestion]:
        pool = [LabelledQuestion(q.question, q.concept_id, near_rel[q.concept_id])
                for q in _pool(bench, near, split, "near")]
        nq = _spread(pool, n_n, rng)
        far_ids = rng.sample(far, min(len(far), n_f + n_n - len(nq)))
        fq = _spread(_pool(bench, far_ids, split, "unrelated"), n_f + n_n - len(nq), rng)
        rest = [q for q in pool if q not in nq]
        return nq + fq + _spread(rest, n_f + n_n - len(nq) - len(fq), rng)

    half = max(1, n_val // 2)
    related_train = related("train", n_target, n_descendant)
    unrelated_train = unrelated("train", n_far, n_near)
    asked = {q.question for q in related_train + unrelated_train}
    return TargetData(
        target=target,
        related=related_train,
        unrelated=unrelated_train,
        val_related=related("validation", half, n_val - half),
        val_unrelated=unrelated("validation", n_val - half, half),
        examples=tuple(bench.examples.get(target, ())),
        answers={q: a for q, a in bench.answers.items() if q in asked},
    )
