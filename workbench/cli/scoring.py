"""``scoring``: check refusal detectors against labelled responses.

    agreement [--labels FILE|DIR ...] [--split test|dev|all] [--judge MODEL] [--csv PATH]
    labels LOG [--out CSV]

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
    pred = detector_predictions(labels, judge)
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
