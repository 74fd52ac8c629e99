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

import itertools
import random
import re
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from typing import Annotated, ClassVar

from pydantic import Field

from workbench.errors import ConfigError
from workbench.settings import NonNegative, Positive, Seq, Settings
from workbench.taxonomy.model import Concept, Taxonomy

FLOWS = ("self", "descendants")


@dataclass(frozen=True)
class SlotRule:
    """Which atomic concepts may fill one slot of a relation template.

    Attributes:
        concept: the slot's atomic concept.
        flow: ``self`` (the concept itself) and/or ``descendants``.
        exclude: concept ids whose subtrees may not fill the slot.
        exclude_leaves: leaves of the atomic taxonomy may not fill the slot (SELECT's
            ``"exclude": "leaves"``: only concepts with children).
        instances: instances may fill the slot (SELECT's hints allow them).
    """

    concept: str
    flow: tuple[str, ...] = ("self", "descendants")
    exclude: tuple[str, ...] = ()
    instances: bool = False
    exclude_leaves: bool = False

    def __post_init__(self) -> None:
        if not self.flow:
            raise ConfigError(f"slot {self.concept!r}: flow is empty; use some of {FLOWS}")
        if isinstance(self.exclude, str):
            raise ConfigError(
                f"slot {self.concept!r}: exclude must be a list of concept ids, got "
                f"the string {self.exclude!r} (use exclude_leaves=True for 'leaves')"
            )

    @classmethod
    def from_select(cls, d: dict) -> SlotRule:
        """A component of SELECT's ``hints.json``: ``{"concept", "flow", "exclude"?}``, where
        ``exclude`` is a list of ids or the string ``"leaves"``; instances may fill the slot."""
        if not isinstance(d, dict) or "concept" not in d:
            raise ConfigError(f"hint component lacks 'concept': {d!r:.120}")
        exclude = d.get("exclude") or []
        leaves = exclude == "leaves"
        if not leaves and not (
            isinstance(exclude, list) and all(isinstance(x, str) for x in exclude)
        ):
            raise ConfigError(
                f"hint component {d['concept']!r}: exclude must be a list of ids or "
                f"'leaves', got {exclude!r}"
            )
        return cls(
            concept=d["concept"],
            flow=tuple(d.get("flow") or ("self",)),
            exclude=() if leaves else tuple(exclude),
            instances=True,
            exclude_leaves=leaves,
        )


@dataclass(frozen=True)
class RelationTemplate:
    """A relation between two concepts, e.g. ``"{} about {}"`` over (creative works, people)."""

    relation: str
    components: tuple[SlotRule, ...]

    def __post_init__(self) -> None:
        if self.relation.count("{}") != len(self.components):
            raise ConfigError(
                f"template {self.relation!r} has {self.relation.count('{}')} slots "
                f"but {len(self.components)} components"
            )

    def to_dict(self) -> dict:
        return {
            "relation": self.relation,
            "components": [
                {**asdict(c), "flow": list(c.flow), "exclude": list(c.exclude)}
                for c in self.components
            ],
        }

    @property
    def slug(self) -> str:
        """A short id of the relation: its words without the slots ("Consuming {} at {}" ->
        "consuming-at"); composition ids are qualified by it."""
        return relation_slug(self.relation)


def relation_slug(relation: str) -> str:
    """ "{} about {}" -> "about", "Damage from production of {} to {}" -> "damage-from-production-of-to"."""
    slug = re.sub(r"[^a-z0-9]+", "-", relation.replace("{}", " ").lower()).strip("-")
    return slug or "rel"


def composition_id(relation: str, constituents: Sequence[str]) -> str:
    """The id of a composition, qualified by its relation so that two relations over the same
    pair of concepts stay apart: ``about/yago:Book#schema:Person``."""
    return f"{relation_slug(relation)}/{'#'.join(constituents)}"


def _wn(offset: str) -> str:
    return f"wn:{offset}-n"


