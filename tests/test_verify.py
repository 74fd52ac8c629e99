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


def _without(reference, **change):
    out = json.loads(json.dumps(reference))
    for k, v in change.items():
        if v is None:
            out.pop(k)
        else:
            out[k] = v
    return out


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda r: [1, 2], "a list, not a mapping"),
        (lambda r: {"rows": []}, "no machine, slice, metrics"),
        (lambda r: _without(r, slice={**r["slice"], "n_target": 1}), "another slice"),
        (lambda r: _without(r, rows=[{"technique": "base"}]), "rows[0] lacks"),
        (lambda r: _without(r, metrics=r["metrics"][1:]), "no metrics for the cell"),
    ],
    ids=["a list", "keys missing", "another slice", "a row short", "a cell's metrics missing"],
)
def test_a_reference_of_another_shape_is_one_line_before_the_slice(
    reference, tmp_path, capsys, monkeypatch, make, words
):
    """Any JSON used to be taken, and failed with a TypeError or KeyError after the whole
    slice (20 minutes)."""
    import workbench.experiments.verify as verify
    from workbench.cli import main

    monkeypatch.setattr(verify, "run_slice", lambda *a, **k: pytest.fail("the slice ran"))
    path = tmp_path / "ref.json"
    path.write_text(json.dumps(make(reference)))
    status = main(["verify", "--reference", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and words in err[0] and str(path) in err[0]


def test_verify_removes_its_temporary_folder_when_stopped(tmp_path, monkeypatch):
    """SIGTERM (or Ctrl-C) in the middle of the slice: its temporary folder goes."""
    import os
    import signal
    import tempfile

    import workbench.experiments.verify as verify

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = []

    def killed(root, *a, **k):
        made.append(root)
        (root / "runs").mkdir()
        os.kill(os.getpid(), signal.SIGTERM)
        pytest.fail("not stopped")

    monkeypatch.setattr(verify, "run_slice", killed)
    with pytest.raises(KeyboardInterrupt):
        verify.verify()
    assert made and not made[0].exists()
    assert signal.getsignal(signal.SIGTERM) is not None  # the previous handler is back
