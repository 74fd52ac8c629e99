"""Every published release the workbench loads, registered by importing the loaders that own
them, and the ``check`` / ``describe`` command over them (``python -m workbench.releases``).

The one place that names the data sets: :mod:`workbench.releases` itself stays generic.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import workbench.editing.data
import workbench.select.results.release
import workbench.taxonomy.select_format
import workbench.unknown.datasets  # noqa: F401  (registers unknownbench)
from workbench.errors import WorkbenchError
from workbench.releases import (
    KINDS,
    MANIFEST_FILE,
    PUBLISHED,
    Found,
    ReleaseError,
    check_release,
    describe,
)

__all__ = ["KINDS", "PUBLISHED", "count_release", "main"]


def count_release(kind: str, root: str | os.PathLike) -> tuple[Path, dict[str, Found]]:
    """(the release folder, what it holds) for ``kind``, by the loader's own counting."""
    entry = KINDS.get(kind)
    if entry is None or entry.locate is None:
        known = ", ".join(k for k, e in KINDS.items() if e.locate is not None)
        raise ReleaseError(f"describe: unknown kind {kind!r} ({known})")
    return entry.locate(root)


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
        p.add_argument("kind", choices=[k for k, e in KINDS.items() if e.locate is not None])
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
