"""The taxonomy: concepts in an IS-A tree, with the queries SELECT's metrics need.

A concept has one parent (the taxonomy is a forest of trees, one per root). For a concept c:
descendants D(c) are its subtree without c, ancestors A(c) the chain up to its root, siblings S(c)
the concepts at the same level that share its parent (roots count as children of one virtual
root per relation, as SELECT's traversal makes them). Level 0 is a root.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from workbench.errors import WorkbenchError
from workbench.taxonomy.text import pluralize, singularize

SCHEMA_VERSION = 1
ConceptKind = Literal["class", "instance", "composition"]
KINDS = ("class", "instance", "composition")


class TaxonomyError(WorkbenchError):
    """A taxonomy is malformed (cycle, unknown parent, duplicate id, empty name, ...)."""


class UnknownConceptError(WorkbenchError, KeyError):
    """A concept id that the taxonomy does not hold."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]


@dataclass
class Concept:
    """One node of the taxonomy.

    Attributes:
        id: unique id (``wn:09411430-n``, ``yago:Bank``, ``schema:Person``, or
            ``a#b`` for compositions).
        name: plural or natural name used in questions ("rivers", "the Nile").
        kind: ``class``, ``instance`` (a named individual) or ``composition``.
        parent: id of the parent concept; None for a root.
        root: the root type this concept descends from ("people", "places", ...).
        source: where it came from (``wordnet-3.0``, ``yago-4.5``, ``select``, ...).
        gloss: a short definition, when the source has one.
        constituents: for compositions, the ids of the atomic concepts it joins.
        relation: for compositions, the relation template (``"{} about {}"``).
        plural: for classes, the plural noun phrase prompts and questions use, when the source
            gives one ("Rivers" in SELECT's release, "products" for a root named in the
            plural); empty means ``name`` pluralized.
    """

    id: str
    name: str
    kind: ConceptKind = "class"
    parent: str | None = None
    root: str = ""
    source: str = ""
    gloss: str = ""
    constituents: tuple[str, ...] = ()
    relation: str = ""
    plural: str = ""

    @property
    def phrase(self) -> str:
        """How prompts and questions name the concept: a class by its plural noun phrase
        ("rivers"), an instance or a composition by its name."""
        if self.kind != "class":
            return self.name
        return self.plural or pluralize(self.name)

    @property
    def singular(self) -> str:
        """The singular noun phrase ("river", "River" for SELECT's "Rivers")."""
        return singularize(self.name) if self.kind == "class" else self.name

    def to_dict(self) -> dict:
        d = asdict(self)
        d["constituents"] = list(self.constituents)
        return {
            k: v
            for k, v in d.items()
            if v not in ("", (), [], None) or k in ("id", "name", "kind", "parent")
        }

    @classmethod
    def from_dict(cls, d: dict) -> Concept:
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise TaxonomyError(
                f"concept {d.get('id', '?')!r} has unknown fields {sorted(unknown)}"
            )
        if "id" not in d or "name" not in d:
            raise TaxonomyError(f"a concept lacks 'id' or 'name': {d!r:.120}")
        d = dict(d)
        d["constituents"] = tuple(d.get("constituents", ()))
        return cls(**d)


