"""``schema KIND``: the JSON Schema of a config file a command reads, for editors and checks.

A YAML editor that knows the schema (the YAML language server reads a first line
``# yaml-language-server: $schema=PATH``) flags a misspelt key or a value of the wrong type as
it is typed; ``configs/schemas/`` holds the schemas of the shipped workbench, kept equal to this
command's output by the suite.
"""

from __future__ import annotations

import argparse
import importlib
import json
from typing import Any

#: Config file kind -> (the settings class that reads it, "module:Class"; what reads it).
KINDS = {
    "grid": ("workbench.experiments.config:ExperimentConfig", "python -m workbench grid FILE"),
    "suite": ("workbench.refusal.config:SuiteConfig", "python -m workbench refusal-eval FILE"),
}


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema of a ``kind`` config file (its settings class's, titled by its command)."""
    where, command = KINDS[kind]
    module, _, name = where.partition(":")
    schema = getattr(importlib.import_module(module), name).json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema} | {
        "description": f"A {kind} config file, as `{command}` reads it."
    }


def schema_text(kind: str) -> str:
    return json.dumps(schema_of(kind), indent=2, sort_keys=False) + "\n"


def _schema(args) -> None:
    print(schema_text(args.kind), end="")


def add_commands(sub: argparse._SubParsersAction) -> None:
    sc = sub.add_parser(
        "schema", help="the JSON Schema of a config file (grid, suite), for editors and checks"
    )
    sc.add_argument("kind", choices=sorted(KINDS), help="which config file")
    sc.set_defaults(fn=_schema)
