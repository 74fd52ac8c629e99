"""``releases check|describe KIND DIR`` over every published release the workbench loads, and
``import-select-results`` (SELECT's released results as a run, with SELECT's table).

The one place that names the data sets: :mod:`workbench.releases` itself stays generic, and each
kind is registered by the module that loads it, imported here only when a command needs it.
"""

from __future__ import annotations

import argparse
import importlib
import os
from pathlib import Path

#: Release kind -> the module that registers it (imported when the command runs).
RELEASE_MODULES = {
    "select": "workbench.taxonomy.select_format",
    "select-results": "workbench.tables.select_results.release",
    "taxi": "workbench.editing.data",
    "unknownbench": "workbench.unknown.datasets",
}
#: What DIR may be for each kind (the repository's root works for all of them).
WHERE = {
    "select": "a clone of kinshuk-h/SELECT, its data/ or data/SELECT/",
    "select-results": "a clone of kinshuk-h/SELECT or its results/",
    "taxi": "a clone of taxi, its datasets/ or edits-evaluation.json",
    "unknownbench": "a clone of genglinliu/UnknownBench or its data/",
}


def register_all():
    """Import every module that registers a release kind; return the kinds registry."""
    from workbench.releases import KINDS

    for module in RELEASE_MODULES.values():
        importlib.import_module(module)
    return KINDS


def count_release(kind: str, root: str | os.PathLike):
    """(the release folder, what it holds) for ``kind``, by the loader's own counting."""
    from workbench.releases import KINDS

    importlib.import_module(RELEASE_MODULES[kind])
    locate = KINDS[kind].locate
    assert locate is not None  # every kind the command offers counts itself
    return locate(root)


def _check(args) -> int:
    from workbench.releases import check_release, describe

    base, found = count_release(args.kind, args.dir)
    if args.cmd == "describe":
        print(f"wrote {describe(args.kind, base, found)}")
    else:
        print(check_release(args.kind, base, found, allow_partial=args.allow_partial))
    return 0


def _import_select_results(args) -> None:
    import pandas as pd

    from workbench.errors import ConfigError
    from workbench.paths import check_run_name
    from workbench.scoring.metrics import select_wide
    from workbench.tables.select_results import (
        TECHNIQUES,
        check_detector,
        detector_functions,
        import_select_results,
        select_results_table,
    )
    from workbench.taxonomy import load_benchmark

    if args.workers is not None and args.workers < 1:  # before anything is read
        raise ConfigError(f"--workers must be at least 1, got {args.workers}")
    check_run_name(args.run, "--run")
    bench = load_benchmark(args.benchmark)
    check_detector(args.detector, list(detector_functions(bench)))  # before the import
    report = import_select_results(
        args.release,
        bench,
        run_name=args.run,
        root=args.root,
        models=args.models or None,
        progress=not args.quiet,
        workers=args.workers,
        allow_partial=args.allow_partial,
    )
    print(report.summary())
    table = select_results_table(report.results_path, args.detector)
    print(f"\nSELECT's aggregation of {args.detector} (mean ± 95% t-interval over concepts):")
    with pd.option_context(
        "display.width", 200, "display.max_columns", None, "display.max_rows", None
    ):
        print(
            select_wide(table, order=list(TECHNIQUES.values())).to_string()
            if len(table)
            else "(no rows)"
        )


ALLOW_PARTIAL = (
    "take what is there when files are absent, short or unreadable (a load records it in "
    "every row's release_load)"
)


def add_commands(commands: argparse._SubParsersAction) -> None:
    from workbench.releases import MANIFEST_FILE

    ap = commands.add_parser("releases", help="check or describe a published data set on disk")
    sub = ap.add_subparsers(dest="cmd", required=True)
    where = "; ".join(f"{k}: {v}" for k, v in WHERE.items())
    for name, text in (
        ("check", "compare a release with its published manifest"),
        ("describe", f"write {MANIFEST_FILE} from what a release holds"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("kind", choices=list(RELEASE_MODULES))
        p.add_argument("dir", type=Path, help=f"the release ({where})")
        if name == "check":
            p.add_argument("--allow-partial", action="store_true", help=ALLOW_PARTIAL)
        p.set_defaults(fn=_check, allow_partial=False)

    isr = commands.add_parser(
        "import-select-results",
        help="import SELECT's released results as a run and print SELECT's table",
    )
    isr.add_argument("release", help="clone of SELECT's repository (with results/ and config/)")
    isr.add_argument(
        "--benchmark",
        required=True,
        help="the benchmark imported from it (python -m workbench taxonomy import-select)",
    )
    isr.add_argument("--run", required=True, help="run name: writes runs/<NAME>/results.parquet")
    isr.add_argument(
        "--models", nargs="*", default=[], help="SELECT aliases or model ids (default: all)"
    )
    isr.add_argument("--root", default=None, help="runs directory (default runs/)")
    isr.add_argument("--workers", type=int, default=None, help="processes (default: up to 2)")
    isr.add_argument(
        "--detector",
        default="select_flag_heuristic",
        help="column the table aggregates (default: SELECT's stored heuristic flag)",
    )
    isr.add_argument("--quiet", action="store_true", help="no line per file")
    isr.add_argument("--allow-partial", action="store_true", help=ALLOW_PARTIAL)
    isr.set_defaults(fn=_import_select_results)
