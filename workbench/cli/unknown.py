"""``unknown build``: rebuild the shipped UnknownBench-style data sets; ``unknown
score-outputs``: score published outputs (UnknownBench's GPT-4 files, say) with the paper's
rules."""

from __future__ import annotations

import argparse
import json


def _build(args) -> None:
    from workbench.paths import check_writable, repo_root
    from workbench.unknown.datasets import build_unknown_dataset, save_unknown_dataset

    out = args.out or str(repo_root() / "data" / "unknown")
    check_writable(out, "the dataset folder --out")  # before the build's work
    ds = build_unknown_dataset(seed=args.seed, wordnet_dir=args.wordnet_dir)
    save_unknown_dataset(ds, out)
    print(f"wrote {out}: " + json.dumps(ds.manifest["counts"]))


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
