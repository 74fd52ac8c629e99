"""What SELECT's published benchmark holds (its registered manifest) and the check of a copy on
disk against it."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.releases import Found, check_release, register
from workbench.taxonomy.select_format.files import _read, _total, _tree_size, find_release


def count_select(base: str | os.PathLike) -> dict:
    """What each file of the release under ``base`` (the folder holding ``atoms/``) holds, as
    :data:`SELECT_RELEASE` counts it: concepts per file, questions and examples
    as parts."""
    base = Path(base)
    found: dict[str, Found] = {}

    def read(rel: str):
        if not (base / rel).is_file():
            found[rel] = Found(None)
            return None
        return _read(base / rel)

    def values(d) -> list:
        return list(d.values()) if isinstance(d, dict) else []

    def items(d) -> list:
        return list(d.items()) if isinstance(d, dict) else []

    def nested(d) -> list:  # compositions' files: {relation: {id: entry}}
        return [e for per in values(d) for e in values(per)]

    def nested_items(d) -> list:
        return [kv for per in values(d) for kv in items(per)]

    def questions_and_examples(part: str, entries, entry_items) -> None:
        """data.json, data.train.json and example_cache.json of ``part`` (atoms: {id: entry};
        compositions: {relation: {id: entry}}, read by ``entries`` / ``entry_items``)."""
        for name, keys in (
            ("data.json", ("queries", "extra_queries")),
            ("data.train.json", ("queries", "responses")),
        ):
            d = read(f"{part}/{name}")
            if d is not None:
                found[f"{part}/{name}"] = Found(
                    len(entries(d)),
                    {k: _total(entry_items(d), k, base / part / name) for k in keys},
                )
        d = read(f"{part}/example_cache.json")
        if d is not None:
            found[f"{part}/example_cache.json"] = Found(
                len(entries(d)),
                {"examples": sum(len(v) for v in entries(d) if isinstance(v, list))},
            )

    t = read("atoms/taxonomy_plus.json")
    if t is not None:
        found["atoms/taxonomy_plus.json"] = Found(_tree_size(t))
    questions_and_examples("atoms", values, items)
    t = read("compositions/taxonomy_plus.json")
    if t is not None:
        found["compositions/taxonomy_plus.json"] = Found(
            sum(_tree_size(r) for r in values(t)), {"relations": len(values(t))}
        )
    questions_and_examples("compositions", nested, nested_items)
    d = read("compositions/hints.json")
    if d is not None:
        found["compositions/hints.json"] = Found(len(d) if isinstance(d, list) else 0)
    return found


def _locate_select(root: str | os.PathLike) -> tuple[Path, dict[str, Found]]:
    base = find_release(root)
    return base, count_select(base)


#: kinshuk-h/SELECT data/SELECT: concepts per file (relations' compositions for those of
#: compositions/), questions as parts. atoms/data.train.json's blob was not in the copy
#: counted: it must be there, its size is not checked.
SELECT_RELEASE = register(
    "select",
    "github.com/kinshuk-h/SELECT @ e193764, data/SELECT/",
    {
        "atoms/taxonomy_plus.json": {"items": 394},
        "atoms/data.json": {"items": 394, "parts": {"queries": 11820, "extra_queries": 7880}},
        "atoms/data.train.json": {"items": None},
        "atoms/example_cache.json": {"items": 394, "parts": {"examples": 1784}},
        "compositions/taxonomy_plus.json": {"items": 156, "parts": {"relations": 11}},
        "compositions/data.json": {
            "items": 156,
            "parts": {"queries": 3120, "extra_queries": 1560},
        },
        "compositions/data.train.json": {
            "items": 156,
            "parts": {"queries": 1560, "responses": 1560},
        },
        "compositions/example_cache.json": {"items": 156, "parts": {"examples": 730}},
        "compositions/hints.json": {"items": 12},
    },
    unit="concepts",
    additive=False,  # each file counts the same concepts
    locate=_locate_select,
)


def check_select_release(base: str | os.PathLike, allow_partial: bool = False) -> str:
    """The import's record ("whole" / "partial: ...") of the release under ``base`` against
    the published one (:data:`SELECT_RELEASE`) or its ``release_manifest.json``;
    a missing file or fewer concepts or questions is an error naming them unless
    ``allow_partial``."""
    return check_release("select", Path(base), count_select(base), allow_partial)
