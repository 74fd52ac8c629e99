"""Taxonomy queries (D, A, S, levels, paths) and validation errors."""

import json

import pytest

from taxonomy_fixtures import hand_taxonomy
from workbench.taxonomy.model import (
    Concept,
    Taxonomy,
    TaxonomyError,
    UnknownConceptError,
)


def test_descendants_ancestors_siblings():
    t = hand_taxonomy()
    assert set(t.descendants("water")) == {"river", "nile", "danube", "lake"}
    assert t.descendants("nile") == []
    assert t.ancestors("nile") == ["river", "water", "places"]
    assert t.ancestors("places") == []
    assert t.siblings("river") == ["lake"]
    assert t.siblings("water") == ["mountain"]
    assert t.siblings("places") == ["people"]  # roots share a virtual parent (SELECT)
    assert set(t.siblings("nile")) == {"danube"}


def test_levels_paths_and_depth():
    t = hand_taxonomy()
    assert t.level("places") == 0 and t.level("river") == 2 and t.level("einstein") == 3
    assert t.path("nile") == ["places", "water", "river", "nile"]
    assert t.max_depth == 3
    assert t.subtree_depth("places") == 3 and t.subtree_depth("nile") == 0
    assert t.root_of("einstein") == "people"
    assert set(t.leaves()) == {"nile", "danube", "lake", "volcano", "einstein"}
    assert set(t.roots) == {"places", "people"}
    assert "river" not in t.unrelated("water") and "places" not in t.unrelated("water")
    assert "scientist" in t.unrelated("water")


def test_unknown_concept_names_it_and_suggests():
    t = hand_taxonomy()
    with pytest.raises(UnknownConceptError, match="unknown concept id 'rivr'.*'river'"):
        t.descendants("rivr")
    with pytest.raises(UnknownConceptError, match="did you mean 'nile'"):
        t["Nile"]  # a name, not an id


def test_save_and_load_roundtrip(tmp_path):
    t = hand_taxonomy()
    path = t.save(tmp_path / "t.json")
    back = Taxonomy.load(path)
    assert back.to_json() == t.to_json()
    assert back.descendants("water") == t.descendants("water")


@pytest.mark.parametrize(
    "concepts, message",
    [
        ([Concept("a", "A"), Concept("a", "B")], "duplicate concept id 'a'"),
        ([Concept("a", "A", parent="ghost")], "unknown parent 'ghost'"),
        ([Concept("a", "  ")], "'a' has an empty name"),
        ([Concept("", "A")], "empty id"),
        ([Concept("a", "A", kind="thing")], "kind 'thing'"),
        (
            [Concept("r", "R"), Concept("a", "A", parent="b"), Concept("b", "B", parent="a")],
            "cycle in parents",
        ),
        ([Concept("a", "A", parent="a")], "cycle in parents: a -> a"),
    ],
)
def test_validation_errors(concepts, message):
    with pytest.raises(TaxonomyError, match=message):
        Taxonomy.from_concepts(concepts)


def test_malformed_files_fail_with_the_path(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TaxonomyError, match="bad.json: invalid JSON at line 1"):
        Taxonomy.load(bad)
    bad.write_text(json.dumps({"schema_version": 99, "concepts": []}))
    with pytest.raises(TaxonomyError, match="schema_version 99 is not supported"):
        Taxonomy.load(bad)
    bad.write_text(
        json.dumps({"schema_version": 1, "concepts": [{"id": "a", "name": "A", "colour": "red"}]})
    )
    with pytest.raises(TaxonomyError, match="unknown fields"):
        Taxonomy.load(bad)
    bad.write_text(
        json.dumps({"schema_version": 1, "concepts": [{"id": "a", "name": "A", "parent": "zz"}]})
    )
    with pytest.raises(TaxonomyError, match="bad.json: concept 'a' has unknown parent 'zz'"):
        Taxonomy.load(bad)
    with pytest.raises(TaxonomyError, match="no taxonomy file"):
        Taxonomy.load(tmp_path / "missing.json")


def test_find_matches_names_and_ids():
    t = hand_taxonomy()
    assert [c.id for c in t.find("riv")] == ["river"]
    assert [c.id for c in t.find("EINSTEIN")] == ["einstein"]