#: The workbench's own templates over the shipped WordNet taxonomy (slot concepts are anchors).
DEFAULT_TEMPLATES: tuple[RelationTemplate, ...] = (
    RelationTemplate(
        "{} about {}", (SlotRule(_wn("06364329")), SlotRule(_wn("10560637")))
    ),  # literary compositions about scientists
    RelationTemplate(
        "{} about {}", (SlotRule(_wn("06613686")), SlotRule(_wn("09820263")))
    ),  # movies about athletes
    RelationTemplate(
        "{} about {}", (SlotRule(_wn("07037465")), SlotRule(_wn("09225146")))
    ),  # musical compositions about bodies of water
    RelationTemplate(
        "{} set in {}", (SlotRule(_wn("07007684")), SlotRule(_wn("08574314")))
    ),  # dramatic compositions set in geographical areas
    RelationTemplate(
        "{} made in {}", (SlotRule(_wn("07881800")), SlotRule(_wn("08574314")))
    ),  # beverages made in geographical areas
    RelationTemplate(
        "{} founded by {}", (SlotRule(_wn("08058098")), SlotRule(_wn("09623038")))
    ),  # companies founded by leaders
    RelationTemplate(
        "{} played by {}", (SlotRule(_wn("03800933")), SlotRule(_wn("09616922")))
    ),  # musical instruments played by entertainers
    RelationTemplate(
        "{} worn by {}", (SlotRule(_wn("03051540")), SlotRule(_wn("09820263")))
    ),  # clothing worn by athletes
    RelationTemplate(
        "{} near {}", (SlotRule(_wn("09287968")), SlotRule(_wn("09225146")))
    ),  # geological formations near bodies of water
    RelationTemplate(
        "{} painted by {}", (SlotRule(_wn("03876519")), SlotRule(_wn("10391653")))
    ),  # paintings painted by painters
)


class CompositionParams(Settings):
    """How the composition taxonomy is cut.

    Attributes:
        branching: most children per node by level (SELECT: at most 4; the last value repeats).
        prefer_depth: children whose subtrees reach this depth are kept first (SELECT: 3).
        max_depth: deepest level of a composition (the top of a relation is level 0).
        seed: breaks ties between equally good children.
    """

    label: ClassVar[str] = "composition parameter"

    branching: Annotated[Seq[Positive], Field(min_length=1)] = (2, 2, 1, 1)
    prefer_depth: NonNegative = 3
    max_depth: Positive = 4
    seed: NonNegative = 0


def slot_fillers(atomic: Taxonomy, rule: SlotRule) -> list[str]:
    """Atomic concept ids that may fill ``rule``'s slot, slot concept first."""
    atomic[rule.concept]
    bad = set(rule.flow) - set(FLOWS)
    if bad:
        raise ConfigError(
            f"slot {rule.concept!r}: unsupported flow {sorted(bad)}; use some of {FLOWS}"
        )
    excluded = {x for e in rule.exclude for x in atomic.subtree(e)}
    out = [rule.concept] if "self" in rule.flow else []
    if "descendants" in rule.flow:
        out += atomic.descendants(rule.concept)
    return [
        c
        for c in out
        if c not in excluded
        and (rule.instances or atomic[c].kind != "instance")
        and not (rule.exclude_leaves and not atomic.children(c))
    ]


def composition_name(atomic: Taxonomy, relation: str, ids: Sequence[str]) -> str:
    return relation.format(*(atomic[i].phrase for i in ids))


