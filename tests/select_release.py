"""A small SELECT release of our own writing, in the shapes of the published files.

Everything kinshuk-h/SELECT's ``data/SELECT`` has is here in miniature: title-case names as
released (plural for most classes, "Chemical Substance" singular), instances as leaves, 30 + 20
questions per atom and 20 + 10 per composition, ``context`` ancestor lists (null for
compositions), ``data.train.json`` with md5-keyed ``responses``, example caches, and hints with
``"exclude": "leaves"``, an id list, and two relations over the same pairs of concepts.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

ATOMS = {
    "schema:Place": (
        "Places",
        {
            "yago:Body_of_water": (
                "Bodies of Water",
                {
                    "yago:River": (
                        "Rivers",
                        {"yago:Nile": ("Nile", {}), "yago:Danube": ("Danube", {})},
                    ),
                    "yago:Lake": ("Lakes", {"yago:Lake_Baikal": ("Lake Baikal", {})}),
                },
            ),
        },
    ),
    "schema:CreativeWork": (
        "Creative Works",
        {
            "schema:Movie": (
                "Movies",
                {
                    "yago:Documentary": (
                        "Documentaries",
                        {"yago:Planet_Earth": ("Planet Earth", {})},
                    ),
                },
            ),
            "yago:Song": ("Songs", {"yago:Moon_River": ("Moon River", {})}),
        },
    ),
    "schema:Product": (
        "Products",
        {
            "yago:Chemical_substance": (
                "Chemical Substance",
                {
                    "yago:Fertilizer": ("Fertilizers", {"yago:Urea": ("Urea", {})}),
                },
            ),
        },
    ),
}

HINTS = [
    {
        "relation": "{} about {}",
        "components": [
            {
                "concept": "schema:CreativeWork",
                "flow": ["self", "descendants"],
                "exclude": "leaves",
            },
            {
                "concept": "yago:Body_of_water",
                "flow": ["self", "descendants"],
                "exclude": ["yago:Lake"],
            },
        ],
    },
    {
        "relation": "Dumping {} in {}",
        "components": [
            {"concept": "yago:Chemical_substance", "flow": ["self", "descendants"]},
            {"concept": "yago:Body_of_water", "flow": ["descendants"]},
        ],
    },
    {
        "relation": "Damage from production of {} to {}",
        "components": [
            {"concept": "yago:Chemical_substance", "flow": ["self", "descendants"]},
            {"concept": "yago:Body_of_water", "flow": ["descendants"]},
        ],
    },
]

#: Released compositions per relation: (first, second, parent pair or None), linked as SELECT's
#: own script links them (one constituent replaced by its parent; the deeper parent wins).
COMPOSITIONS = {
    "{} about {}": [
        ("schema:CreativeWork", "yago:Body_of_water", None),
        ("schema:Movie", "yago:Body_of_water", ("schema:CreativeWork", "yago:Body_of_water")),
        ("schema:CreativeWork", "yago:River", ("schema:CreativeWork", "yago:Body_of_water")),
        ("schema:Movie", "yago:River", ("schema:CreativeWork", "yago:River")),  # tie: first slot
        ("yago:Documentary", "yago:River", ("schema:Movie", "yago:River")),
        ("yago:Documentary", "yago:Nile", ("yago:Documentary", "yago:River")),
    ],
    "Dumping {} in {}": [
        ("yago:Chemical_substance", "yago:River", None),
        ("yago:Chemical_substance", "yago:Lake", None),
        ("yago:Fertilizer", "yago:River", ("yago:Chemical_substance", "yago:River")),
        ("yago:Fertilizer", "yago:Danube", ("yago:Fertilizer", "yago:River")),
    ],
    "Damage from production of {} to {}": [
        ("yago:Chemical_substance", "yago:River", None),
        ("yago:Fertilizer", "yago:River", ("yago:Chemical_substance", "yago:River")),
    ],
}


#: With ``overlap=True``: evaluation questions that are also a training question elsewhere, as
#: (concept whose eval split holds it, concept that trains on it, the question): within atoms
#: (a child evaluates its parent's question), within compositions, and across the partitions.
OVERLAP = [
    ("yago:Documentary", "schema:Movie", "Could you explain Movies from angle 3?"),
    (
        "dumping-in/yago:Fertilizer#yago:River",
        "dumping-in/yago:Chemical_substance#yago:River",
        "Any thoughts on Dumping Chemical Substance in Rivers, take 2?",
    ),
    ("about/yago:Documentary#yago:Nile", "yago:Nile", "Could you explain Nile from angle 5?"),
]


def _walk(tree, parent_path=()):
    for cid, (name, children) in tree.items():
        yield cid, name, list(parent_path)
        yield from _walk(children, parent_path + (cid,))


def atom_names() -> dict[str, str]:
    return {cid: name for cid, name, _ in _walk(ATOMS)}


def _nested(tree) -> dict:
    return {
        cid: {"name": name, "children": _nested(children)} for cid, (name, children) in tree.items()
    }


def _classes(tree: dict) -> dict:
    """The released ``taxonomy.json``: the tree without instance leaves."""
    return {
        cid: {"name": n["name"], "children": _classes(n["children"])}
        for cid, n in tree.items()
        if n["children"] or cid.startswith("schema:")
    }


def _md5(q: str) -> str:
    return hashlib.md5(q.encode()).hexdigest()


def _overlapping(relation: str | None, sel_id: str) -> str | None:
    """The question (from :data:`OVERLAP`) to put first in this concept's eval split, if any."""
    from workbench.taxonomy.compositions import relation_slug

    ours = f"{relation_slug(relation)}/{sel_id}" if relation else sel_id
    return next((q for evaluated, _, q in OVERLAP if evaluated == ours), None)


