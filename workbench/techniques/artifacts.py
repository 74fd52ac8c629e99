"""Prepared artifacts (vectors, adapters, few-shot answers), saved with what they depend on.

An artifact's ``meta.json`` records the model id and revision, the technique and its parameters,
the fingerprint of the training questions, and a format version. The store finds an artifact by
the hash of that record, so any change means a new artifact; loading one checks the record
field by field, so an artifact prepared for another model or setting is an error naming the
difference, never a silent reuse. Artifacts are written to a temporary directory and renamed
into place, so an interrupted preparation leaves nothing half-written.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.paths import atomic_directory, cache_home

META = "meta.json"


class ArtifactMismatchError(WorkbenchError):
    """A saved artifact was prepared under other conditions than the ones asked for."""


def meta_hash(meta: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode()).hexdigest()


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def check_meta(path: str | os.PathLike, expected: dict[str, Any]) -> dict[str, Any]:
    """Load ``path``'s meta and raise :class:`ArtifactMismatchError` naming any difference."""
    p = Path(path) / META
    if not p.is_file():
        raise ArtifactMismatchError(f"{path} is not a prepared artifact (no {META})")
    found = json.loads(p.read_text())
    a, b = _flatten(json.loads(json.dumps(expected, default=str))), _flatten(found)
    diffs = [
        f"{k}: saved {b.get(k)!r}, asked {a.get(k)!r}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]
    if diffs:
        raise ArtifactMismatchError(f"artifact {path} does not match: " + "; ".join(diffs[:6]))
    return found


class ArtifactStore:
    """Artifacts under ``root/<technique>/<hash of meta>``; default root: the workbench cache."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root else cache_home() / "artifacts"

    def path_for(self, meta: dict[str, Any]) -> Path:
        return self.root / str(meta.get("technique", "misc")) / meta_hash(meta)[:20]

    def lookup(self, meta: dict[str, Any]) -> Path | None:
        """The artifact for ``meta`` if it exists (checked field by field), else None."""
        p = self.path_for(meta)
        if (p / META).is_file():
            check_meta(p, meta)
            return p
        return None

    @contextmanager
    def create(self, meta: dict[str, Any]) -> Iterator[Path]:
        """Yield a temporary directory to write into; on success it becomes the artifact."""
        with atomic_directory(self.path_for(meta)) as tmp:
            yield tmp
            (tmp / META).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
