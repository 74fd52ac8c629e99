"""Which questions a technique may learn from, and which the evaluation asks.

Techniques see only *train* and *validation* questions; evaluation uses *eval* questions. For a
target concept c: related questions are about c and its descendants D(c); "near" unrelated ones
about SELECT's specificity set (ancestors and siblings, what specificity is measured on); "far"
unrelated ones about
concepts outside c's subtree, ancestry and that near set. Sampling is seeded by the target id.
SELECT's own sampling (``mixture="select"``: ``select_tuning_data``, ``select_contrast_data``) is
at the end of the module.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field

from workbench.taxonomy.benchmark import Benchmark
from workbench.taxonomy.questions import FewShotExample, ReferenceAnswer
from workbench.taxonomy.questions.sets import seeded_rng


@dataclass(frozen=True)
class LabelledQuestion:
    """A question with the concept it is about and its relation to the target."""

    question: str
    concept_id: str
    relation: str  # "target" | "descendant" | "parent" | "sibling" | "ancestor" | "unrelated"

    @property
    def related(self) -> bool:
        return self.relation in ("target", "descendant")


def question_pool(
    bench: Benchmark, ids: list[str], split: str, relation: str
) -> list[LabelledQuestion]:
    return [
        LabelledQuestion(q, c, relation)
        for c in ids
        if c in bench.questions
        for q in bench.questions[c].split(split)
    ]


def spread_questions(
    pool: list[LabelledQuestion], n: int, rng: random.Random
) -> list[LabelledQuestion]:
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
    #: SELECT-mode extras (JSON): refusal template draws, shuffle order, pair flips, protocol digest.
    select: dict | None = None

    def fingerprint(self) -> str:
        """A hash of every question and label (and shipped examples and answers), for artifact
        provenance."""
        payload = [
            (q.question, q.concept_id, q.relation)
            for group in (self.related, self.unrelated, self.val_related, self.val_unrelated)
            for q in group
        ]
        extra: list[object] = [  # JSON: lists of examples and answers, then ``select``
            [e.to_dict() for e in self.examples],
            [self.answers[k].to_dict() for k in sorted(self.answers)],
        ]
        if not self.examples and not self.answers:
            extra = []  # keeps the fingerprints of benchmarks without them unchanged
        if self.select:
            extra = extra + [self.select]
        return hashlib.sha256(json.dumps([self.target, payload] + extra).encode()).hexdigest()[:16]


def target_data(
    bench: Benchmark,
    target: str,
    *,
    n_target: int = 15,
    n_descendant: int = 5,
    n_far: int = 15,
    n_near: int = 5,
    n_val: int = 10,
    seed: int = 0,
) -> TargetData:
    """Train and validation questions for ``target`` (atomic or composition).

    Related: ``n_target`` target questions + ``n_descendant`` descendant questions (target
    questions fill in when there are no descendants). Unrelated: ``n_near`` from SELECT's
    specificity set (``Benchmark.near_concepts``: ancestors and siblings) + ``n_far`` from
    elsewhere (concepts outside the subtree, its ancestry and that set; near ones fill in when
    there are too few). Validation draws ``n_val`` per group from the validation split the same
    way.
    """
    tax = bench.taxonomy_of(target)
    rng = seeded_rng(seed, target)
    desc = tax.descendants(target)
    near_rel = bench.near_concepts(target)
    near = list(near_rel)
    excluded = set(tax.subtree(target)) | set(tax.ancestors(target)) | set(near)
    far = sorted(c for c in tax.concepts if c not in excluded)

    def related(split: str, n_t: int, n_d: int) -> list[LabelledQuestion]:
        d = spread_questions(question_pool(bench, desc, split, "descendant"), n_d, rng)
        t = spread_questions(
            question_pool(bench, [target], split, "target"), n_t + (n_d - len(d)), rng
        )
        return t + d

    def unrelated(split: str, n_f: int, n_n: int) -> list[LabelledQuestion]:
        pool = [
            LabelledQuestion(q.question, q.concept_id, near_rel[q.concept_id])
            for q in question_pool(bench, near, split, "near")
        ]
        nq = spread_questions(pool, n_n, rng)
        far_ids = rng.sample(far, min(len(far), n_f + n_n - len(nq)))
        fq = spread_questions(
            question_pool(bench, far_ids, split, "unrelated"), n_f + n_n - len(nq), rng
        )
        rest = [q for q in pool if q not in nq]
        return nq + fq + spread_questions(rest, n_f + n_n - len(nq) - len(fq), rng)

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


# -- SELECT's own training data (``mixture="select"``) -------------------------------------------
# Reproduces src/techniques/tuning/base.py collect_concept_data + aft.py / apo.py
# make_concept_dataset, and steering/repe.py make_concept_dataset: Python's ``random`` seeded
# with the run seed (``transformers.set_seed``), the same draws in the same order.

#: Descendant questions added to the target's (tuning/base.py ``num_queries``).
SELECT_NUM_QUERIES = 20
#: Refusal templates per positive; negatives = positives x this (aft.py ``query_repeats``).
SELECT_SFT_REPEATS = 5
#: DPO: templates per positive (+1 per negative); negatives = positives x this (apo.py).
SELECT_DPO_REPEATS = 2
#: apo.py train_adapter: ``set_seed(seed + 2024)`` before sampling (the shuffle keeps ``seed``).
SELECT_DPO_SEED_OFFSET = 2024
#: steering/repe.py make_concept_dataset: num_major, num_minor, num_dev.
SELECT_STEERING_SIZES = (15, 5, 5)
SELECT_IMPORTER = "workbench.taxonomy.import_select"


def training_questions(bench: Benchmark, concept_id: str) -> list[str]:
    """A concept's training questions (train + validation: SELECT's ``data.train.json``
    ``queries``), in the release's order for a benchmark imported from SELECT's release (the
    importer's seeded train/validation shuffle is undone)."""
    if concept_id not in bench.questions:
        return []
    from workbench.taxonomy.select_format import split_training

    qs = bench.questions[concept_id]
    stored = list(qs.train) + list(qs.validation)
    manifest = bench.manifest or {}
    if manifest.get("builder") != SELECT_IMPORTER:
        return stored
    par = manifest.get("parameters") or {}
    train, val = split_training(
        concept_id,
        list(range(len(stored))),
        par.get("validation_fraction", 0.25),
        par.get("split_seed", 0),
    )
    if len(train) != len(qs.train):  # not the importer's split: keep the stored order
        return stored
    original = [""] * len(stored)
    for i, q in zip(train + val, stored):
        original[i] = q
    return original


def select_groups(bench: Benchmark, target: str) -> tuple[list[str], dict[str, str], list[str]]:
    """SELECT's concept groups for training on ``target``: descendants (breadth first), the
    "hard" specificity set ``{id: relation}`` and the "far" concepts, in SELECT's order.

    Atoms: hard = siblings, then ancestors root first; far = every other atom of the partition
    except the target and the hard set, in the release's (``data.json``) order, *descendants
    included*: SELECT's filter ``alt_concept in descendants`` compares a tuple with string keys
    and never matches (tuning/base.py:61,68, steering/repe.py:111,118). Compositions: hard =
    siblings and compositions of the constituents' ancestors, sorted by released id (no other
    relation's as a fallback); far = the other relations' compositions.
    """
    tax = bench.taxonomy_of(target)
    c = tax[target]
    near = bench.near_concepts(target)
    order = [x for x in bench.questions.sets if x in tax]
    if c.kind == "composition":
        ids = sorted(
            (x for x, rel in near.items() if rel != "other_relation"),
            key=lambda x: "#".join(tax[x].constituents),
        )
        far = [x for x in order if tax[x].relation != c.relation]
    else:
        ids = list(dict.fromkeys(tax.siblings(target) + tax.ancestors(target)[::-1]))
        far = [x for x in order if x != target and x not in ids]
    return tax.descendants(target), {x: near.get(x, "sibling") for x in ids}, far


def _select_pool(bench: Benchmark, ids, relation) -> list[LabelledQuestion]:
    return [LabelledQuestion(q, c, relation(c)) for c in ids for q in training_questions(bench, c)]


def _sample_queries(rng: random.Random, pool: list, k: int) -> list:
    """SELECT's ``sample_queries``: ``random.sample`` of ``k``, or the whole pool when it holds
    at most ``k`` (no draw)."""
    return rng.sample(pool, k) if len(pool) > k else list(pool)


def _select_sides(bench: Benchmark, target: str):
    desc, hard, far = select_groups(bench, target)
    dset = set(desc)
    return (
        desc,
        _select_pool(bench, desc, lambda c: "descendant"),
        _select_pool(bench, hard, lambda c: hard[c]),
        _select_pool(bench, far, lambda c: "descendant" if c in dset else "unrelated"),
    )


def select_tuning_data(
    bench: Benchmark,
    target: str,
    seed: int,
    templates: tuple[str, ...],
    description: str,
    *,
    dpo: bool = False,
) -> TargetData:
    """SELECT's fine-tuning mixture for ``target`` (tuning/base.py collect_concept_data).

    Positives: every training question of the target (train + validation), then
    ``SELECT_NUM_QUERIES`` sampled from the descendants' pooled questions. Negatives: as many
    sampled from the hard set, then far ones up to positives x repeats (SFT 5, DPO 2). Then the
    refusal template draws, ``random.sample(templates, repeats)`` per positive (DPO: and
    ``repeats + 1`` per negative), formatted with ``description``; ``select["order"]`` is
    ``datasets.Dataset.shuffle(seed)``'s permutation of the entries (positives x templates,
    then negatives [x templates]). DPO draws with ``seed + 2024``, as apo.py does.
    """
    import numpy as np

    repeats = SELECT_DPO_REPEATS if dpo else SELECT_SFT_REPEATS
    rng = random.Random(seed + (SELECT_DPO_SEED_OFFSET if dpo else 0))
    desc, desc_pool, hard_pool, far_pool = _select_sides(bench, target)
    pos = [LabelledQuestion(q, target, "target") for q in training_questions(bench, target)]
    if desc:
        pos += _sample_queries(rng, desc_pool, SELECT_NUM_QUERIES)
    neg = _sample_queries(rng, hard_pool, len(pos))
    neg += _sample_queries(rng, far_pool, len(pos) * repeats - len(neg))
    pos_t = [[t.format(description) for t in rng.sample(list(templates), repeats)] for _ in pos]
    neg_t = (
        [[t.format(description) for t in rng.sample(list(templates), repeats + 1)] for _ in neg]
        if dpo
        else []
    )
    n = len(pos) * repeats + (len(neg) * (repeats + 1) if dpo else len(neg))
    select = {
        "mixture": "dpo" if dpo else "sft",
        "templates": pos_t,
        "order": np.random.default_rng(seed).permutation(n).tolist(),
    }
    if dpo:
        select["negative_templates"] = neg_t
    asked = {q.question for q in (pos + neg if dpo else neg)}
    return TargetData(
        target=target,
        related=pos,
        unrelated=neg,
        val_related=[],
        val_unrelated=[],
        answers={q: a for q, a in bench.answers.items() if q in asked},
        select=select,
    )


def select_answer_gaps(bench: Benchmark, target: str, dpo: bool = False) -> tuple[int, int, str]:
    """(missing, total, an example) over every question SELECT's fine-tuning mixture may pair
    with a reference answer: the negatives' pools (DPO: the positives' too)."""
    _, desc_pool, hard_pool, far_pool = _select_sides(bench, target)
    qs = [q.question for q in hard_pool + far_pool]
    if dpo:
        qs += training_questions(bench, target) + [q.question for q in desc_pool]
    qs = list(dict.fromkeys(qs))
    missing = [q for q in qs if q not in bench.answers]
    return len(missing), len(qs), (missing[0] if missing else "")


def select_contrast_data(
    bench: Benchmark, target: str, seed: int, n_vectors: int = 3
) -> TargetData:
    """SELECT's steering contrast set (steering/repe.py make_concept_dataset, get_concept_vector).

    One draw: 10 descendant questions (num_minor + num_dev) topped up with the target's to 25,
    10 hard ones topped up with far ones to 25; the last 5 of each are held out (unused). Then
    the pair-order flips of ``learn_concept_vectors`` (one ``random.random() >= 0.5`` per
    related x unrelated pair, per vector, cumulative), kept in ``select["flips"]`` as strings of
    0/1 (1: the pair is unrelated-first). Then a second draw with 25 hard ones: its last 5 + 5
    are ``val_related``/``val_unrelated`` (``estimate_cls_params``'s 5 x 5 pairs). The related
    lists hold ``related x unrelated`` pairs in ``itertools.product`` order.

    SELECT's ``random.sample(node.queries, 25 - n)`` raises when the target has fewer training
    questions (leaf atoms: 20, compositions: 10); here all of them are taken instead.
    """
    major, minor, dev = SELECT_STEERING_SIZES
    need = major + minor + dev
    rng = random.Random(seed)
    _, desc_pool, hard_pool, far_pool = _select_sides(bench, target)
    own = [LabelledQuestion(q, target, "target") for q in training_questions(bench, target)]

    def draw(hard: bool):
        pos = _sample_queries(rng, desc_pool, minor + dev)
        pos += rng.sample(own, min(need - len(pos), len(own)))
        if len(pos) > need:
            pos = rng.sample(pos, need)
        neg = _sample_queries(rng, hard_pool, need if hard else minor + dev)
        neg += _sample_queries(rng, far_pool, need - len(neg))
        if len(neg) > need:
            neg = rng.sample(neg, need)
        return pos[:-dev], pos[-dev:], neg[:-dev], neg[-dev:]

    pos, _, neg, _ = draw(False)
    state, flips = [False] * (len(pos) * len(neg)), []
    for _ in range(n_vectors):
        state = [s != (rng.random() >= 0.5) for s in state]
        flips.append("".join("1" if s else "0" for s in state))
    _, val_pos, _, val_neg = draw(True)
    return TargetData(
        target=target,
        related=pos,
        unrelated=neg,
        val_related=val_pos,
        val_unrelated=val_neg,
        select={"mixture": "steering", "flips": flips},
    )
