"""SELECT's released files as they are shaped: finding the release, reading a file (a Git LFS
pointer or a malformed field is an error naming the file and line), counting what a tree or a
question list holds."""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from workbench.taxonomy.compositions import (
    RelationTemplate,
)
from workbench.taxonomy.model import Taxonomy, TaxonomyError
from workbench.taxonomy.questions import (
    FewShotExample,
    QuestionBank,
    ReferenceAnswer,
)
from workbench.taxonomy.select_format.protocol import is_lfs_pointer

#: SELECT's root ids and the root-type keys the workbench uses for them.
ROOT_TYPES = {
    "schema:Product": "products",
    "schema:Person": "people",
    "schema:Place": "places",
    "schema:Organization": "organizations",
    "schema:CreativeWork": "creative works",
}
GENERATOR = "select-gpt-4o"

T = TypeVar("T")


class SelectImportWarning(UserWarning):
    """Part of the release is missing and something falls back (the message says what)."""


@dataclass
class SelectPartition:
    """One partition of the release (atoms or compositions) in the workbench's types."""

    taxonomy: Taxonomy
    questions: QuestionBank
    examples: dict[str, list[FewShotExample]] = field(default_factory=dict)
    answers: dict[str, ReferenceAnswer] = field(default_factory=dict)
    templates: list[RelationTemplate] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    fallbacks: list[str] = field(default_factory=list)  # what is missing and what falls back


def _fallback(part_fallbacks: list[str], message: str) -> None:
    part_fallbacks.append(message)
    warnings.warn(message, SelectImportWarning, stacklevel=3)


def find_release(directory: str | os.PathLike) -> Path:
    """The directory holding ``atoms/``: ``directory`` itself, or its ``SELECT/`` or
    ``data/SELECT/`` (so a clone of the repository works as well as the data folder)."""
    d = Path(directory)
    for cand in (d, d / "SELECT", d / "data" / "SELECT"):
        if (cand / "atoms").is_dir():
            return cand
    raise TaxonomyError(
        f"no SELECT release under {d} (looked for atoms/ in {d}, {d / 'SELECT'} "
        f"and {d / 'data' / 'SELECT'})"
    )


def _read(path: Path, files: dict[str, str] | None = None, base: Path | None = None) -> Any:
    if not path.is_file():
        raise TaxonomyError(f"SELECT file missing: {path}")
    raw = path.read_bytes()
    if not raw.strip():
        raise TaxonomyError(f"{path}: empty file (a Git LFS or partial download?)")
    if is_lfs_pointer(raw):
        raise TaxonomyError(
            f"{path} is a Git LFS pointer, not the data: run `git lfs pull` in "
            "the clone of kinshuk-h/SELECT (or download the file itself)"
        )
    try:
        data = json.loads(raw.decode("utf-8-sig"))  # a byte-order mark is allowed, as json does
    except UnicodeDecodeError as e:
        raise TaxonomyError(
            f"{path}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}): a damaged "
            "download?"
        ) from None
    except json.JSONDecodeError as e:
        raise TaxonomyError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None
    if files is not None:
        files[str(path.relative_to(base)) if base else path.name] = hashlib.sha256(raw).hexdigest()
    return data


def _strings(value: Any, where: str, what: str, key: str | None = None) -> list[str]:
    """``value`` as a list of strings; else an error naming ``where`` (and the line of ``key``
    in it, looked up only then)."""
    if not isinstance(value, list) or not all(isinstance(q, str) for q in value):
        raise TaxonomyError(f"{_at(where, key) if key else where}: {what} is not a list of strings")
    return list(value)


def line_of(path: str | os.PathLike, key: str) -> int | None:
    """The line of ``path`` where the JSON key ``key`` first appears (None if nowhere): where a
    malformed entry is, for the error naming it."""
    needle = json.dumps(key) + ":"
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if needle in line:
                    return n
    except OSError:
        return None
    return None


def _at(where: str, key: str) -> str:
    n = line_of(where, key)
    return f"{where}, line {n}" if n else where


def _tree_size(tree: Any) -> int:
    if not isinstance(tree, dict):
        return 0
    return sum(
        1 + _tree_size(n.get("children") if isinstance(n, dict) else None) for n in tree.values()
    )


def _total(entries, key: str, where: Path | None = None) -> int:
    """How many ``key`` (questions, responses) the entries hold; with ``where``, an entry whose
    ``key`` is not a list of strings (or an object, for responses) is an error naming the file
    and line."""
    n = 0
    for name, e in entries:
        value = e.get(key) if isinstance(e, dict) else None
        if value is None:
            continue
        ok = (
            isinstance(value, dict)
            if key == "responses"
            else (isinstance(value, list) and all(isinstance(q, str) for q in value))
        )
        if not ok and where is not None:
            what = "an object" if key == "responses" else "a list of strings"
            raise TaxonomyError(
                f"{_at(str(where), name)}: {name!r} {key!r} is not {what} "
                f"(got {type(value).__name__} {value!r:.60})"
            )
        n += len(value) if ok else 0
    return n
