"""Compositions of two atomic concepts ("movies about athletes") and their own taxonomy.

A :class:`RelationTemplate` joins two slots; each :class:`SlotRule` says which atomic concepts
may fill it (the slot concept itself and/or its descendants, minus excluded subtrees). Every
valid pair becomes a composition; compositions are linked by their constituents' IS-A relations
("novels about physicists" is a child of "novels about scientists" and of "literary compositions
about physicists"); where two parents qualify, the deeper one wins (ties go to the first slot's).
Each node then keeps at most ``branching[level]`` children (SELECT: 4), preferring children whose
subtrees reach depth ``prefer_depth`` (SELECT: 3).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from workbench.errors import ConfigError
from workbench.taxonomy.model import Concept, Taxonomy
from workbench.taxonomy.text import pluralize

FLOWS = ("self", "descendants")


@dataclass(frozen=True)
class SlotRule:
    """Which atomic concepts may fill one slot of a relation template."""

    concept: str
    flow: tuple[str, ...] = ("self", "descendants")
    exclude: tuple[str, ...] = ()
    instances: bool = False

    def __post_init__(self) -> None:
        if not self.flow:
            raise ConfigError(f"slot {self.concept!r}: flow is empty; use some of {FLOWS}")


@dataclass(frozen=True)
class RelationTemplate:
    """A relation between two concepts, e.g. ``"{} about {}"`` over (creative works, people)."""

    relation: str
    components: tuple[SlotRule, ...]

    def __post_init__(self) -> None:
        if self.relation.count("{}") != len(self.components):
            raise ConfigError(f"template {self.relation!r} has {self.relation.count('{}')} slots "
                              f"but {len(self.components)} components")

    def to_dict(self) -> dict:
        return {"relation": self.relation,
                "components": [{**asdict(c), "flow": list(c.flow), "exclude": list(c.exclude)}
                               for c in self.components]}


def _wn(offset: str) -> str:
    return f"wn:{offset}-n"


#: The workbench's own templates over the shipped WordNet taxonomy (slot concepts are anchors).
DEFAULT_TEMPLATES: tuple[RelationTemplate, ...] = (
    RelationTemplate("{} about {}", (SlotRule(_wn("06364329")), SlotRule(_wn("10560637")))),  # literary compositions about scientists
    RelationTemplate("{} about {}", (SlotRule(_wn("06613686")), SlotRule(_wn("09820263")))),  # movies about athletes
    RelationTemplate("{} about {}", (SlotRule(_wn("07037465")), SlotRule(_wn("09225146")))),  # musical compositions about bodies of water
    RelationTemplate("{} set in {}", (SlotRule(_wn("07007684")), SlotRule(_wn("08574314")))),  # dramatic compositions set in geographical areas
    RelationTemplate("{} made in {}", (SlotRule(_wn("07881800")), SlotRule(_wn("08574314")))),  # beverages made in geographical areas
    RelationTemplate("{} founded by {}", (SlotRule(_wn("08058098")), SlotRule(_wn("09623038")))),  # companies founded by leaders
    RelationTemplate("{} played by {}", (SlotRule(_wn("03800933")), SlotRule(_wn("09616922")))),  # musical instruments played by entertainers
    RelationTemplate("{} worn by {}", (SlotRule(_wn("03051540")), SlotRule(_wn("09820263")))),  # clothing worn by athletes
    RelationTemplate("{} near {}", (SlotRule(_wn("09287968")), SlotRule(_wn("09225146")))),  # geological formations near bodies of water
    RelationTemplate("{} painted by {}", (SlotRule(_wn("03876519")), SlotRule(_wn("10391653")))),  # paintings painted by painters
)


@dataclass(frozen=True)
class CompositionParams:
    """How the composition taxonomy is cut.

    Attributes:
        branching: most children per node by level (SELECT: at most 4; the last value repeats).
        prefer_depth: children whose subtrees reach this depth are kept first (SELECT: 3).
        max_depth: deepest level of a composition (the top of a relation is level 0).
        seed: breaks ties between equally good children.
    """

    branching: tuple[int, ...] = (2, 2, 1, 1)
    prefer_depth: int = 3
    max_depth: int = 4
    seed: int = 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["branching"] = list(self.branching)
        return d


def slot_fillers(atomic: Taxonomy, rule: SlotRule) -> list[str]:
    """Atomic concept ids that may fill ``rule``'s slot, slot concept first."""
    atomic[rule.concept]
    bad = set(rule.flow) - set(FLOWS)
    if bad:
        raise ConfigError(f"slot {rule.concept!r}: unsupported flow {sorted(bad)}; use some of {FLOWS}")
    excluded = {x for e in rule.exclude for x in atomic.subtree(e)}
    out = [rule.concept] if "self" in rule.flow else []
    if "descendants" in rule.flow:
        out += atomic.descendants(rule.concept)
    return [c for c in out if c not in excluded and (rule.instances or atomic[c].kind != "instance")]


