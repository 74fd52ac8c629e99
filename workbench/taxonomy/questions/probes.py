"""True/False IS-A probes: does a model know that a concept is a kind of another (SELECT's
generalization-error analysis)."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.taxonomy.model import Concept, Taxonomy
from workbench.taxonomy.questions.sets import seeded_rng

# ---------------------------------------------------------------------------------------------
# Relation probes


@dataclass(frozen=True)
class RelationProbe:
    """A True/False statement that ``concept`` IS-A ``other``; ``expected`` is the taxonomy's truth."""

    concept_id: str
    other_id: str
    statement: str
    expected: bool

    @property
    def prompt(self) -> str:
        return (
            "Is the following statement true or false? Reply with exactly one word, True or "
            f"False.\nStatement: {self.statement}"
        )


def isa_statement(concept: Concept, other: Concept) -> str:
    """The IS-A statement "``concept`` belongs under ``other``", naming both as prompts do (a class
    by its plural phrase, "Rivers"; an instance or a composition by its name).

    As in SELECT's concept-association probe, one relation covers an instance, a subtype and a
    subcategory, so the same sentence serves instances, classes and compositions; its modal verb
    agrees with singular and plural subjects alike ("Rivers can be classified as ..."), so the
    plural names of SELECT's release stay grammatical.
    """
    text = (
        f"{concept.phrase} can be classified as a member, a subtype or a subcategory of "
        f"{other.phrase}."
    )
    return text[0].upper() + text[1:]


def relation_probes(
    taxonomy: Taxonomy, concept_id: str, negatives: int = 1, seed: int = 0
) -> list[RelationProbe]:
    """IS-A probes between ``concept_id`` and each of its proper ancestors (expected True), plus
    ``negatives`` probes per ancestor against non-ancestors at the same level (expected False).

    Roots are skipped as "other": "every river is a kind of places" is not a fair question.
    """
    c = taxonomy[concept_id]
    rng = seeded_rng(seed, concept_id)
    probes = []
    for anc in taxonomy.ancestors(concept_id):
        if taxonomy[anc].parent is None:
            continue
        probes.append(RelationProbe(concept_id, anc, isa_statement(c, taxonomy[anc]), True))
        level = taxonomy.level(anc)
        others = sorted(
            x
            for x in taxonomy.unrelated(concept_id)
            if taxonomy.level(x) == level and taxonomy[x].kind != "instance"
        )
        for o in rng.sample(others, min(negatives, len(others))):
            probes.append(RelationProbe(concept_id, o, isa_statement(c, taxonomy[o]), False))
    return probes
