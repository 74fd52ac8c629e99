"""``unknown build``: rebuild the shipped UnknownBench-style data sets; ``unknown
score-outputs``: score published outputs (UnknownBench's GPT-4 files, say) with the paper's
rules."""

from __future__ import annotations

import argparse
import json


def _build(args) -> None:
    from workbench.paths import check_folder_of, check_writable, repo_root
    from workbench.unknown.datasets import build_unknown_dataset, save_unknown_dataset

    out = args.out or str(repo_root() / "data" / "unknown")
    check_writable(out, "the dataset folder --out")  # before the build's work
    check_folder_of(
        out,
        "--out",
        "UnknownBench data set",
        lambda m: (
            isinstance(m.get("files"), dict) and any(k.startswith("NEC/") for k in m["files"])
        ),
    )
    ds = build_unknown_dataset(seed=args.seed, wordnet_dir=args.wordnet_dir)
    save_unknown_dataset(ds, out)
    print(f"wrote {out}: " + json.dumps(ds.manifest["counts"]))


def _score_outputs(args) -> None:
    import pandas as pd

    from workbench.paths import atomic_file, check_writable_file
    from workbench.unknown.measures import summarize_unknown
    from workbench.unknown.outputs import read_outputs

    if args.out:  # before the files are read
        check_writable_file(args.out, "the --out file", args.paths, own="model,task,")
    rows = read_outputs(args.paths, model=args.model)
    cols = [
        "task",
        "partition",
        "n",
        "refusal_rate",
        "phrase_refusal_rate",
        "unknownbench_accuracy",
        "mean_confidence",
    ]
    with pd.option_context("display.width", 160, "display.max_rows", 200):
        for model, f in rows.groupby("model", sort=True):
            table = summarize_unknown(f)
            print(
                f"{model}: {len(f)} answers; refusal_rate is UnknownBench's rule "
                f"({table['detector'].iloc[0]}), accuracy its gold-substring rule"
            )
            print(table[[c for c in cols if c in table]].round(3).to_string(index=False) + "\n")
    if args.out:
        with atomic_file(args.out) as tmp:
            rows.to_csv(tmp, index=False)
        print(f"wrote {len(rows)} rows to {args.out}")


def add_commands(commands: argparse._SubParsersAction) -> None:
    ap = commands.add_parser(
        "unknown", help="UnknownBench: rebuild the shipped sets, score published outputs"
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="rebuild the shipped data sets (data/unknown)")
    b.add_argument("--out", default=None, help="the folder to write (default data/unknown)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--wordnet-dir", default=None)
    b.set_defaults(fn=_build)
    so = sub.add_parser(
        "score-outputs",
        help="score published outputs (UnknownBench's outputs/, say) with the paper's rules",
    )
    so.add_argument(
        "paths",
        nargs="+",
        help="output files or folders holding them (<model>_<Task>_<partition>.json, searched "
        "recursively; <model>_uncertainty_... files add verbalized confidence)",
    )
    so.add_argument("--model", default=None, help="only this model's files (e.g. gpt-4-0613)")
    so.add_argument("--out", default=None, help="also write every scored answer here (CSV)")
    so.set_defaults(fn=_score_outputs)
