"""YAGO (Turtle) and SELECT (released JSON) importers on fixtures of the published shapes."""

import json

import pytest

from workbench.errors import WorkbenchError
from workbench.taxonomy.builder import BuildParams, build_taxonomy
from workbench.taxonomy.model import TaxonomyError
from workbench.taxonomy.select_format import load_select_atoms, load_select_compositions
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
    assert set(g.instances(river)) == {"http://yago-knowledge.org/resource/Nile",
                                       "http://yago-knowledge.org/resource/Danube"}
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


def write_select(tmp_path):
    atoms = tmp_path / "atoms"
    comps = tmp_path / "compositions"
    atoms.mkdir()
    comps.mkdir()
    tree = {"schema:Organization": {"name": "organizations", "children": {
        "yago:Bank": {"name": "banks", "children": {
            "yago:Central_bank": {"name": "central banks", "children": {
                "yago:Bundesbank": {"name": "Bundesbank"}}}}}}}}
    (atoms / "taxonomy_plus.json").write_text(json.dumps(tree))
    data = {cid: {"concept": cid, "name": name, "context": {"ids": [], "names": []},
                  "queries": [f"Question {i} about {name}?" for i in range(30)]}
            for cid, name in [("schema:Organization", "organizations"), ("yago:Bank", "banks"),
                              ("yago:Central_bank", "central banks"), ("yago:Bundesbank", "Bundesbank")]}
    (atoms / "data.json").write_text(json.dumps(data))
    ctree = {"{} about {}": {"schema:CreativeWork#schema:Person": {
        "name": "creative works about people", "names": ["creative works", "people"],
        "ids": ["schema:CreativeWork", "schema:Person"], "children": {
            "yago:Book#schema:Person": {"name": "books about people", "names": ["books", "people"],
                                        "ids": ["yago:Book", "schema:Person"], "children": {}}}}}}
    (comps / "taxonomy_plus.json").write_text(json.dumps(ctree))
    cdata = {"{} about {}": {cid: {"relation": "{} about {}", "concept": cid, "name": n,
                                   "compositions": {"ids": cid.split("#"), "names": []},
                                   "queries": [f"Q{i} on {n}?" for i in range(30)]}
                             for cid, n in [("schema:CreativeWork#schema:Person", "creative works about people"),
                                            ("yago:Book#schema:Person", "books about people")]}}
    (comps / "data.json").write_text(json.dumps(cdata))
    hints = [{"relation": "{} about {}", "components": [
        {"concept": "schema:CreativeWork", "flow": ["self", "descendants"]},
        {"concept": "schema:Person", "flow": ["self", "descendants"], "exclude": ["yago:Fictional"]}]}]
    (comps / "hints.json").write_text(json.dumps(hints))
    return tmp_path


def test_select_atoms_import(tmp_path):
    t, bank = load_select_atoms(write_select(tmp_path))
    assert t.path("yago:Bundesbank") == ["schema:Organization", "yago:Bank", "yago:Central_bank", "yago:Bundesbank"]
    assert t["yago:Bundesbank"].kind == "instance" and t["yago:Bank"].kind == "class"
    assert t["schema:Organization"].root == "organizations"
    assert len(bank["yago:Bank"].eval) == 30 and bank["yago:Bank"].train == []


def test_select_compositions_import(tmp_path):
    t, bank, templates = load_select_compositions(write_select(tmp_path))
    child = t["yago:Book#schema:Person"]
    assert child.parent == "schema:CreativeWork#schema:Person"
    assert child.constituents == ("yago:Book", "schema:Person") and child.relation == "{} about {}"
    assert len(bank["yago:Book#schema:Person"].eval) == 30
    assert templates[0].components[1].exclude == ("yago:Fictional",)


def test_select_malformed_files_are_named(tmp_path):
    root = write_select(tmp_path)
    (root / "atoms" / "data.json").write_text(json.dumps({"yago:Nowhere": {"queries": ["q?"]}}))
    with pytest.raises(TaxonomyError, match="questions for 'yago:Nowhere', which the taxonomy lacks"):
        load_select_atoms(root)
    (root / "atoms" / "taxonomy_plus.json").write_text(json.dumps({"x": {"children": {}}}))
    with pytest.raises(TaxonomyError, match="node 'x' lacks a 'name'"):
        load_select_atoms(root)
    with pytest.raises(TaxonomyError, match="SELECT file missing"):
        load_select_atoms(tmp_path / "elsewhere")
