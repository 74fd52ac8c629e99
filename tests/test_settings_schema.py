"""The JSON Schemas of the config files (``workbench schema KIND``): what an editor validates a
grid or suite file against as it is typed. They are the settings classes' own (pydantic's), so
they accept what the command accepts and reject a misspelt key; the copies shipped in
``configs/schemas/`` equal the command's output."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from workbench.cli import main
from workbench.cli.schema import KINDS, schema_text
from workbench.paths import repo_root

GRID = """\
name: painters
models: [smollm2-135m-instruct]
techniques: [base, steering]
targets: ['wn:10391653-n']
seeds: [0]
n_target: 4
technique_params: {steering: {strength: 0.8}}
"""


def validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = json.loads(schema_text(kind))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_shipped_schema_is_the_commands_output(kind, capsys):
    assert main(["schema", kind]) == 0
    printed = capsys.readouterr().out
    shipped = repo_root() / "configs" / "schemas" / f"{kind}.schema.json"
    assert shipped.read_text() == printed, (
        f"configs/schemas/{kind}.schema.json is stale: "
        f"python -m workbench schema {kind} > configs/schemas/{kind}.schema.json"
    )


def test_a_grid_file_validates_and_a_misspelt_key_does_not():
    from workbench.experiments import ExperimentConfig

    data = yaml.safe_load(GRID)
    assert not list(validator("grid").iter_errors(data))
    ExperimentConfig.from_dict(data)  # what the schema accepts, the grid accepts
    for wrong in ({"n_targets": 4}, {"do_sample": "no"}, {"seeds": [0, "1"]}):
        assert list(validator("grid").iter_errors({**data, **wrong})), wrong


def test_the_shipped_suite_validates_and_a_misspelt_key_does_not():
    data = yaml.safe_load((repo_root() / "configs" / "refusal_eval.yaml").read_text())
    assert not list(validator("suite").iter_errors(data))
    assert list(validator("suite").iter_errors({**data, "datasetz": ["sanity"]}))
    nested = {**data, "sampling": {**(data.get("sampling") or {}), "temprature": 0.5}}
    assert list(validator("suite").iter_errors(nested))


def test_the_shipped_suite_names_its_schema_for_editors():
    first = (repo_root() / "configs" / "refusal_eval.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=schemas/suite.schema.json"
