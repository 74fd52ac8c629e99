"""A concept at a glance: its place in the taxonomy and a few of its questions (what the
``taxonomy show`` command prints and the concept picker shows)."""

from __future__ import annotations

from typing import Any

from workbench.taxonomy.benchmark import Benchmark


def concept_summary(
    bench: Benchmark, concept_id: str, n_questions: int = 3, n_listed: int = 8
) -> dict[str, Any]:
    """What a researcher wants to see before picking a target: its place and its questions."""
    tax = bench.taxonomy_of(concept_id)
    c = tax[concept_id]
    desc = tax.descendants(concept_id)
    # QuestionBank has no get(); its sets mapping does (as techniques.base reads it)
    qs = bench.questions.sets.get(concept_id)
    return {
        "id": c.id,
        "name": c.name,
        "kind": c.kind,
        "level": tax.level(concept_id),
        "gloss": c.gloss,
        "path": [tax[x].name for x in tax.path(concept_id)],
        "ancestors": [tax[x].name for x in tax.ancestors(concept_id)],
        "siblings": [tax[x].name for x in tax.siblings(concept_id)],
        "children": [tax[x].name for x in tax.children(concept_id)],
        "n_descendants": len(desc),
        "descendants": [tax[x].name for x in desc[:n_listed]],
        "constituents": [bench.concept(x).name for x in c.constituents],
        "n_questions": len(qs) if qs else 0,
        "sample_questions": (
            qs.train[:n_questions] if qs and qs.train else (qs.eval[:n_questions] if qs else [])
        ),
    }
