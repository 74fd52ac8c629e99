"""SELECT's choice of evaluation questions, reproduced draw for draw.

SELECT asks every target question of a concept (its released ``queries``, in order) and samples
the generalization and specificity questions with Python's ``random``: the candidate concepts
are sorted (atoms by id; compositions by (relation template, released ``a#b`` id)), their
questions pooled in that order, and ``random.sample(pool, k)`` drawn right after
``random.seed(seed)`` (all of the pool when it holds at most ``k``). The seed is the run's
``--seed``; SELECT's released results were made with 20240828 (found by search: its derived run
seeds are the released ones, 145520 ... 561694), and with it this module draws exactly the
released question ids for every concept (checked on the release; see docs/select.md).

``k`` is SELECT's ``num_queries``: the number of evaluation questions per concept of the
partition (30 for atoms, 20 for compositions).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.taxonomy.benchmark import Benchmark

#: The seed of SELECT's released runs (its ``generate.py --seed``).
SELECT_RUN_SEED = 20240828
#: How many run seeds SELECT derives from it (``--num-seeds``).
SELECT_NUM_SEEDS = 5


def run_seeds(seed: int = SELECT_RUN_SEED, n: int = SELECT_NUM_SEEDS) -> tuple[int, ...]:
    """SELECT's per-run seeds derived from its global seed (one per replication)."""
    rng = random.Random(seed)
    return tuple(rng.randint(100000 + i * 100000, 100000 + (i + 1) * 100000) for i in range(n))


def sort_key(bench: Benchmark, concept_id: str) -> tuple[str, ...]:
    """The key SELECT sorts candidate concepts by: ``(id,)`` for an atom, ``(relation template,
    released id)`` for a composition."""
    c = bench.concept(concept_id)
    if c.kind == "composition":
        return (c.relation, "#".join(c.constituents))
    return (concept_id,)


def sample_pool(bench: Benchmark, concept_ids, k: int, seed: int) -> list[tuple[str, str]]:
    """``(question, concept id)`` pairs: SELECT's ``sample_queries`` over the concepts'
    evaluation questions (sorted concepts, pooled questions, ``random.sample`` after seeding)."""
    ordered = sorted(concept_ids, key=lambda c: sort_key(bench, c))
    pool = [(q, c) for c in ordered if c in bench.questions for q in bench.questions[c].eval]
    if len(pool) <= k:
        return pool
    return random.Random(seed).sample(pool, k)


def queries_per_concept(bench: Benchmark, concept_id: str) -> int:
    """SELECT's ``num_queries`` for the concept's partition: its concepts' number of evaluation
    questions (the most common count, which every released concept has)."""
    tax = bench.taxonomy_of(concept_id)
    counts = Counter(len(bench.questions[c].eval) for c in tax.concepts if c in bench.questions)
    return counts.most_common(1)[0][0] if counts else 0


@dataclass(frozen=True)
class SelectSample:
    """The evaluation questions SELECT asks about one target, by group, as ``(question, concept
    id)`` pairs in SELECT's order."""

    target: list[tuple[str, str]]
    generalization: list[tuple[str, str]]
    specificity: list[tuple[str, str]]


def select_sample(bench: Benchmark, target: str, seed: int = SELECT_RUN_SEED) -> SelectSample:
    """SELECT's three evaluation sets for ``target``: all of its questions (abstention),
    ``num_queries`` sampled from its descendants' (generalization; none for a leaf) and from its
    specificity set's (siblings and ancestors; for compositions also the compositions of its
    constituents' ancestors, or every other relation's when it has none)."""
    tax = bench.taxonomy_of(target)
    k = queries_per_concept(bench, target)
    own = [(q, target) for q in bench.questions[target].eval[:k]]
    desc = tax.descendants(target)
    gen = sample_pool(bench, desc, k, seed) if desc else []
    spec = sample_pool(bench, list(bench.near_concepts(target)), k, seed)
    return SelectSample(own, gen, spec)
