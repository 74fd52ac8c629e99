"""YAGO (Turtle) and SELECT (released JSON) importers on fixtures of the published shapes."""

import json

import pytest

from select_release import write_release
from workbench.errors import WorkbenchError
from workbench.taxonomy import load_benchmark
from workbench.taxonomy.builder import BuildParams, build_taxonomy
from workbench.taxonomy.compositions import CompositionParams, compose
from workbench.taxonomy.model import TaxonomyError
from workbench.taxonomy.select_format import (
    import_select,
    load_select_atoms,
    load_select_compositions,
    read_hints,
    regenerate_compositions,
    same_structure,
)
from workbench.taxonomy.yago import YAGO_ROOTS, YagoGraph

TURTLE = """
@prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix schema: <http://schema.org/> .
@prefix yago: <http://yago-knowledge.org/resource/> .

schema:Place rdfs:label "place"@en .
yago:Body_of_water rdfs:subClassOf schema:Place ; rdfs:label "body of water"@en ;
    rdfs:comment "a significant accumulation of water"@en .
yago:River rdfs:subClassOf yago:Body_of_water ; rdfs:label "river"@en ; rdfs:label "Fluss"@de .
yago:Lake rdfs:subClassOf yago:Body_of_water .
yago:Nile rdf:type yago:River ; rdfs:label "Nile"@en .
yago:Danube rdf:type yago:River .
yago:Lake_Baikal rdf:type yago:Lake .
yago:Mountain rdfs:subClassOf schema:Place .
schema:Person rdfs:label "person"@en .
yago:Scientist rdfs:subClassOf schema:Person .
yago:Physicist rdfs:subClassOf yago:Scientist .
yago:Albert_Einstein rdf:type yago:Physicist .
"""


def test_yago_graph_reads_turtle_and_builds_with_select_recipe(tmp_path):
    f = tmp_path / "yago-taxonomy.ttl"
    f.write_text(TURTLE)
    g = YagoGraph([f])
    river = "http://yago-knowledge.org/resource/River"
    assert g.name(river) == "river"  # English label wins over German
    assert g.name("http://yago-knowledge.org/resource/Lake") == "Lake"  # from the local name
    assert g.name("http://yago-knowledge.org/resource/Danube") == "Danube"
    assert g.gloss("http://yago-knowledge.org/resource/Body_of_water").startswith("a significant")
    assert set(g.instances(river)) == {
        "http://yago-knowledge.org/resource/Nile",
        "http://yago-knowledge.org/resource/Danube",
    }
    roots = [r for r in YAGO_ROOTS if r.name in ("places", "people")]
    t = build_taxonomy(g, roots, BuildParams(min_path=3), id_of=g.node_id)
    assert t.roots == ["schema:Person", "schema:Place"]  # YAGO_ROOTS order
    assert t.path("yago:Nile") == ["schema:Place", "yago:Body_of_water", "yago:River", "yago:Nile"]
    assert t["yago:Nile"].kind == "instance"
    assert "yago:Mountain" not in t  # path of length 1: dropped
    assert t.path("yago:Albert_Einstein")[0] == "schema:Person"
    assert t["schema:Place"].name == "places"


def test_yago_bad_files_are_named(tmp_path):
    with pytest.raises(WorkbenchError, match="no YAGO file"):
        YagoGraph([tmp_path / "missing.ttl"])
    bad = tmp_path / "bad.ttl"
    bad.write_text("this is not turtle <<<")
    with pytest.raises(WorkbenchError, match="bad.ttl: not valid Turtle"):
        YagoGraph([bad])


def test_select_release_imports_with_training_questions_examples_and_answers(tmp_path):
    bench = import_select(write_release(tmp_path))
    atoms, comps = bench.atomic, bench.compositions
    assert atoms.path("yago:Nile") == [
        "schema:Place",
        "yago:Body_of_water",
        "yago:River",
        "yago:Nile",
    ]
    assert atoms["yago:Nile"].kind == "instance" and atoms["yago:River"].kind == "class"
    assert atoms["schema:Place"].root == "places" and atoms["yago:Urea"].root == "products"
    # names as released: never pluralised again, singular ones kept singular
    assert atoms["yago:River"].phrase == "Rivers" and atoms["yago:River"].singular == "River"
    assert atoms["yago:Chemical_substance"].phrase == "Chemical Substance"
    river = bench.questions["yago:River"]
    assert (len(river.train), len(river.validation), len(river.eval)) == (15, 5, 30)
    assert set(river.train + river.validation) == {
        f"Could you explain Rivers from angle {i}?" for i in range(20)
    }
    assert not set(river.train) & set(river.eval)
    cid = "dumping-in/yago:Fertilizer#yago:River"
    qs = bench.questions[cid]
    assert (len(qs.train), len(qs.validation), len(qs.eval)) == (7, 3, 20)
    assert comps[cid].name == "Dumping Fertilizers in Rivers"  # as released
    assert comps[cid].parent == "dumping-in/yago:Chemical_substance#yago:River"
    # two relations over the same pair stay apart
    assert "damage-from-production-of-to/yago:Fertilizer#yago:River" in comps
    assert bench.examples["yago:River"][0].response == "Abstained"
    assert bench.examples["yago:River"][1].response == "Magma rises through the crust."
    assert len(bench.examples[cid]) == 1
    answer = bench.answers["Could you explain Rivers from angle 0?"]
    assert (answer.concept_id, answer.abstain, answer.comply) == (
        "yago:River",
        "Abstained",
        "Here is a fact about Rivers.",
    )
    assert bench.manifest["compositions_regenerate_from_hints"] is True
    assert "atoms/data.train.json" in bench.manifest["release_files"]


