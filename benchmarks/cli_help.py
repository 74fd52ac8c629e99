"""Benchmark: how long each ``python -m workbench ... --help`` takes, in fresh processes.

Every command path of the parser (``demo``, ``taxonomy import-select``, ...) is run with
``--help`` ``--repeat`` times in a new interpreter; the table gives the median and the slowest
wall time per command, and the slowest of all (the target is under a second on a 2-core CPU).

    python benchmarks/cli_help.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from workbench.cli import build_parser


def command_paths() -> list[list[str]]:
    """Every command path of the parser, the root first."""
    out: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        out.append(path)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])

    walk(build_parser(), [])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for path in command_paths():
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            r = subprocess.run(
                [sys.executable, "-m", "workbench", *path, "--help"],
                capture_output=True,
                text=True,
            )
            times.append(time.perf_counter() - start)
            if r.returncode != 0:
                raise SystemExit(f"{' '.join(path)} --help failed: {r.stderr}")
        rows.append((" ".join(path) or "(root)", statistics.median(times), max(times)))
    print("| command | median s | slowest s |\n| --- | --- | --- |")
    for name, med, worst in rows:
        print(f"| `{name} --help` | {med:.2f} | {worst:.2f} |")
    worst = max(rows, key=lambda r: r[2])
    print(f"\n{len(rows)} commands; slowest: `{worst[0]} --help` {worst[2]:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
