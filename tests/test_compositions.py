"""Populating relation templates, linking compositions by IS-A, pruning."""

import pytest

from taxonomy_fixtures import hand_taxonomy
from workbench.errors import ConfigError
from workbench.taxonomy.compositions import (CompositionParams, RelationTemplate, SlotRule, compose,
                                             slot_fillers)
from workbench.taxonomy.model import Concept, Taxonomy, UnknownConceptError


def test_slot_fillers_follow_flow_and_exclude():
    t = hand_taxonomy()
    assert slot_fillers(t, SlotRule("water")) == ["water", "river", "lake"]
    assert slot_fillers(t, SlotRule("water", flow=("descendants",))) == ["river", "lake"]
    assert slot_fillers(t, SlotRule("water", exclude=("river",))) == ["water", "lake"]
    assert "nile" in slot_fillers(t, SlotRule("water", instances=True))
    with pytest.raises(ConfigError, match="unsupported flow"):
        slot_fillers(t, SlotRule("water", flow=("ancestors",)))
    with pytest.raises(UnknownConceptError):
        slot_fillers(t, SlotRule("ocean"))


def test_compositions_are_linked_by_constituent_isa():
    t = hand_taxonomy()
    tpl = RelationTemplate("{} near {}", (SlotRule("mountain"), SlotRule("water")))
    comp = compose(t, [tpl], CompositionParams(branching=(4,), max_depth=5))
    # all 2 x 3 pairs exist
    assert len(comp) == 6
    top = comp["mountain#water"]
    assert top.parent is None and top.name == "mountains near bodies of water"
    assert top.constituents == ("mountain", "water") and top.kind == "composition"
    # (volcano, river) has two candidate parents (mountain#river at depth 1, volcano#water at
    # depth 1): equal depth, so the first slot's parent wins
    assert comp.parent("volcano#river") == "mountain#river"
    assert comp.parent("mountain#river") == "mountain#water"
    assert comp.parent("volcano#water") == "mountain#water"


def test_deeper_parent_wins():
    # slot 2 has a deeper chain, so (volcano, river)'s candidate via slot 2 is deeper
    concepts = [Concept("m", "mountain"), Concept("v", "volcano", parent="m"),
                Concept("w", "water"), Concept("s", "stream", parent="w"), Concept("r", "river", parent="s")]
    t = Taxonomy.from_concepts(concepts)
    comp = compose(t, [RelationTemplate("{} near {}", (SlotRule("m"), SlotRule("w")))],
                   CompositionParams(branching=(4,), max_depth=9))
    # candidates of v#r: m#r (depth 2) and v#s (depth 2): tie -> first slot; v#s: m#s (1), v#w (1)
    assert comp.parent("v#r") == "m#r"
    assert comp.level("v#r") == 3


def test_pruning_keeps_at_most_n_children_preferring_deep_subtrees():
    concepts = [Concept("a", "art")] + [Concept(f"a{i}", f"art{i}", parent="a") for i in range(6)]
    concepts += [Concept("a0x", "deep art", parent="a0"), Concept("a0xy", "deeper art", parent="a0x"),
                 Concept("a0xyz", "deepest art", parent="a0xy")]
    concepts += [Concept("p", "person")]
    t = Taxonomy.from_concepts(concepts)
    comp = compose(t, [RelationTemplate("{} about {}", (SlotRule("a"), SlotRule("p")))],
                   CompositionParams(branching=(2,), prefer_depth=3, max_depth=9, seed=1))
    kids = comp.children("a#p")
    assert len(kids) == 2
    assert "a0#p" in kids  # the only child whose subtree reaches depth 3
    assert comp.level("a0xyz#p") == 4


def test_template_slot_count_must_match():
    with pytest.raises(ConfigError, match="has 2 slots but 1 components"):
        RelationTemplate("{} about {}", (SlotRule("a"),))