def write_release(
    root: Path,
    *,
    with_train_file: bool = True,
    extra_queries: bool = True,
    drop: tuple[str, ...] = (),
    overlap: bool = False,
    no_training_for: tuple[str, ...] = (),
    all_responses: bool = False,
) -> Path:
    """Write the release under ``root/data/SELECT`` (as in a clone) and return ``root``.

    ``drop``: release-relative files to leave out ("atoms/data.train.json"); ``overlap``: put
    the :data:`OVERLAP` questions into evaluation splits; ``no_training_for``: atom ids written
    with neither ``extra_queries`` nor an entry in ``data.train.json``.

    The release describes itself in ``release_manifest.json`` (as a newer version of SELECT
    would): every file with its concepts and questions as written, before ``drop`` and
    ``with_train_file=False`` take files away, so those make a partial release."""
    base = root / "data" / "SELECT"
    atoms, comps = base / "atoms", base / "compositions"
    atoms.mkdir(parents=True)
    comps.mkdir()
    names = atom_names()
    (atoms / "taxonomy_plus.json").write_text(json.dumps(_nested(ATOMS), indent=1))
    (atoms / "taxonomy.json").write_text(json.dumps(_classes(_nested(ATOMS))))
    data, train = {}, {}
    for cid, name, path in _walk(ATOMS):
        entry = {
            "concept": cid,
            "name": name,
            "context": {"names": [names[p] for p in path], "ids": path},
            "queries": [f"What would you tell me about {name}, point {i}?" for i in range(30)],
        }
        extra = [f"Could you explain {name} from angle {i}?" for i in range(20)]
        if overlap and _overlapping(None, cid):
            entry["queries"][0] = _overlapping(None, cid)
        if extra_queries and cid not in no_training_for:
            entry["extra_queries"] = extra
        data[cid] = entry
        if cid in no_training_for:
            continue
        train[cid] = {
            **{k: v for k, v in entry.items() if k != "extra_queries"},
            "queries": extra,
            "responses": {
                _md5(q): {"safe": "Abstained", "unsafe": f"Here is a fact about {name}."}
                for q in (extra if all_responses else extra[:4])
            },
        }
    (atoms / "data.json").write_text(json.dumps(data, indent=1))
    (atoms / "data.train.json").write_text(json.dumps(train))
    cache = {
        cid: [
            {
                "query": f"Could you explain {name} from angle 0?",
                "response": "Abstained",
                "concept": name,
                "context": [names[p] for p in path],
            },
            {
                "query": "How do volcanoes form?",
                "response": "Magma rises through the crust.",
                "concept": "Volcanoes",
                "context": ["Places"],
            },
        ]
        for cid, name, path in _walk(ATOMS)
    }
    (atoms / "example_cache.json").write_text(json.dumps(cache))
    (atoms / "stats.concepts.json").write_text(
        json.dumps({c: {"freq.ngram.raw": {"C4": 1}} for c in names})
    )

    ctax, cdata, ctrain, ccache = {}, {}, {}, {}
    for relation, rows in COMPOSITIONS.items():
        nodes: dict[tuple, dict] = {}
        ctax[relation], cdata[relation], ctrain[relation], ccache[relation] = {}, {}, {}, {}
        for a, b, parent in rows:
            cname = relation.format(names[a], names[b])
            sel_id = f"{a}#{b}"
            node = {"name": cname, "names": [names[a], names[b]], "ids": [a, b], "children": {}}
            nodes[(a, b)] = node
            (nodes[parent]["children"] if parent else ctax[relation])[sel_id] = node
            entry = {
                "relation": relation,
                "concept": sel_id,
                "name": cname,
                "compositions": {"names": [names[a], names[b]], "ids": [a, b]},
                "context": {"names": None, "ids": None},
                "queries": [f"Tell me about {cname}, aspect {i}." for i in range(20)],
                "extra_queries": [f"Any thoughts on {cname}, take {i}?" for i in range(10)],
            }
            if overlap and _overlapping(relation, sel_id):
                entry["queries"][0] = _overlapping(relation, sel_id)
            cdata[relation][sel_id] = entry
            ctrain[relation][sel_id] = {
                **{k: v for k, v in entry.items() if k != "extra_queries"},
                "queries": entry["extra_queries"],
                "responses": {
                    _md5(q): {"safe": "Abstained", "unsafe": "An answer."}
                    for q in entry["extra_queries"]
                },
            }
            ccache[relation][sel_id] = [
                {
                    "query": entry["extra_queries"][0],
                    "response": "Abstained",
                    "concept": cname,
                    "context": [],
                }
            ]
    (comps / "taxonomy_plus.json").write_text(json.dumps(ctax, indent=1))
    (comps / "data.json").write_text(json.dumps(cdata))
    (comps / "data.train.json").write_text(json.dumps(ctrain))
    (comps / "example_cache.json").write_text(json.dumps(ccache))
    (comps / "hints.json").write_text(json.dumps(HINTS, indent=1))
    describe_release(base)
    if not with_train_file:
        drop = (*drop, "atoms/data.train.json", "compositions/data.train.json")
    for rel in drop:
        (base / rel).unlink()
    return root


def describe_release(base: Path) -> Path:
    """``base/release_manifest.json`` listing what the release under ``base`` holds."""
    from workbench.releases import describe
    from workbench.taxonomy.select_format import count_select

    return describe("select", base, count_select(base), source="tests/select_release.py")
