"""What the published data sets hold, and loads that are whole or say they are not.

Generic: it knows no data set. Each loader of a published release registers the release's
manifest from its own module (:func:`register`: counted on the release itself, at the commit
named in ``source``), counts what it found per file and hands the counts to
:func:`check_release`, which compares them with that manifest (:func:`published`) or a ``release_manifest.json`` in the release's folder that describes
another version (``python -m workbench releases describe KIND DIR`` writes one from what is
there; :mod:`workbench.cli.releases` lists the registered kinds). The answer is the load's record, kept in every row under :data:`RELEASE_COLUMN`:

* ``"whole"``: everything the manifest lists is there, in full;
* a missing file, a file with fewer items, or a release that differs is a
  :class:`ReleaseError` in one line naming what is missing (and how to allow it), unless the
  caller passed ``allow_partial=True``: then the record is ``"partial: <what is missing>"``.

:func:`shortfall` is the check underneath (what is absent, what holds another count), the one
every reader of published files shares: the refusal suite's prompt sets and shards, the outside
labelled sources and UnknownBench's published outputs word their own errors from it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.registry import Registry

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
    additive: bool = True  # the files' items add up (False: each counts the same things)

    def total(self) -> int | None:
        """The items of all files together (None where they do not add up, as in a release
        whose files each count the same concepts)."""
        counts: list[int | None] = [f.get("items") for f in self.files.values()]
        if not self.additive or any(c is None for c in counts):
            return None
        return sum(c for c in counts if c is not None)

    def to_json(self) -> dict:
        return {"kind": self.kind, "source": self.source, "unit": self.unit, "files": self.files}


@dataclass(frozen=True)
class ReleaseKind:
    """A published data set the workbench loads: its manifest, and how to find and count a copy
    on disk (``locate(root) -> (release folder, {file: Found})``; None: it is checked by its
    loader only, not by the ``describe``/``check`` command)."""

    manifest: ReleaseManifest
    locate: Callable[[str | os.PathLike], tuple[Path, dict[str, Found]]] | None = None


#: Kind -> its published manifest and how to find and count it on disk, filled by the data
#: sets' own modules (:func:`register`).
KINDS: Registry[ReleaseKind] = Registry("release kind")


def published(kind: str) -> ReleaseManifest:
    """The published manifest of ``kind`` (an unknown kind: one line naming the known ones)."""
    return KINDS[kind].manifest


def register(
    kind: str,
    source: str,
    files: dict[str, dict[str, Any]],
    *,
    unit: str = "items",
    additive: bool = True,
    locate: Callable[[str | os.PathLike], tuple[Path, dict[str, Found]]] | None = None,
) -> ReleaseManifest:
    """Register the published release ``kind`` (called by its loader's module): what each of its
    ``files`` holds (``{"items": n, "parts": {...}}``), counted on the repository ``source``
    names. ``additive``: the files' items add up to the release's size (False where every file
    counts the same things, as SELECT's do)."""
    manifest = ReleaseManifest(kind, source, files, unit, additive=additive)
    KINDS.register(kind, ReleaseKind(manifest, locate))
    return manifest


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
    entry = KINDS.get(kind)
    return ReleaseManifest(
        kind,
        str(raw.get("source", "")),
        files,
        str(raw.get("unit", "items")),
        origin=str(p),
        additive=entry.manifest.additive if entry else True,
    )


def manifest_for(kind: str, root: str | os.PathLike) -> ReleaseManifest:
    """``root/release_manifest.json`` when the release describes itself, else the published
    manifest of ``kind``."""
    p = Path(root) / MANIFEST_FILE
    return read_manifest(p, kind) if p.is_file() else published(kind)


@dataclass
class Found:
    """What a loader counted in one file (``items`` None: the file is absent)."""

    items: int | None
    parts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Shortfall:
    """How what a reader found falls short of what a release holds (:func:`shortfall`):
    the names absent, in the release's order, and ``(name, found, published)`` for each whose
    count differs."""

    missing: tuple[str, ...] = ()
    differ: tuple[tuple[str, int, int], ...] = ()

    @property
    def whole(self) -> bool:
        return not self.missing and not self.differ


def shortfall(published: Mapping[str, int | None], found: Mapping[str, int | None]) -> Shortfall:
    """The one "is it whole?" check every reader of a published release makes: each name
    ``published`` lists (a file, a shard, a set) must be in ``found`` (a count of None there:
    absent), holding as many items as published (None there: present is enough). Names found
    that are not published are not a shortfall (:func:`compare` reports them as more). Each
    reader words the answer its own way: :func:`check_release`, the refusal suite's prompt sets
    and shards, the outside labelled sources and UnknownBench's published outputs."""
    missing, differ = [], []
    for name, want in published.items():
        have = found.get(name)
        if have is None:
            missing.append(name)
        elif want is not None and have != want:
            differ.append((name, have, want))
    return Shortfall(tuple(missing), tuple(differ))


def _n(x: int) -> str:
    return f"{x:,}"


def compare(manifest: ReleaseManifest, found: dict[str, Found]) -> tuple[list[str], list[str]]:
    """(what is missing or short, what is more or other than the manifest lists), one entry
    per file."""
    short: list[str] = []
    more: list[str] = []
    missing = shortfall(
        {rel: want.get("items") for rel, want in manifest.files.items()},
        {rel: got.items for rel, got in found.items()},
    ).missing
    for rel, want in manifest.files.items():
        got = found.get(rel)
        if got is None or got.items is None:
            continue
        less: list[str] = []
        extra: list[str] = []
        counts: list[tuple[str, Any, int | None]] = [(manifest.unit, want.get("items"), got.items)]
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
        f"if this is a newer release, describe it with `python -m workbench releases describe "
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
    if not files:  # a manifest of nothing would make `releases check` call the folder whole
        from workbench.errors import ConfigError

        raise ConfigError(
            f"no file of a {kind} release found under {root}: nothing to describe (is it the "
            "release's folder?)"
        )
    from workbench.paths import check_writable_file, write_text_atomic

    out = check_writable_file(Path(root) / MANIFEST_FILE, "the release manifest")
    write_text_atomic(
        out,
        json.dumps(
            {
                "kind": kind,
                "source": source or f"described from {root}",
                "unit": published(kind).unit,
                "files": files,
            },
            indent=1,
        )
        + "\n",
    )
    return out
