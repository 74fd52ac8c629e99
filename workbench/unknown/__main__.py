"""``python -m workbench.unknown build [--out data/unknown] [--seed 0]``: rebuild the datasets."""

from __future__ import annotations

import argparse
import json
import sys

from workbench.errors import run_command
from workbench.paths import repo_root


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workbench.unknown")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", default=str(repo_root() / "data" / "unknown"))
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--wordnet-dir", default=None)
    return run_command(_build, ap.parse_args(argv))


def _build(args) -> None:
    from workbench.paths import check_writable
    from workbench.unknown.datasets import (
        build_unknown_dataset,
        save_unknown_dataset,
    )

    check_writable(args.out, "the dataset folder --out")  # before the build's work
    ds = build_unknown_dataset(seed=args.seed, wordnet_dir=args.wordnet_dir)
    save_unknown_dataset(ds, args.out)
    print(f"wrote {args.out}: " + json.dumps(ds.manifest["counts"]))


if __name__ == "__main__":
    sys.exit(main())
