"""``scoring``: check refusal detectors against labelled responses.

    agreement [--labels FILE|DIR ...] [--split test|dev|all] [--judge MODEL] [--probe [HEAD]]
        [--csv PATH]
    labels LOG [--out CSV]
    probe [ROOT] [--labels FILE|DIR ...] [--sources ...] [--cap N] [--out PATH] [--record]

prints, for every detector (and the judge when ``--judge`` names a model), accuracy, precision,
recall, Cohen's kappa and the confusion counts, overall; then n and kappa per source and per
model family, accuracy per style, and how the phrase detector's ``partial`` flag tracks labelled
partial refusals. ``--labels`` takes the shipped set's directory (the default, ``data/labels``)
or a labels file (JSON Lines, as the labelling widget writes; see ``workbench.scoring.labels``),
and may be repeated. The split defaults to ``test`` for the shipped set and ``all`` when only
labels files are given (their labels never served to write the rules).

``labels`` writes a labels log's labels as they stand (one row per labelled answer: the last
label of each, withdrawn ones left out) to ``<stem>.current.csv`` beside it, or ``--out``: the
table to load with pandas (the labeller keeps it up to date by itself).

``probe`` trains the learned refusal detector (``workbench.scoring.probe``) from the labelled
sets under ROOT (XSTest v2/v1, GPTFuzz, as downloaded from their authors), the shipped labels'
development half and any ``--labels``, first judging it on each model it never saw (leave one
model out, beside the rule detectors), then fitting the head on everything and saving it to
``--out``. ``--record`` also writes the judging run to docs/results/refusal_probe.json (the
docs' table: ``python -m workbench tables``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.errors import WorkbenchError


def add_commands(commands: argparse._SubParsersAction) -> None:
    ap = commands.add_parser(
        "scoring", help="refusal detectors against labelled answers; labels as they stand"
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    ag = sub.add_parser("agreement", help="detectors against labelled responses")
    ag.set_defaults(fn=_agreement)
    ag.add_argument(
        "--split",
        choices=("test", "dev", "all"),
        default=None,
        help="test (never used to write the rules), dev, or all; default: test for "
        "the shipped set, all when only labels files are given",
    )
    ag.add_argument(
        "--judge", default=None, help="a model to judge with (registered name, path or hub id)"
    )
    ag.add_argument(
        "--labels",
        action="append",
        default=None,
        metavar="FILE|DIR",
        help="a labels file (JSONL) or a labelled set directory (default data/labels); "
        "repeat to combine",
    )
    ag.add_argument(
        "--probe",
        nargs="?",
        const="shipped",
        default=None,
        metavar="HEAD",
        help="also the learned refusal probe (the shipped head, or a head file)",
    )
    ag.add_argument(
        "--csv",
        default=None,
        help="also write every table here, long form (columns by, group, detector, ...)",
    )
    lb = sub.add_parser("labels", help="a labels log's labels as they stand, as CSV")
    lb.set_defaults(fn=_labels)
    lb.add_argument("log", help="the labels file (JSON Lines) the labeller writes")
    lb.add_argument(
        "--out", default=None, help="where to write (default: <stem>.current.csv beside the log)"
    )

    pr = sub.add_parser("probe", help="train the learned refusal detector; judge it per model")
    pr.set_defaults(fn=_probe)
    pr.add_argument("root", nargs="?", default=None, help="directory holding the sources")
    pr.add_argument(
        "--sources",
        default=None,
        help="outside sources, comma-separated (default: the human-labelled xstest,xstest_v1; "
        "gptfuzz, select too)",
    )
    pr.add_argument(
        "--labels", action="append", default=[], metavar="FILE|DIR", help="labels files too"
    )
    pr.add_argument(
        "--no-shipped-labels", action="store_true", help="leave out data/labels' dev half"
    )
    pr.add_argument(
        "--cap",
        type=_count_or_all,
        default=1000,
        help="answers kept per source and model at most ('all': every one)",
    )
    pr.add_argument("--c", type=float, default=0.05, help="inverse L2 strength (not tuned)")
    pr.add_argument(
        "--out", default=None, help="where the head goes (default: the workbench cache's probe/)"
    )
    pr.add_argument("--no-loso", action="store_true", help="fit only, skip the judging")
    pr.add_argument("--record", action="store_true", help="write docs/results/refusal_probe.json")


def _count_or_all(value: str) -> int | None:
    """``--cap``'s value: a number of answers, or None for ``all``."""
    if value.strip().lower() == "all":
        return None
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a number of answers (or 'all')"
        ) from None


