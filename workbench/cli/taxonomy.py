"""``taxonomy``: build, inspect and query the shipped benchmark.

stats [--json] [--data DIR]        counts of the benchmark in DIR (default data/)
build [--out DIR] [--seed N] ...   rebuild the default benchmark from WordNet 3.0
show CONCEPT_ID [--data DIR]       a concept's ancestors, siblings, descendants, questions
find TEXT [--data DIR]             concepts whose name or id contains TEXT
import-select RELEASE --out DIR    turn SELECT's released files into a benchmark directory
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_commands(commands: argparse._SubParsersAction) -> None:
    ap = commands.add_parser(
        "taxonomy", help="build, inspect and query a benchmark; import SELECT's benchmark"
    )
    ap.set_defaults(fn=_run)
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("stats", help="counts of the benchmark")
    st.add_argument("--json", action="store_true")
    st.add_argument("--data", default=None)
    b = sub.add_parser("build", help="rebuild the default benchmark from WordNet 3.0")
    b.add_argument("--out", default=None)
    b.add_argument("--seed", type=int, default=0, help="seed of the taxonomy and the questions")
    b.add_argument("--wordnet-dir", default=None)
    sh = sub.add_parser("show", help="a concept's place and questions")
    sh.add_argument("concept_id")
    sh.add_argument("--data", default=None)
    fi = sub.add_parser("find", help="concepts whose name or id contains TEXT")
    fi.add_argument("text")
    fi.add_argument("--data", default=None)
    fi.add_argument("--limit", type=int, default=20, help="concepts shown per taxonomy")
    im = sub.add_parser("import-select", help="import SELECT's released data/SELECT files")
    im.add_argument("release", help="a clone of kinshuk-h/SELECT, its data/ or data/SELECT/ folder")
    im.add_argument("--out", required=True, help="benchmark directory to write")
    im.add_argument(
        "--validation",
        type=float,
        default=0.25,
        help="share of each concept's training questions held out for validation",
    )
    im.add_argument("--seed", type=int, default=0, help="seed of the train/validation split")
    im.add_argument(
        "--allow-missing-training",
        action="store_true",
        help="import concepts that have no training questions (a warning, not an "
        "error): the benchmark then serves evaluation and prompting only",
    )
    im.add_argument(
        "--allow-partial",
        action="store_true",
        help="import a release that lacks files, concepts or questions of the "
        "published one (recorded as release_load in the manifest and in rows)",
    )


def _run(args) -> int:
    from workbench.taxonomy.benchmark import (
        build_default_benchmark,
        check_benchmark_folder,
        default_data_dir,
        load_benchmark,
        save_benchmark,
    )
    from workbench.taxonomy.builder import BuildParams
    from workbench.taxonomy.compositions import CompositionParams

    if args.cmd == "find" and args.limit < 1:
        from workbench.errors import ConfigError

        raise ConfigError(f"--limit must be at least 1, got {args.limit}")

    def apart(out, source, option: str) -> None:
        """The benchmark folder ``out`` is not the input folder ``source`` nor inside it."""
        if not out or not source:
            return
        o, s = Path(out).expanduser().resolve(), Path(source).expanduser().resolve()
        if o == s or s in o.parents:
            from workbench.errors import ConfigError

            raise ConfigError(
                f"--out {out} is {'the' if o == s else 'inside the'} {option} folder {source}: "
                "the benchmark would be mixed into what it is read from; choose another folder"
            )

    if args.cmd == "import-select":
        import warnings

        apart(args.out, args.release, "release")
        from workbench.paths import check_writable
        from workbench.taxonomy.select_format import import_select

        check_writable(args.out, "the benchmark folder --out")  # before the import's work
        check_benchmark_folder(args.out)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bench = import_select(
                args.release,
                validation=args.validation,
                seed=args.seed,
                allow_missing_training=args.allow_missing_training,
                allow_partial=args.allow_partial,
            )
        for w in caught:
            print(f"warning: {w.message}", file=sys.stderr)
        out = save_benchmark(bench, args.out)
        print(f"wrote {out}: " + json.dumps(bench.manifest["counts"]))
        print(f"release: {bench.manifest.get('release_load')}")
        return 0
    if args.cmd == "build":
        from workbench.paths import check_writable

        apart(args.out, args.wordnet_dir, "--wordnet-dir")
        out = check_writable(args.out or default_data_dir(), "the benchmark folder --out")
        check_benchmark_folder(out)
        bench = build_default_benchmark(
            BuildParams(seed=args.seed),
            CompositionParams(seed=args.seed),
            question_seed=args.seed,
            wordnet_dir=args.wordnet_dir,
            progress=sys.stderr.isatty(),
        )
        out = save_benchmark(bench, out)
        print(f"wrote {out}: " + json.dumps(bench.manifest["counts"]))
        return 0
    bench = load_benchmark(args.data)
    if args.cmd == "stats":
        stats = bench.stats()
        if args.json:
            print(json.dumps(stats, indent=2))
        else:
            for k, v in stats.items():
                print(f"{k:34s} {v}")
            for line in bench.manifest.get("fallbacks") or ():  # what the import fell back on
                print(f"fallback: {line}")
            for p in (bench.manifest.get("overlap") or {}).get("pairs", ()):
                print(
                    f"excluded from evaluation (also trains {', '.join(p['train_of'])}): "
                    f"{p['question']!r} of {p['eval_of']}"
                )
    elif args.cmd == "show":
        from workbench.taxonomy.summary import concept_summary

        print(json.dumps(concept_summary(bench, args.concept_id, n_questions=5), indent=2))
    elif args.cmd == "find":
        shown = 0
        for label, tax in (("atomic", bench.atomic), ("compositions", bench.compositions)):
            every = tax.find(args.text, limit=len(tax.concepts))
            for c in every[: args.limit]:
                print(f"{c.id:40s} {c.name}  (level {tax.level(c.id)}, {c.kind})")
            shown += len(every)
            if len(every) > args.limit:
                print(
                    f"... {len(every) - args.limit} more {label} concepts match "
                    f"(--limit {len(every)} shows them all)"
                )
        if not shown:
            print(f"no concept's name or id contains {args.text!r}", file=sys.stderr)
            return 1
    return 0