@dataclass
class Taxonomy:
    """A validated forest of concepts with ancestry queries.

    Build one with :meth:`from_concepts` (which validates) or :meth:`load`.
    """

    concepts: dict[str, Concept]
    name: str = "taxonomy"
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate(self.concepts.values())
        self._children: dict[str, list[str]] = {cid: [] for cid in self.concepts}
        for c in self.concepts.values():
            if c.parent is not None:
                self._children[c.parent].append(c.id)
        self._level: dict[str, int] = {}
        for r in self.roots:
            stack = [(r, 0)]
            while stack:
                cid, lvl = stack.pop()
                self._level[cid] = lvl
                stack.extend((ch, lvl + 1) for ch in self._children[cid])

    @classmethod
    def from_concepts(
        cls, concepts: Iterable[Concept], name: str = "taxonomy", metadata: dict | None = None
    ) -> Taxonomy:
        concepts = list(concepts)
        seen: set[str] = set()
        for c in concepts:
            if c.id in seen:
                raise TaxonomyError(f"duplicate concept id {c.id!r}")
            seen.add(c.id)
        return cls({c.id: c for c in concepts}, name=name, metadata=dict(metadata or {}))

    # -- lookup ---------------------------------------------------------------------------------
    def __getitem__(self, cid: str) -> Concept:
        try:
            return self.concepts[cid]
        except KeyError:
            raise UnknownConceptError(self._unknown_message(cid)) from None

    def _unknown_message(self, cid: str) -> str:
        import difflib

        close = difflib.get_close_matches(cid, list(self.concepts), n=3)
        by_name = [c.id for c in self.concepts.values() if c.name.lower() == str(cid).lower()]
        hint = by_name or close
        return f"unknown concept id {cid!r} in taxonomy {self.name!r}" + (
            f"; did you mean {', '.join(map(repr, hint))}?" if hint else ""
        )

    def __contains__(self, cid: object) -> bool:
        return cid in self.concepts

    def __iter__(self) -> Iterator[Concept]:
        return iter(self.concepts.values())

    def __len__(self) -> int:
        return len(self.concepts)

    def find(self, text: str, limit: int = 20) -> list[Concept]:
        """Concepts whose name or id contains ``text`` (case-insensitive), shallowest first."""
        t = text.lower().strip()
        hits = [c for c in self if t in c.name.lower() or t in c.id.lower()]
        return sorted(hits, key=lambda c: (self.level(c.id), c.name))[:limit]

    # -- structure ------------------------------------------------------------------------------
    @property
    def roots(self) -> list[str]:
        return [c.id for c in self.concepts.values() if c.parent is None]

    def children(self, cid: str) -> list[str]:
        self[cid]
        return list(self._children[cid])

    def parent(self, cid: str) -> str | None:
        return self[cid].parent

    def level(self, cid: str) -> int:
        """Depth below the root (a root is level 0)."""
        self[cid]
        return self._level[cid]

    @property
    def max_depth(self) -> int:
        return max(self._level.values(), default=0)

    def ancestors(self, cid: str) -> list[str]:
        """A(c): parent, grandparent, ... up to the root (nearest first)."""
        out, p = [], self[cid].parent
        while p is not None:
            out.append(p)
            p = self.concepts[p].parent
        return out

    def descendants(self, cid: str) -> list[str]:
        """D(c): every concept in the subtree under c, c excluded (breadth-first)."""
        out, frontier = [], list(self.children(cid))
        while frontier:
            out.extend(frontier)
            frontier = [ch for f in frontier for ch in self._children[f]]
        return out

    def subtree(self, cid: str) -> list[str]:
        return [cid] + self.descendants(cid)

    def siblings(self, cid: str) -> list[str]:
        """S(c): concepts at c's level sharing its parent.

        Roots share a virtual parent, as in SELECT: the atomic roots are siblings of each other,
        and so are the top compositions of one relation.
        """
        c = self[cid]
        if c.parent is None:
            return [r for r in self.roots if r != cid and self.concepts[r].relation == c.relation]
        return [s for s in self._children[c.parent] if s != cid]

    def path(self, cid: str) -> list[str]:
        """Root-to-c ids."""
        return list(reversed(self.ancestors(cid))) + [cid]

    def leaves(self) -> list[str]:
        return [cid for cid, ch in self._children.items() if not ch]

    def root_of(self, cid: str) -> str:
        return self.path(cid)[0]

    def subtree_depth(self, cid: str) -> int:
        """Height of c's subtree (a leaf has height 0)."""
        ch = self.children(cid)
        return 0 if not ch else 1 + max(self.subtree_depth(x) for x in ch)

    def unrelated(self, cid: str) -> list[str]:
        """Concepts outside c's subtree that are not its ancestors."""
        excluded = set(self.subtree(cid)) | set(self.ancestors(cid))
        return [x for x in self.concepts if x not in excluded]

    # -- persistence ----------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "metadata": self.metadata,
            "concepts": [self.concepts[cid].to_dict() for cid in self._preorder()],
        }

    def _preorder(self) -> list[str]:
        out: list[str] = []
        stack = list(reversed(self.roots))
        while stack:
            cid = stack.pop()
            out.append(cid)
            stack.extend(reversed(self._children[cid]))
        return out

    def save(self, path: str | os.PathLike) -> Path:
        from workbench.paths import write_text_atomic

        path = Path(path)
        write_text_atomic(path, json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n")
        return path

    @classmethod
    def from_json(cls, data: dict, origin: str = "<data>") -> Taxonomy:
        if not isinstance(data, dict) or "concepts" not in data:
            raise TaxonomyError(f"{origin}: not a taxonomy file (no 'concepts' list)")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise TaxonomyError(
                f"{origin}: schema_version {version!r} is not supported "
                f"(this workbench reads version {SCHEMA_VERSION})"
            )
        if not isinstance(data["concepts"], list):
            raise TaxonomyError(f"{origin}: 'concepts' must be a list")
        try:
            concepts = [Concept.from_dict(d) for d in data["concepts"]]
            return cls.from_concepts(
                concepts, name=data.get("name", "taxonomy"), metadata=data.get("metadata", {})
            )
        except TaxonomyError as e:
            raise TaxonomyError(f"{origin}: {e}") from None

    @classmethod
    def load(cls, path: str | os.PathLike) -> Taxonomy:
        path = Path(path)
        if not path.is_file():
            raise TaxonomyError(f"no taxonomy file at {path}")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise TaxonomyError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None
        return cls.from_json(data, origin=str(path))


def validate(concepts: Iterable[Concept]) -> None:
    """Raise :class:`TaxonomyError` naming the first problem found."""
    by_id: dict[str, Concept] = {}
    for c in concepts:
        if not isinstance(c.id, str) or not c.id.strip():
            raise TaxonomyError(f"a concept has an empty id (name {c.name!r})")
        if c.id in by_id:
            raise TaxonomyError(f"duplicate concept id {c.id!r}")
        if not isinstance(c.name, str) or not c.name.strip():
            raise TaxonomyError(f"concept {c.id!r} has an empty name")
        if c.kind not in KINDS:
            raise TaxonomyError(f"concept {c.id!r} has kind {c.kind!r}; expected one of {KINDS}")
        by_id[c.id] = c
    for c in by_id.values():
        if c.parent is not None and c.parent not in by_id:
            raise TaxonomyError(f"concept {c.id!r} has unknown parent {c.parent!r}")
    # cycles: follow parents from each node; a node seen twice on one walk closes a cycle
    state: dict[str, int] = {}
    for start in by_id:
        walk: list[str] = []
        cur: str | None = start
        while cur is not None and state.get(cur) is None:
            state[cur] = 1
            walk.append(cur)
            cur = by_id[cur].parent
        if cur is not None and state[cur] == 1 and cur in walk:
            cycle = walk[walk.index(cur) :] + [cur]
            raise TaxonomyError("cycle in parents: " + " -> ".join(cycle))
        for w in walk:
            state[w] = 2
