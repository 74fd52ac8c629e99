"""YAGO 4.5 as a knowledge graph for the builder (Turtle files read with rdflib).

YAGO ships its class hierarchy in ``yago-taxonomy.ttl`` (``rdfs:subClassOf``) and its instances'
types among its facts (``rdf:type``). Pass the taxonomy file and a file of the type facts you
want instances from (the full facts file is large: filter it to ``rdf:type`` lines first, e.g.
``grep ' rdf:type ' yago-facts.ttl``, keeping the prefix lines). Names come from ``rdfs:label``
(English), glosses from ``rdfs:comment``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from workbench.errors import WorkbenchError
from workbench.taxonomy.builder import RootSpec

SCHEMA = "http://schema.org/"
YAGO = "http://yago-knowledge.org/resource/"

#: SELECT's five roots, as YAGO 4.5 (schema.org) classes.
YAGO_ROOTS: tuple[RootSpec, ...] = (
    RootSpec("schema:Product", "products", node=SCHEMA + "Product"),
    RootSpec("schema:Person", "people", node=SCHEMA + "Person"),
    RootSpec("schema:Place", "places", node=SCHEMA + "Place"),
    RootSpec("schema:Organization", "organizations", node=SCHEMA + "Organization"),
    RootSpec("schema:CreativeWork", "creative works", node=SCHEMA + "CreativeWork"),
)


class YagoGraph:
    """A YAGO Turtle dump as a :class:`~workbench.taxonomy.builder.KnowledgeGraph`."""

    source = "yago-4.5"

    def __init__(self, paths: Sequence[str | os.PathLike]):
        try:
            import rdflib
        except ImportError:  # pragma: no cover - rdflib is a dependency
            raise WorkbenchError("reading YAGO needs rdflib: pip install rdflib") from None
        from rdflib.namespace import RDF, RDFS

        self.graph = rdflib.Graph()
        for p in paths:
            if not os.path.isfile(p):
                raise WorkbenchError(f"no YAGO file at {p}")
            try:
                self.graph.parse(str(p), format="turtle")
            except Exception as e:  # rdflib raises parser-specific errors
                raise WorkbenchError(f"{p}: not valid Turtle: {str(e).splitlines()[0]}") from None
        self._sub: dict[str, list[str]] = {}
        self._inst: dict[str, list[str]] = {}
        for s, _, o in self.graph.triples((None, RDFS.subClassOf, None)):
            self._sub.setdefault(str(o), []).append(str(s))
        for s, _, o in self.graph.triples((None, RDF.type, None)):
            self._inst.setdefault(str(o), []).append(str(s))
        self._label = self._literals(RDFS.label)
        self._comment = self._literals(RDFS.comment)

    def _literals(self, predicate) -> dict[str, str]:
        out: dict[str, str] = {}
        for s, _, o in self.graph.triples((None, predicate, None)):
            lang = getattr(o, "language", None)
            if lang in (None, "en") and (str(s) not in out or lang == "en"):
                out[str(s)] = str(o)
        return out

    @staticmethod
    def node_id(uri: str) -> str:
        """``http://schema.org/Person`` -> ``schema:Person``; YAGO resources -> ``yago:...``."""
        for prefix, ns in (("schema", SCHEMA), ("yago", YAGO)):
            if uri.startswith(ns):
                return f"{prefix}:{uri[len(ns) :]}"
        return uri

    def name(self, node: str) -> str:
        if node in self._label:
            return self._label[node]
        local = re.split(r"[/#]", node)[-1]
        local = re.sub(r"_Q\d+$", "", local).replace("_", " ")
        return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", local).strip()

    def gloss(self, node: str) -> str:
        return self._comment.get(node, "")

    def subclasses(self, node: str) -> list[str]:
        return sorted(self._sub.get(node, []))

    def instances(self, node: str) -> list[str]:
        return sorted(self._inst.get(node, []))

    def familiarity(self, node: str) -> float:
        """More instances and subclasses: a more familiar class."""
        return float(len(self._inst.get(node, [])) + len(self._sub.get(node, [])))
