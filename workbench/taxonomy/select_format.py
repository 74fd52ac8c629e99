"""Import SELECT's released benchmark files unchanged.

Shapes (as released):

* ``atoms/taxonomy_plus.json``: nested ``{id: {"name": str, "children": {id: {...}}}}``; ids such
  as ``schema:Organization`` or ``yago:Bank``; leaves are instances.
* ``atoms/data.json``: ``{id: {"concept", "name", "context": {"ids", "names"}, "queries": [...]}}``
  where the queries are the 30 evaluation questions.
* ``compositions/taxonomy_plus.json``: ``{relation: {id: {"name", "names", "ids", "children"}}}``,
  composition ids joining constituent ids with ``#``.
* ``compositions/data.json``: ``{relation: {id: {"relation", "concept", "name",
  "compositions": {"ids", "names"}, "queries"}}}``.
* ``compositions/hints.json``: ``[{"relation", "components": [{"concept", "flow", "exclude"?}]}]``.

The released files hold evaluation questions only; imported question sets have empty train and
validation splits (write those with a generator from ``workbench.taxonomy.questions``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from workbench.taxonomy.compositions import RelationTemplate, SlotRule
from workbench.taxonomy.model import Concept, Taxonomy, TaxonomyError
from workbench.taxonomy.questions import QuestionBank, QuestionSet


def _read(path: Path) -> Any:
    if not path.is_file():
        raise TaxonomyError(f"SELECT file missing: {path}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise TaxonomyError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None


def _root_name(cid: str, name: str) -> str:
    known = {"schema:Product": "products", "schema:Person": "people", "schema:Place": "places",
             "schema:Organization": "organizations", "schema:CreativeWork": "creative works"}
    return known.get(cid, name)


def load_select_atoms(directory: str | os.PathLike) -> tuple[Taxonomy, QuestionBank]:
    """The atomic taxonomy and its evaluation questions from ``<directory>/atoms``."""
    d = Path(directory) / "atoms"
    tree = _read(d / "taxonomy_plus.json")
    if not isinstance(tree, dict):
        raise TaxonomyError(f"{d / 'taxonomy_plus.json'}: expected an object of root concepts")
    concepts: list[Concept] = []

    def walk(cid: str, node: dict, parent: str | None, root: str, where: str) -> None:
        if not isinstance(node, dict) or "name" not in node:
            raise TaxonomyError(f"{where}: node {cid!r} lacks a 'name'")
        children = node.get("children") or {}
        kind = "class" if children or parent is None else "instance"
        concepts.append(Concept(id=cid, name=node["name"], kind=kind, parent=parent, root=root,
                                source="select"))
        for ch_id, ch in children.items():
            walk(ch_id, ch, cid, root, where)

    for cid, node in tree.items():
        walk(cid, node, None, _root_name(cid, node.get("name", cid)), str(d / "taxonomy_plus.json"))
    taxonomy = Taxonomy.from_concepts(concepts, name="select-atoms", metadata={"source": "select"})
    data = _read(d / "data.json")
    bank = QuestionBank(_question_set(cid, entry, taxonomy, d / "data.json") for cid, entry in data.items())
    return taxonomy, bank


def _question_set(cid: str, entry: dict, taxonomy: Taxonomy, where: Path) -> QuestionSet:
    if cid not in taxonomy:
        raise TaxonomyError(f"{where}: questions for {cid!r}, which the taxonomy lacks")
    queries = entry.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise TaxonomyError(f"{where}: {cid!r} has no list of string 'queries'")
    return QuestionSet(cid, eval=list(queries), generator="select")


def load_select_compositions(directory: str | os.PathLike
                             ) -> tuple[Taxonomy, QuestionBank, list[RelationTemplate]]:
    """The composition taxonomy, its questions and the relation templates (hints)."""
    d = Path(directory) / "compositions"
    forest = _read(d / "taxonomy_plus.json")
    concepts: list[Concept] = []

    def walk(cid: str, node: dict, parent: str | None, relation: str) -> None:
        if not isinstance(node, dict) or "name" not in node:
            raise TaxonomyError(f"{d / 'taxonomy_plus.json'}: composition {cid!r} lacks a 'name'")
        ids = tuple(node.get("ids") or cid.split("#"))
        concepts.append(Concept(id=cid, name=node["name"], kind="composition", parent=parent,
                                root=relation, source="select", constituents=ids, relation=relation))
        for ch_id, ch in (node.get("children") or {}).items():
            walk(ch_id, ch, cid, relation)

    for relation, tree in forest.items():
        for cid, node in tree.items():
            walk(cid, node, None, relation)
    taxonomy = Taxonomy.from_concepts(concepts, name="select-compositions",
                                      metadata={"source": "select"})
    data = _read(d / "data.json")
    sets = [_question_set(cid, entry, taxonomy, d / "data.json")
            for per_relation in data.values() for cid, entry in per_relation.items()]
    templates = []
    hints_path = d / "hints.json"
    if hints_path.is_file():
        for h in _read(hints_path):
            comps = tuple(SlotRule(concept=c["concept"], flow=tuple(c.get("flow", ["self"])),
                                   exclude=tuple(c.get("exclude", []) or []))
                          for c in h["components"])
            templates.append(RelationTemplate(h["relation"], comps))
    return taxonomy, QuestionBank(sets), templates
