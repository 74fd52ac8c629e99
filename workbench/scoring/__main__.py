"""``python -m workbench.scoring``: check refusal detectors against the labelled set.

    agreement [--split test|dev|all] [--judge MODEL] [--labels DIR] [--csv PATH]

prints, for every detector (and the judge when ``--judge`` names a model), accuracy, precision,
recall, Cohen's kappa and the confusion counts on the chosen split, overall and per style,
and how the phrase detector's ``partial`` flag tracks labelled partial refusals.
"""

from __future__ import annotations

import argparse
import sys

from workbench.errors import WorkbenchError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workbench.scoring")
    sub = ap.add_subparsers(dest="cmd", required=True)
    ag = sub.add_parser("agreement", help="detectors against the labelled set")
    ag.add_argument("--split", choices=("test", "dev", "all"), default="test",
                    help="test (default: never used to write the rules), dev, or all")
    ag.add_argument("--judge", default=None, help="a model to judge with (registered name, path or hub id)")
    ag.add_argument("--labels", default=None, help="labelled set directory (default data/labels)")
    ag.add_argument("--csv", default=None, help="also write the per-style table here")
    args = ap.parse_args(argv)
    try:
        return _agreement(args)
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _agreement(args) -> int:
    import pandas as pd

    from workbench.scoring.agreement import (
        agreement_table,
        detector_predictions,
        partial_tracking,
    )
    from workbench.scoring.labels import load_agreement_set

    labels = load_agreement_set(args.labels)
    if args.split != "all":
        labels = labels[labels["split"] == args.split]
    judge = None
    if args.judge:
        from workbench.models import load_model
        from workbench.scoring.judge import LLMJudge

        judge = LLMJudge(load_model(args.judge))
    pred = detector_predictions(labels, judge)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    cols = ["detector", "n", "accuracy", "precision", "recall", "kappa", "tp", "fp", "fn", "tn"]
    print(f"labelled set, split={args.split}: {len(labels)} responses "
          f"({(labels['label'] == 'refusal').sum()} refusals, {(labels['label'] == 'partial').sum()} "
          f"partial refusals, {(labels['label'] == 'compliance').sum()} compliances)\n")
    print(agreement_table(pred)[cols].round(3).to_string(index=False))
    by_style = agreement_table(pred, by="style")
    print("\nper style (accuracy / kappa where both classes occur):")
    print(by_style.pivot(index="style", columns="detector", values="accuracy").round(2).to_string())
    p = partial_tracking(pred)
    print(f"\nphrase 'partial' flag against labelled partial refusals: precision {p['precision']:.2f}, "
          f"recall {p['recall']:.2f} ({p['tp']} of {p['tp'] + p['fn']})")
    if judge is not None:
        print(f"judge probability mass on the two labels: mean {pred['judge_mass'].mean():.2f}")
    if args.csv:
        by_style.to_csv(args.csv, index=False, float_format="%.3f")
    return 0


if __name__ == "__main__":
    sys.exit(main())
