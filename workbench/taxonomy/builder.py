"""SELECT's recipe for cutting a taxonomy out of a knowledge graph, for any graph.

From each root, descend the IS-A relation recursively to depth ``max_depth``; at a leaf class
sample up to ``instances_per_leaf`` instances; drop every branch whose root-to-leaf path is shorter
than ``min_path``. A root type (e.g. "places") may be anchored on several graph classes (e.g.
WordNet's body_of_water and geographical_area): the anchors become the root's children.

The graph is anything that implements :class:`KnowledgeGraph`. Among a node's children the builder
keeps those whose subtrees are deep enough to survive the path-length rule, then prefers familiar
ones (the graph's ``familiarity``: corpus frequency for WordNet), breaking ties with the seed, so
that questions are about things users ask about, not "brilliant pebbles".
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Annotated, ClassVar, Protocol

from pydantic import Field

from workbench.errors import ConfigError
from workbench.settings import NonNegative, Positive, Seq, Settings
from workbench.taxonomy.model import Concept, Taxonomy
from workbench.taxonomy.text import pluralize, singularize


def noun_forms(name: str) -> set[str]:
    """The lower-cased singular and plural forms of a name ("place" and "places")."""
    low = name.lower()
    return {low, pluralize(low), singularize(low)}


class KnowledgeGraph(Protocol):
    """The three questions the builder asks a knowledge graph."""

    source: str

    def name(self, node: str) -> str: ...
    def subclasses(self, node: str) -> list[str]: ...
    def instances(self, node: str) -> list[str]: ...
    def gloss(self, node: str) -> str: ...
    def familiarity(self, node: str) -> float: ...


@dataclass(frozen=True)
class RootSpec:
    """A root type: its id and name in the taxonomy and where it sits in the graph.

    Either ``node`` names one graph class that *is* the root (YAGO's ``schema:Person``), or
    ``anchors`` lists graph classes that become the root's children (WordNet has no single
    synset for "products").
    """

    id: str
    name: str
    anchors: tuple[str, ...] = ()
    node: str | None = None

    def __post_init__(self) -> None:
        if (self.node is None) == (not self.anchors):
            raise ConfigError(f"root {self.name!r}: give either node or anchors")


class BuildParams(Settings):
    """Parameters of the recipe (SELECT's values are the defaults except ``branching``).

    Attributes:
        max_depth: deepest level a class may sit at (root = level 0).
        instances_per_leaf: instances sampled under each leaf class.
        min_path: branches whose deepest node is shallower than this are dropped.
        branching: most children kept per node, by the node's level (the last value repeats);
            bounds the size of the result (SELECT does not state its own).
        seed: seed of every random choice.
    """

    label: ClassVar[str] = "build parameter"

    max_depth: Positive = 6
    instances_per_leaf: NonNegative = 5
    min_path: Positive = 3
    branching: Annotated[Seq[Positive], Field(min_length=1)] = (3, 3, 2, 2, 1, 1)
    seed: NonNegative = 0

    def children_at(self, level: int) -> int:
        return self.branching[min(level, len(self.branching) - 1)]


@dataclass
class _Node:
    gid: str
    level: int
    kind: str
    children: list[_Node] = field(default_factory=list)

    def height(self) -> int:
        return 0 if not self.children else 1 + max(c.height() for c in self.children)


def build_taxonomy(
    kg: KnowledgeGraph,
    roots: Sequence[RootSpec],
    params: BuildParams = BuildParams(),
    name: str = "atomic",
    id_of=lambda gid: gid,
) -> Taxonomy:
    """Apply the recipe to ``kg`` and return a validated :class:`Taxonomy`.

    ``id_of`` maps a graph node id to the concept id (e.g. add a namespace prefix).
    """
    rng = random.Random(params.seed)

    @cache
    def reach(gid: str, budget: int) -> int:
        """How many levels below ``gid`` a descent can reach (instances count as one)."""
        if budget <= 0:
            return 0
        subs = kg.subclasses(gid)
        best = 1 if kg.instances(gid) else 0
        for s in subs:
            best = max(best, 1 + reach(s, budget - 1))
        return best

    used: set[str] = set()  # a graph node enters the taxonomy once (WordNet has multiple parents)
    names: set[str] = set()  # ... and so does a name in any number, so questions are unambiguous

    def fresh(gid: str) -> bool:
        return gid not in used and not noun_forms(kg.name(gid)) & names

    def expand(gid: str, level: int) -> _Node:
        used.add(gid)
        names.update(noun_forms(kg.name(gid)))
        node = _Node(gid, level, "class")
        subs = [s for s in kg.subclasses(gid) if fresh(s)]
        if level < params.max_depth and subs:
            need = params.min_path - level - 1
            deep = [s for s in subs if reach(s, params.max_depth - level - 1) >= need]
            pool = deep or subs
            pool = sorted(pool)  # graph order must not matter
            rng.shuffle(pool)  # ties are broken by the seed
            pool.sort(
                key=lambda s: (
                    -min(reach(s, params.max_depth - level - 1), need + 1),
                    -kg.familiarity(s),
                )
            )
            for s in pool[: params.children_at(level)]:
                if fresh(s):
                    node.children.append(expand(s, level + 1))
        if not node.children:  # a leaf class: sample instances
            inst = sorted(i for i in kg.instances(gid) if fresh(i))
            rng.shuffle(inst)
            inst.sort(key=lambda i: -kg.familiarity(i))
            for i in inst[: params.instances_per_leaf]:
                used.add(i)
                names.update(noun_forms(kg.name(i)))
                node.children.append(_Node(i, level + 1, "instance"))
        return node

    concepts: list[Concept] = []
    for root in roots:
        if root.node is not None:
            tree = expand(root.node, 0)
            _prune(tree, params.min_path)
            concepts.append(
                Concept(
                    id=root.id,
                    name=root.name,
                    kind="class",
                    parent=None,
                    root=root.name,
                    source=kg.source,
                    gloss=kg.gloss(root.node),
                )
            )
            for ch in tree.children:
                _emit(ch, root.id, root, kg, id_of, concepts, params.min_path)
            continue
        concepts.append(
            Concept(
                id=root.id,
                name=root.name,
                kind="class",
                parent=None,
                root=root.name,
                source="workbench",
            )
        )
        names.update(noun_forms(root.name))
        trees = [expand(a, 1) for a in root.anchors if fresh(a)]
        for tree in trees:
            _prune(tree, params.min_path)
            _emit(tree, root.id, root, kg, id_of, concepts, params.min_path)
    return Taxonomy.from_concepts(
        concepts,
        name=name,
        metadata={
            "source": kg.source,
            "params": params.to_dict(),
            "roots": [asdict(r) for r in roots],
        },
    )


def _prune(node: _Node, min_path: int) -> None:
    """Drop children whose deepest leaf sits above level ``min_path``."""
    for ch in node.children:
        _prune(ch, min_path)
    node.children = [ch for ch in node.children if ch.level + ch.height() >= min_path]


def _emit(node, parent_id, root, kg, id_of, out, min_path) -> None:
    if node.level + node.height() < min_path:
        return
    cid = id_of(node.gid)
    out.append(
        Concept(
            id=cid,
            name=kg.name(node.gid),
            kind=node.kind,
            parent=parent_id,
            root=root.name,
            source=kg.source,
            gloss=kg.gloss(node.gid),
        )
    )
    for ch in node.children:
        _emit(ch, cid, root, kg, id_of, out, min_path)