def composition_name(atomic: Taxonomy, relation: str, ids: Sequence[str]) -> str:
    parts = [atomic[i].name if atomic[i].kind == "instance" else pluralize(atomic[i].name) for i in ids]
    return relation.format(*parts)


def compose(atomic: Taxonomy, templates: Sequence[RelationTemplate] = DEFAULT_TEMPLATES,
            params: CompositionParams = CompositionParams()) -> Taxonomy:
    """Populate ``templates`` from ``atomic`` and link the compositions into a taxonomy."""
    rng = random.Random(params.seed)
    concepts: list[Concept] = []
    used_names: set[str] = set()
    for tpl in templates:
        concepts.extend(_compose_one(atomic, tpl, params, rng, used_names))
    return Taxonomy.from_concepts(concepts, name="compositions",
                                  metadata={"templates": [t.to_dict() for t in templates],
                                            "params": params.to_dict()})


def _compose_one(atomic, tpl, params, rng, used_names) -> list[Concept]:
    fillers = [slot_fillers(atomic, r) for r in tpl.components]
    allowed = [set(f) for f in fillers]
    tops = [r.concept for r in tpl.components]

    def parents(node: tuple[str, ...]) -> list[tuple[str, ...]]:
        out = []
        for i, c in enumerate(node):
            p = atomic.parent(c)
            if p is not None and p in allowed[i]:
                out.append(node[:i] + (p,) + node[i + 1:])
        return out

    @lru_cache(maxsize=None)
    def depth(node: tuple[str, ...]) -> int:
        ps = parents(node)
        return 0 if not ps else 1 + max(depth(p) for p in ps)

    # every valid pair, linked to its deepest parent (ties: the first slot's parent)
    nodes = [tuple(x) for x in _product(fillers)]
    children: dict[tuple, list[tuple]] = {n: [] for n in nodes}
    roots = []
    for n in nodes:
        ps = parents(n)
        if not ps:
            roots.append(n)
            continue
        best = max(ps, key=lambda p: (depth(p), -ps.index(p)))
        children[best].append(n)

    @lru_cache(maxsize=None)
    def height(n: tuple) -> int:
        return 0 if not children[n] else 1 + max(height(c) for c in children[n])

    out: list[Concept] = []

    def emit(n: tuple, parent_id: str | None, level: int) -> None:
        name = composition_name(atomic, tpl.relation, n)
        if name.lower() in used_names:
            return
        used_names.add(name.lower())
        cid = "#".join(n)
        out.append(Concept(id=cid, name=name, kind="composition", parent=parent_id,
                           root=tpl.relation, source="workbench-compositions",
                           constituents=tuple(n), relation=tpl.relation))
        if level >= params.max_depth:
            return
        kids = sorted(children[n])
        rng.shuffle(kids)
        kids.sort(key=lambda c: -min(height(c), params.prefer_depth))
        limit = params.branching[min(level, len(params.branching) - 1)]
        for k in kids[:limit]:
            emit(k, cid, level + 1)

    for r in sorted(roots, key=lambda n: (n != tuple(tops), n)):
        emit(r, None, 0)
    return out


def _product(lists):
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for rest in _product(lists[1:]):
            yield (head,) + rest
