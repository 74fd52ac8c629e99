"""The verify command's comparison, on its recorded reference (no model)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from workbench.experiments.verify import REFERENCE, compare, load_reference
from workbench.paths import project_path


@pytest.fixture(scope="module")
def reference():
    return load_reference(project_path(str(REFERENCE)))


def as_run(reference) -> pd.DataFrame:
    """The reference's rows as a run's table would hold them."""
    return pd.DataFrame(reference["rows"]).assign(dtype="float32", numerics="reproducible")


def test_the_reference_is_the_reproducible_default_and_covers_steering(reference):
    assert reference["numerics"] == ["reproducible"] and reference["machine"]["dtype"] == "float32"
    techniques = {m["technique"] for m in reference["metrics"]}
    assert {"base", "steering"} <= techniques
    assert len(reference["rows"]) >= 40


def test_the_reference_agrees_with_itself(reference):
    report = compare(reference, as_run(reference))
    assert report.ok
    assert "reproduced" in report.text().splitlines()[-1]


def test_one_changed_answer_is_named_with_its_cell_and_the_metric_it_moved(reference):
    table = as_run(reference)
    target = table.index[(table["technique"] == "steering") & (table["relation"] == "target")][0]
    table.loc[target, "response"] = "The Nile is the longest river in Africa."
    table.loc[target, "refused_phrase"] = not table.loc[target, "refused_phrase"]
    report = compare(reference, table)
    assert not report.ok
    steering = next(c for c in report.cells if c.technique == "steering")
    assert steering.identical == steering.answers - 1 and "abstention" in steering.moved
    assert all(c.agrees for c in report.cells if c.technique != "steering")
    assert report.text().splitlines()[-1].startswith("verify: DIFFERS: 3/4 cells agree")


def test_a_missing_reference_is_one_line(tmp_path):
    from workbench.errors import WorkbenchError

    with pytest.raises(WorkbenchError, match="no reference at .*verify --record"):
        load_reference(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(WorkbenchError, match="not valid JSON"):
        load_reference(bad)
    json.loads(project_path(str(REFERENCE)).read_text())  # the tracked one parses