def _probe(args) -> int:
    import sys
    import time

    from workbench.paths import cache_home, check_writable_file, repo_root
    from workbench.scoring.outside import HUMAN_SOURCES
    from workbench.scoring.probe.report import judge_and_train

    out = Path(args.out) if args.out else cache_home() / "probe" / "refusal_probe.json"
    check_writable_file(out, "the --out file", [], own='{\n "format": "workbench-refusal-probe')
    began = time.perf_counter()
    rec = judge_and_train(
        root=args.root,
        sources=(
            tuple(s.strip() for s in args.sources.split(",") if s.strip())
            if args.sources is not None
            else HUMAN_SOURCES
        ),
        labels=args.labels,
        shipped=not args.no_shipped_labels,
        cap=args.cap,
        c=args.c,
        out=out,
        loso=not args.no_loso,
        command=" ".join(  # the sources' directory is the reader's own: named DIR
            ["python -m workbench scoring probe"]
            + ["DIR" if a == args.root else a for a in sys.argv[3:]]
        ),
    )
    if args.record:
        import pandas as pd

        from workbench.experiments.verify import machine
        from workbench.plots.reliability import plot_reliability
        from workbench.plots.save import save_figure
        from workbench.tables.measured import RESULTS_DIR, write_record

        seconds = time.perf_counter() - began
        rec["machine"] = {
            **machine(),
            "dtype": "float32",
            "numerics": "reproducible",
            "seconds": seconds,
        }
        import json

        # numpy's numbers as plain ones (json knows no int64)
        plain = json.loads(
            json.dumps(rec, default=lambda o: o.item() if hasattr(o, "item") else str(o))
        )
        print(f"record -> {write_record(RESULTS_DIR / 'refusal_probe.json', plain)}")
        if "reliability" in rec:
            fig = plot_reliability(pd.DataFrame(rec["reliability"]))
            for p in save_figure(
                fig, "refusal_probe_reliability", repo_root() / "docs" / "figures", width="column"
            ):
                print(f"figure -> {p}")
    return 0


def _labels(args) -> int:
    from workbench.paths import check_writable_file, read_utf8
    from workbench.scoring.labels import current_labels_path, write_current_labels

    log = Path(args.log)
    if not log.is_file():
        raise WorkbenchError(f"no labels file {log}")
    from workbench.scoring.labels import CURRENT_COLUMNS

    out = check_writable_file(
        args.out or current_labels_path(log),
        "the --out file",
        [log],
        own=",".join(CURRENT_COLUMNS[:2]) + ",",
    )
    import warnings

    lines = sum(1 for line in read_utf8(log).splitlines() if line.strip())
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        n = write_current_labels(log, out)
    for w in said:  # shown, and not counted as superseded
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    torn = sum("incomplete last line" in str(w.message) for w in said)
    skipped = f", {torn} incomplete last line skipped" if torn else ""
    print(
        f"{n} labels as they stand -> {out} (from {lines} lines of {log}: "
        f"{lines - n - torn} superseded labels and withdrawals{skipped})"
    )
    return 0


def _agreement(args) -> int:
    import pandas as pd

    from workbench.paths import atomic_file, check_writable_file
    from workbench.scoring.agreement import (
        agreement_groups,
        agreement_table,
        detector_predictions,
        kappa_by,
        partial_tracking,
    )
    from workbench.scoring.labels import default_labels_dir, load_agreement_set

    inputs = [Path(p) for p in args.labels] if args.labels else [default_labels_dir()]
    if args.csv:  # before the labels are read and a judge loads
        check_writable_file(args.csv, "the --csv file", inputs, own="by,group,")
    split = args.split or ("all" if all(p.is_file() for p in inputs) else "test")
    labels = load_agreement_set(inputs)
    if split != "all":
        labels = labels[labels["split"] == split]
    if labels.empty:
        raise WorkbenchError(
            f"no labelled responses in the {split} split of {', '.join(map(str, inputs))}"
        )
    judge = None
    if args.judge:
        from workbench.backends import load_model
        from workbench.scoring.judge import LLMJudge

        judge = LLMJudge(load_model(args.judge))
    probe = None
    if args.probe:
        from workbench.scoring.probe import RefusalProbe

        probe = RefusalProbe(None if args.probe == "shipped" else args.probe)
    pred = detector_predictions(labels, judge, probe=probe)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    cols = ["detector", "n", "accuracy", "precision", "recall", "kappa", "tp", "fp", "fn", "tn"]
    print(
        f"labelled set ({', '.join(map(str, inputs))}), split={split}: {len(labels)} responses "
        f"({(labels['label'] == 'refusal').sum()} refusals, {(labels['label'] == 'partial').sum()} "
        f"partial refusals, {(labels['label'] == 'compliance').sum()} compliances)\n"
    )
    print(agreement_table(pred)[cols].round(3).to_string(index=False))
    for by, title in (("source", "per source"), ("family", "per model family")):
        print(f"\n{title} (n, then Cohen's kappa; NaN where one class is missing):")
        print(kappa_by(agreement_table(pred, by=by), by).round(3).to_string())
    by_style = agreement_table(pred, by="style")
    print("\nper style (accuracy / kappa where both classes occur):")
    print(by_style.pivot(index="style", columns="detector", values="accuracy").round(2).to_string())
    p = partial_tracking(pred)
    print(
        f"\nphrase 'partial' flag against labelled partial refusals: precision {p['precision']:.2f}, "
        f"recall {p['recall']:.2f} ({p['tp']} of {p['tp'] + p['fn']})"
    )
    if judge is not None:
        print(f"judge probability mass on the two labels: mean {pred['judge_mass'].mean():.2f}")
    if args.csv:
        with atomic_file(args.csv) as tmp:
            agreement_groups(pred).to_csv(tmp, index=False, float_format="%.3f")
    return 0
