"""SELECT's recipe on small graphs: depth limit, instances at leaves, short paths dropped."""

import pytest

from taxonomy_fixtures import DictGraph
from workbench.errors import ConfigError
from workbench.taxonomy.builder import BuildParams, RootSpec, build_taxonomy

GRAPH = DictGraph(
    subclasses={
        "thing": ["water", "rock", "short"],
        "water": ["river", "lake"],
        "river": ["big_river"],
        "lake": [],
        "rock": ["mountain"],
        "mountain": ["volcano"],
        "volcano": ["shield_volcano"],
        "shield_volcano": ["tiny_volcano"],
        "short": [],
    },
    instances={
        "big_river": ["Nile", "Amazon", "Yangtze"],
        "lake": ["Baikal"],
        "short": ["X"],
        "tiny_volcano": ["Mauna Loa"],
    },
)


def build(**kw):
    return build_taxonomy(GRAPH, [RootSpec("thing", "things", node="thing")], BuildParams(**kw))


def test_instances_are_sampled_at_leaf_classes_only():
    t = build(max_depth=6, instances_per_leaf=2, min_path=1, branching=(5,))
    assert t["big_river"].kind == "class"
    inst = [c.id for c in t if c.kind == "instance"]
    assert len([i for i in inst if t.parent(i) == "big_river"]) == 2
    assert all(t[t.parent(i)].kind == "class" and t.children(t.parent(i)) for i in inst)


def test_depth_limit_cuts_the_descent():
    t = build(max_depth=3, instances_per_leaf=1, min_path=1, branching=(5,))
    # volcano sits at level 3 and becomes a leaf class: its own instances (none) are sampled
    assert "shield_volcano" not in t
    assert t.max_depth <= 4  # a leaf class at the depth limit may still hold instances


def test_short_paths_are_dropped():
    t = build(max_depth=6, instances_per_leaf=5, min_path=3, branching=(5,))
    # thing -> short -> X has length 2 < 3: dropped; thing -> water -> lake -> Baikal survives
    assert "short" not in t and "X" not in t
    assert "Baikal" in t
    for leaf in t.leaves():
        assert t.level(leaf) >= 3


def test_branching_limits_children_and_seed_is_deterministic():
    a = build(branching=(1,), min_path=1)
    assert all(len(a.children(c.id)) <= 1 or a[a.children(c.id)[0]].kind == "instance" for c in a)
    assert build(seed=3).to_json() == build(seed=3).to_json()


def test_anchored_roots_put_anchors_under_the_root():
    t = build_taxonomy(
        GRAPH,
        [RootSpec("root:places", "places", anchors=("water", "rock"))],
        BuildParams(min_path=3),
    )
    assert t.roots == ["root:places"]
    assert set(t.children("root:places")) == {"water", "rock"}


def test_familiar_children_are_preferred():
    g = DictGraph(
        {"r": ["a", "b", "c"], "a": ["a1"], "b": ["b1"], "c": ["c1"]},
        {"a1": ["x"], "b1": ["y"], "c1": ["z"]},
        familiarity={"b": 10.0},
    )
    t = build_taxonomy(g, [RootSpec("r", "r", node="r")], BuildParams(branching=(1,), min_path=1))
    assert t.children("r") == ["b"]


@pytest.mark.parametrize(
    "bad",
    [
        {"max_depth": 0},
        {"min_path": 0},
        {"instances_per_leaf": -1},
        {"branching": ()},
        {"branching": (0,)},
    ],
)
def test_bad_parameters_are_rejected(bad):
    with pytest.raises(ConfigError):
        BuildParams(**bad)


def test_root_spec_needs_exactly_one_of_node_or_anchors():
    with pytest.raises(ConfigError):
        RootSpec("x", "x")
    with pytest.raises(ConfigError):
        RootSpec("x", "x", anchors=("a",), node="b")