def compose(
    atomic: Taxonomy,
    templates: Sequence[RelationTemplate] = DEFAULT_TEMPLATES,
    params: CompositionParams = CompositionParams(),
    only: Collection[tuple[str, ...]] | None = None,
    source: str = "workbench-compositions",
) -> Taxonomy:
    """Populate ``templates`` from ``atomic`` and link the compositions into a taxonomy.

    ``only`` restricts the compositions to the given ``(relation, *constituent ids)`` tuples and
    keeps all of them (no branching or depth cut): with a released composition list it
    regenerates that release's taxonomy from its templates.
    """
    rng = random.Random(params.seed)
    concepts: list[Concept] = []
    used_names: set[str] = set()
    keep = None if only is None else {tuple(x) for x in only}
    slugs: dict[str, str] = {}
    for tpl in templates:
        if slugs.setdefault(tpl.slug, tpl.relation) != tpl.relation:
            raise ConfigError(
                f"relations {slugs[tpl.slug]!r} and {tpl.relation!r} share the id "
                f"prefix {tpl.slug!r}; reword one of them"
            )
        concepts.extend(_compose_one(atomic, tpl, params, rng, used_names, keep, source))
    if keep is not None:
        made = {(c.relation, *c.constituents) for c in concepts}
        missing = sorted(keep - made)
        if missing:
            raise ConfigError(
                f"{len(missing)} requested compositions break the templates' slot "
                f"rules, e.g. {missing[0]!r}"
            )
    return Taxonomy.from_concepts(
        concepts,
        name="compositions",
        metadata={"templates": [t.to_dict() for t in templates], "params": params.to_dict()},
    )


def _compose_one(
    atomic, tpl, params, rng, used_names, keep=None, source="workbench-compositions"
) -> list[Concept]:
    fillers = [slot_fillers(atomic, r) for r in tpl.components]
    if keep is not None:
        fillers = [
            [c for c in f if any(k[0] == tpl.relation and k[1 + i] == c for k in keep)]
            for i, f in enumerate(fillers)
        ]
    allowed = [set(f) for f in fillers]
    tops = [r.concept for r in tpl.components]

    def parents(node: tuple[str, ...]) -> list[tuple[str, ...]]:
        out = []
        for i, c in enumerate(node):
            p = atomic.parent(c)
            if p is not None and p in allowed[i]:
                cand = node[:i] + (p,) + node[i + 1 :]
                if keep is None or (tpl.relation, *cand) in keep:
                    out.append(cand)
        return out

    @cache
    def depth(node: tuple[str, ...]) -> int:
        ps = parents(node)
        return 0 if not ps else 1 + max(depth(p) for p in ps)

    # every valid pair, linked to its deepest parent (ties: the first slot's parent)
    nodes = [tuple(x) for x in itertools.product(*fillers)]
    if keep is not None:
        nodes = [n for n in nodes if (tpl.relation, *n) in keep]
    children: dict[tuple, list[tuple]] = {n: [] for n in nodes}
    roots = []
    for n in nodes:
        ps = parents(n)
        if not ps:
            roots.append(n)
            continue
        best = max(ps, key=lambda p: (depth(p), -ps.index(p)))
        children[best].append(n)

    @cache
    def height(n: tuple) -> int:
        return 0 if not children[n] else 1 + max(height(c) for c in children[n])

    out: list[Concept] = []

    def emit(n: tuple, parent_id: str | None, level: int) -> None:
        name = composition_name(atomic, tpl.relation, n)
        cid = composition_id(tpl.relation, n)
        if cid in used_names or (keep is None and name.lower() in used_names):
            return  # a name enters once; a pair two templates of one relation share, too
        used_names.update((name.lower(), cid))
        out.append(
            Concept(
                id=cid,
                name=name,
                kind="composition",
                parent=parent_id,
                root=tpl.relation,
                source=source,
                constituents=tuple(n),
                relation=tpl.relation,
            )
        )
        if keep is None and level >= params.max_depth:
            return
        kids = sorted(children[n])
        rng.shuffle(kids)
        kids.sort(key=lambda c: -min(height(c), params.prefer_depth))
        limit = (
            len(kids)
            if keep is not None
            else params.branching[min(level, len(params.branching) - 1)]
        )
        for k in kids[:limit]:
            emit(k, cid, level + 1)

    for r in sorted(roots, key=lambda n: (n != tuple(tops), n)):
        emit(r, None, 0)
    return out
