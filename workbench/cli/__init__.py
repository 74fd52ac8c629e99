"""The one command line: ``python -m workbench <command>`` (or ``workbench <command>``).

Each module of this package adds its commands to the parser (``add_commands``) and imports what
a command needs only when that command runs, so ``--help`` at every level answers without
loading torch, pandas or a model. Errors caused by bad input print one line (``error: ...``) and
exit with status 2 (:func:`workbench.errors.run_command`).
"""

from __future__ import annotations

import argparse

from workbench.cli import (
    experiments,
    models,
    releases,
    schema,
    scoring,
    serve,
    taxonomy,
    unknown,
)
from workbench.errors import run_command

#: The command modules, in the order ``--help`` lists their commands.
MODULES = (experiments, models, serve, taxonomy, releases, unknown, scoring, schema)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command (no heavy import: building it is cheap)."""
    ap = argparse.ArgumentParser(
        prog="python -m workbench",
        description="Abstention Workbench: run experiments, score answers, check data sets, serve "
        "steering. `python -m workbench COMMAND --help` for a command's options.",
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in MODULES:
        module.add_commands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the command: its status, 2 for bad input (one ``error:`` line)."""
    args = build_parser().parse_args(argv)
    return run_command(args.fn, args)
