"""What the published data sets hold, and loads that are whole or say they are not.

Each loader of a published release (UnknownBench, SELECT's benchmark and results, taxi) counts
what it found per file and hands the counts to :func:`check_release`, which compares them with
the release's manifest: :data:`PUBLISHED` (counted on the releases themselves, at the commit
named in ``source``), or a ``release_manifest.json`` in the release's folder that describes
another version (``python -m workbench.releases describe KIND DIR`` writes one from what is
there). The answer is the load's record, kept in every row under :data:`RELEASE_COLUMN`:

* ``"whole"``: everything the manifest lists is there, in full;
* a missing file, a file with fewer items, or a release that differs is a
  :class:`ReleaseError` in one line naming what is missing (and how to allow it), unless the
  caller passed ``allow_partial=True``: then the record is ``"partial: <what is missing>"``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError

#: The column every row of a loaded release carries: "whole" or "partial: ...".
RELEASE_COLUMN = "release_load"
#: A release's own description of what it holds (a newer version, a fixture).
MANIFEST_FILE = "release_manifest.json"
WHOLE = "whole"


class ReleaseError(WorkbenchError):
    """A release on disk is not the whole of what its manifest lists (or a field is malformed)."""


@dataclass(frozen=True)
class ReleaseManifest:
    """What a release holds: per file (relative to the release folder), ``items`` (None: the
    file must be there, its size is not checked) and ``parts`` (named sub-counts, e.g.
    questions, rows per group)."""

    kind: str
    source: str
    files: dict[str, dict[str, Any]]
    unit: str = "items"
    origin: str = "published"  # or the path of the release_manifest.json read

    def total(self) -> int | None:
        """The items of all files together (None where they do not add up: SELECT's files
        each count the same concepts)."""
        counts = [f.get("items") for f in self.files.values()]
        if self.kind == "select":
            return None
        return None if any(c is None for c in counts) else sum(counts)

    def to_json(self) -> dict:
        return {"kind": self.kind, "source": self.source, "unit": self.unit, "files": self.files}


def _m(kind: str, source: str, files: dict, unit: str = "items") -> ReleaseManifest:
    return ReleaseManifest(kind, source, files, unit)


#: The published releases, counted on each repository at the commit named.
PUBLISHED: dict[str, ReleaseManifest] = {
    # genglinliu/UnknownBench data/ (readme.md there lists the same six counts): 13,319 items.
    "unknownbench": _m(
        "unknownbench",
        "github.com/genglinliu/UnknownBench @ 7283e42, data/",
        {
            "NEC/NEC_answerable.json": {"items": 2072},
            "NEC/NEC_unanswerable.json": {"items": 2078},
            "FalseQA/FalseQA_answerable.json": {"items": 2365},
            "FalseQA/FalseQA_unanswerable.json": {"items": 2365},
            "RefuNQ/RefuNQ_answerable.json": {"items": 2266},
            "RefuNQ/RefuNQ_unanswerable.json": {"items": 2173},
        },
    ),
    # kinshuk-h/SELECT data/SELECT: concepts per file (relations' compositions for those of
    # compositions/), questions as parts. atoms/data.train.json's blob was not in the copy
    # counted: it must be there, its size is not checked.
    "select": _m(
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
    ),
    # kinshuk-h/SELECT results/: 4 open models x 5 techniques x 3 evaluation types + 2 API
    # models x 2 prompting techniques x 3, for atoms and compositions: 144 files. The importer
    # derives the same set from the release's config/ (workbench.select.results.expected_files).
    "select-results": _m(
        "select-results",
        "github.com/kinshuk-h/SELECT @ e193764, results/",
        {
            "results/expr.abstain.select": {"items": 72},
            "results/expr.abstain.select.compose": {"items": 72},
        },
        unit="files",
    ),
    # derekpowell/taxi datasets/edits-evaluation.json: 5,560 queries of 976 edits.
    "taxi": _m(
        "taxi",
        "github.com/derekpowell/taxi @ 6b7d41b, datasets/",
        {
            "edits-evaluation.json": {
                "items": 5560,
                "parts": {
                    "edits": 976,
                    "animal queries": 1912,
                    "drink queries": 664,
                    "food queries": 688,
                    "instrument queries": 920,
                    "plant queries": 656,
                    "vehicle queries": 720,
                },
            },
        },
        unit="queries",
    ),
}


def read_manifest(path: str | os.PathLike, kind: str) -> ReleaseManifest:
    """A ``release_manifest.json`` describing a release of ``kind``."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text())
        files = raw["files"]
        if (
            raw.get("kind") != kind
            or not isinstance(files, dict)
            or not all(isinstance(v, dict) for v in files.values())
        ):
            raise ValueError(f"expected kind {kind!r} and files {{path: {{'items': n}}}}")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ReleaseError(f"{p}: not a release manifest of {kind} ({e})") from None
    return ReleaseManifest(
        kind, str(raw.get("source", "")), files, str(raw.get("unit", "items")), origin=str(p)
    )


def manifest_for(kind: str, root: str | os.PathLike) -> ReleaseManifest:
    """``root/release_manifest.json`` when the release describes itself, else the published
    manifest of ``kind``."""
    p = Path(root) / MANIFEST_FILE
    return read_manifest(p, kind) if p.is_file() else PUBLISHED[kind]