def test_select_root_and_composition_specificity_sets_follow_select(tmp_path):
    bench = import_select(write_release(tmp_path))
    # top-level concepts are siblings of each other (SELECT's virtual root)
    assert bench.near_concepts("schema:Place") == {
        "schema:CreativeWork": "sibling",
        "schema:Product": "sibling",
    }
    assert bench.near_concepts("yago:River") == {
        "yago:Body_of_water": "parent",
        "schema:Place": "ancestor",
        "yago:Lake": "sibling",
    }
    # a composition: its taxonomy ancestors, every composition of its relation over ancestors of
    # its constituents, and its siblings
    near = bench.near_concepts("about/yago:Documentary#yago:Nile")
    assert near == {
        "about/yago:Documentary#yago:River": "parent",
        "about/schema:Movie#yago:River": "ancestor",
        "about/schema:CreativeWork#yago:River": "ancestor",
        "about/schema:CreativeWork#yago:Body_of_water": "ancestor",
        "about/schema:Movie#yago:Body_of_water": "ancestor",
    }
    # top compositions of one relation are siblings; a relation with one root gets the others
    assert bench.near_concepts("dumping-in/yago:Chemical_substance#yago:River") == {
        "dumping-in/yago:Chemical_substance#yago:Lake": "sibling"
    }
    lone = bench.near_concepts("damage-from-production-of-to/yago:Chemical_substance#yago:River")
    assert set(lone.values()) == {"other_relation"}
    assert len(lone) == len(bench.compositions) - 2


def test_select_compositions_regenerate_from_hints(tmp_path):
    root = write_release(tmp_path)
    atoms = load_select_atoms(root)
    comps = load_select_compositions(root, atoms.taxonomy)
    assert [t.components[0].exclude_leaves for t in comps.templates] == [True, False, False]
    assert comps.templates[0].components[1].exclude == ("yago:Lake",)
    regenerated = regenerate_compositions(atoms.taxonomy, comps)
    assert same_structure(regenerated, comps.taxonomy) == []
    # the full population of the templates holds both relations over the shared pairs
    full = compose(atoms.taxonomy, comps.templates, CompositionParams(branching=(9,), max_depth=9))
    assert {
        "dumping-in/yago:Fertilizer#yago:River",
        "damage-from-production-of-to/yago:Fertilizer#yago:River",
    } <= set(full.concepts)
    assert not any(
        c.constituents[0] == "yago:Planet_Earth" for c in full if c.relation == "{} about {}"
    )


def test_select_without_train_file_uses_extra_queries(tmp_path):
    bench = import_select(write_release(tmp_path, with_train_file=False), allow_partial=True)
    assert len(bench.questions["yago:River"].train) == 15
    assert bench.answers == {}


def test_import_select_command_writes_a_benchmark_directory(tmp_path):
    from workbench.cli import main

    root = write_release(tmp_path / "clone")
    assert main(["taxonomy", "import-select", str(root), "--out", str(tmp_path / "bench")]) == 0
    bench = load_benchmark(tmp_path / "bench")
    assert len(bench.atomic) == 17 and len(bench.compositions) == 12
    assert bench.manifest["files"]["examples"]["path"] == "examples.jsonl"
    assert bench.examples.keys() == import_select(root).examples.keys()
    assert bench.answers == import_select(root).answers
    assert bench.content_hash() == bench.manifest["content_hash"]
    assert (
        main(["taxonomy", "import-select", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")])
        == 2
    )


def test_select_malformed_files_are_named(tmp_path):
    root = write_release(tmp_path)
    atoms = root / "data" / "SELECT" / "atoms"
    data = json.loads((atoms / "data.json").read_text())
    data["yago:River"]["context"]["ids"] = ["schema:Place"]
    (atoms / "data.json").write_text(json.dumps(data))
    with pytest.raises(TaxonomyError, match="'yago:River' has context"):
        load_select_atoms(root)
    (atoms / "data.json").write_text(json.dumps({"yago:Nowhere": {"queries": ["q?"]}}))
    with pytest.raises(
        TaxonomyError, match="questions for 'yago:Nowhere', which the taxonomy lacks"
    ):
        load_select_atoms(root)
    (atoms / "data.train.json").write_text("")
    with pytest.raises(TaxonomyError, match="empty file"):
        load_select_atoms(root)
    (atoms / "taxonomy_plus.json").write_text(json.dumps({"x": {"children": {}}}))
    with pytest.raises(TaxonomyError, match="node 'x' lacks a 'name'"):
        load_select_atoms(root)
    with pytest.raises(TaxonomyError, match="no SELECT release under"):
        load_select_atoms(tmp_path / "elsewhere")
    hints = root / "data" / "SELECT" / "compositions" / "hints.json"
    hints.write_text(
        json.dumps(
            [
                {
                    "relation": "{} about {}",
                    "components": [
                        {"concept": "schema:CreativeWork", "exclude": "roots"},
                        {"concept": "schema:Place"},
                    ],
                }
            ]
        )
    )
    with pytest.raises(
        TaxonomyError, match="hints.json: .*exclude must be a list of ids or 'leaves'"
    ):
        read_hints(hints)
