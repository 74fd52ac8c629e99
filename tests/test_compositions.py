"""Populating relation templates, linking compositions by IS-A, pruning."""

import pytest

from taxonomy_fixtures import hand_taxonomy
from workbench.errors import ConfigError
from workbench.taxonomy.compositions import (
    CompositionParams,
    RelationTemplate,
    SlotRule,
    compose,
    slot_fillers,
)
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
    top = comp["near/mountain#water"]
    assert top.parent is None and top.name == "mountains near bodies of water"
    assert top.constituents == ("mountain", "water") and top.kind == "composition"
    # (volcano, river) has two candidate parents (mountain#river at depth 1, volcano#water at
    # depth 1): equal depth, so the first slot's parent wins
    assert comp.parent("near/volcano#river") == "near/mountain#river"
    assert comp.parent("near/mountain#river") == "near/mountain#water"
    assert comp.parent("near/volcano#water") == "near/mountain#water"


def test_deeper_parent_wins():
    # slot 2 has a deeper chain, so (volcano, river)'s candidate via slot 2 is deeper
    concepts = [
        Concept("m", "mountain"),
        Concept("v", "volcano", parent="m"),
        Concept("w", "water"),
        Concept("s", "stream", parent="w"),
        Concept("r", "river", parent="s"),
    ]
    t = Taxonomy.from_concepts(concepts)
    comp = compose(
        t,
        [RelationTemplate("{} near {}", (SlotRule("m"), SlotRule("w")))],
        CompositionParams(branching=(4,), max_depth=9),
    )
    # candidates of v#r: m#r (depth 2) and v#s (depth 2): tie -> first slot; v#s: m#s (1), v#w (1)
    assert comp.parent("near/v#r") == "near/m#r"
    assert comp.level("near/v#r") == 3


def test_pruning_keeps_at_most_n_children_preferring_deep_subtrees():
    concepts = [Concept("a", "art")] + [Concept(f"a{i}", f"art{i}", parent="a") for i in range(6)]
    concepts += [
        Concept("a0x", "deep art", parent="a0"),
        Concept("a0xy", "deeper art", parent="a0x"),
        Concept("a0xyz", "deepest art", parent="a0xy"),
    ]
    concepts += [Concept("p", "person")]
    t = Taxonomy.from_concepts(concepts)
    comp = compose(
        t,
        [RelationTemplate("{} about {}", (SlotRule("a"), SlotRule("p")))],
        CompositionParams(branching=(2,), prefer_depth=3, max_depth=9, seed=1),
    )
    kids = comp.children("about/a#p")
    assert len(kids) == 2
    assert "about/a0#p" in kids  # the only child whose subtree reaches depth 3
    assert comp.level("about/a0xyz#p") == 4


def test_template_slot_count_must_match():
    with pytest.raises(ConfigError, match="has 2 slots but 1 components"):
        RelationTemplate("{} about {}", (SlotRule("a"),))


def test_two_relations_over_one_pair_get_distinct_ids():
    t = hand_taxonomy()
    comp = compose(
        t,
        [
            RelationTemplate("{} near {}", (SlotRule("mountain"), SlotRule("water"))),
            RelationTemplate("Pictures of {} by {}", (SlotRule("mountain"), SlotRule("water"))),
        ],
        CompositionParams(branching=(4,), max_depth=5),
    )
    assert "near/mountain#water" in comp and "pictures-of-by/mountain#water" in comp
    assert comp["pictures-of-by/mountain#water"].name == "Pictures of mountains by bodies of water"
    assert comp.siblings("near/mountain#water") == []  # roots of different relations
    with pytest.raises(ConfigError, match="share the id prefix 'near'"):
        compose(
            t,
            [
                RelationTemplate("{} near {}", (SlotRule("mountain"), SlotRule("water"))),
                RelationTemplate("{} NEAR {}", (SlotRule("mountain"), SlotRule("lake"))),
            ],
        )


def test_select_hint_rules_exclude_leaves_and_admit_instances():
    t = hand_taxonomy()
    leaves = SlotRule.from_select(
        {"concept": "places", "flow": ["self", "descendants"], "exclude": "leaves"}
    )
    assert leaves.exclude_leaves and leaves.exclude == ()
    assert slot_fillers(t, leaves) == [
        "places",
        "water",
        "mountain",
        "river",
    ]  # no lake, volcano, nile
    listed = SlotRule.from_select(
        {"concept": "water", "flow": ["descendants"], "exclude": ["lake"]}
    )
    assert slot_fillers(t, listed) == ["river", "nile", "danube"]  # instances fill SELECT's slots
    with pytest.raises(ConfigError, match="exclude must be a list of ids or 'leaves'"):
        SlotRule.from_select({"concept": "water", "exclude": "rivers"})
    with pytest.raises(ConfigError, match="exclude must be a list of concept ids"):
        SlotRule("water", exclude="leaves")


def test_only_keeps_exactly_the_listed_compositions_linked_by_isa():
    t = hand_taxonomy()
    tpl = RelationTemplate("{} near {}", (SlotRule("mountain"), SlotRule("water")))
    only = [
        ("{} near {}", "mountain", "water"),
        ("{} near {}", "volcano", "river"),
        ("{} near {}", "mountain", "river"),
    ]
    comp = compose(t, [tpl], CompositionParams(branching=(1,), max_depth=1), only=only)
    assert sorted(comp.concepts) == [
        "near/mountain#river",
        "near/mountain#water",
        "near/volcano#river",
    ]
    assert comp.parent("near/volcano#river") == "near/mountain#river"  # no cut by branching/depth
    with pytest.raises(ConfigError, match="break the templates' slot rules"):
        compose(t, [tpl], only=only + [("{} near {}", "river", "mountain")])