@dataclass
class Found:
    """What a loader counted in one file (``items`` None: the file is absent)."""

    items: int | None
    parts: dict[str, int] = field(default_factory=dict)


def _n(x: int) -> str:
    return f"{x:,}"


def compare(manifest: ReleaseManifest, found: dict[str, Found]) -> tuple[list[str], list[str]]:
    """(what is missing or short, what is more or other than the manifest lists), one entry
    per file."""
    short, more, missing = [], [], []
    for rel, want in manifest.files.items():
        got = found.get(rel)
        if got is None or got.items is None:
            missing.append(rel)
            continue
        less, extra = [], []
        counts = [(manifest.unit, want.get("items"), got.items)]
        # a part the loader counted but did not find is none of it
        counts += [
            (part, k, got.parts.get(part, 0 if got.parts else None))
            for part, k in (want.get("parts") or {}).items()
        ]
        for what, k, have in counts:
            if k is None or have is None or have == k:
                continue
            (less if have < k else extra).append(
                f"{_n(have)} {'of' if have < k else 'where the manifest lists'} {_n(k)} {what}"
            )
        if less:
            short.append(f"{rel} has " + ", ".join(less))
        if extra:
            more.append(f"{rel} has " + ", ".join(extra))
    for rel, got in found.items():
        if rel not in manifest.files and got.items is not None:
            more.append(f"{rel} is not in the manifest")
    if missing:
        short.insert(0, "missing " + ", ".join(missing))
    return short, more


def check_release(
    kind: str,
    root: str | os.PathLike,
    found: dict[str, Found],
    allow_partial: bool = False,
    manifest: ReleaseManifest | None = None,
) -> str:
    """The load's record (:data:`RELEASE_COLUMN`) for what was ``found`` under ``root``:
    ``"whole"``, or with ``allow_partial`` ``"partial: ..."``; otherwise a difference from the
    manifest is a :class:`ReleaseError` in one line."""
    manifest = manifest or manifest_for(kind, root)
    short, more = compare(manifest, found)
    if not short and not more:
        return WHOLE if manifest.origin == "published" else f"{WHOLE} (as {manifest.origin} lists)"
    total = manifest.total()
    got = sum(f.items or 0 for f in found.values())
    summary = "; ".join(short + more)
    if total is not None and got != total and len(manifest.files) > 1:
        summary = f"{_n(got)} of {_n(total)} {manifest.unit}; " + summary
    if allow_partial:
        return f"partial: {summary}"
    against = (
        f"the published release ({manifest.source})"
        if manifest.origin == "published"
        else manifest.origin
    )
    if short:
        hint = (
            "get the whole release, or pass allow_partial=True "
            f"(--allow-partial) to load what is there, recorded in every row's {RELEASE_COLUMN}"
        )
        raise ReleaseError(f"{kind} at {root} is incomplete against {against}: {summary}; {hint}")
    hint = (
        f"if this is a newer release, describe it with `python -m workbench.releases describe "
        f"{kind} {root}` (writes {MANIFEST_FILE}) or pass allow_partial=True (--allow-partial), "
        f"recorded in every row's {RELEASE_COLUMN}"
    )
    raise ReleaseError(f"{kind} at {root} differs from {against}: {summary}; {hint}")


def describe(kind: str, root: str | os.PathLike, found: dict[str, Found], source: str = "") -> Path:
    """Write ``root/release_manifest.json`` listing what ``found`` counted (a release that is
    whole as it is: a newer version, or a fixture)."""
    files = {
        rel: {"items": f.items, **({"parts": dict(f.parts)} if f.parts else {})}
        for rel, f in sorted(found.items())
        if f.items is not None
    }
    out = Path(root) / MANIFEST_FILE
    out.write_text(
        json.dumps(
            {
                "kind": kind,
                "source": source or f"described from {root}",
                "unit": PUBLISHED[kind].unit,
                "files": files,
            },
            indent=1,
        )
        + "\n"
    )
    return out


def count_release(kind: str, root: str | os.PathLike) -> tuple[Path, dict[str, Found]]:
    """(the release folder, what it holds) for ``kind``, by the loader's own counting."""
    if kind == "unknownbench":
        from workbench.unknown.datasets import count_unknownbench

        return Path(root), count_unknownbench(root)
    if kind == "select":
        from workbench.taxonomy.select_format import count_select, find_release

        base = find_release(root)
        return base, count_select(base)
    if kind == "taxi":
        from workbench.editing.data import count_taxi, taxi_file

        path = taxi_file(root)
        return path.parent, count_taxi(path)
    raise ReleaseError(f"describe: unknown kind {kind!r} (unknownbench, select, taxi)")


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m workbench.releases",
        description="Check or describe a data set release on disk.",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, text in (
        ("check", "compare a release with its manifest"),
        ("describe", f"write {MANIFEST_FILE} from what a release holds"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("kind", choices=["unknownbench", "select", "taxi"])
        p.add_argument("dir", help="the release folder (taxi: its datasets/ or the file)")
    args = ap.parse_args(argv)
    try:
        base, found = count_release(args.kind, args.dir)
        if args.cmd == "describe":
            print(f"wrote {describe(args.kind, base, found)}")
        else:
            print(check_release(args.kind, base, found))
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
