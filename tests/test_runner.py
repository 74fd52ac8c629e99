"""The experiment runner: tidy rows with provenance, validation before loading, resume."""

import json

import pandas as pd
import pytest

import workbench.backends
from workbench.errors import ConfigError
from workbench.experiments import ExperimentConfig, Runner, evaluation_questions
from workbench.techniques import ArtifactStore
from workbench.testing import tiny_benchmark, tiny_lm


@pytest.fixture(scope="module")
def bench():
    return tiny_benchmark()


@pytest.fixture
def no_hub_models(monkeypatch):
    """load_model returns tiny models by name (counting loads)."""
    loads = []

    def fake_load(name=None, **kw):
        loads.append(name)
        lm = tiny_lm(seed=0)
        lm.model_id = name
        return lm

    monkeypatch.setattr(workbench.backends, "load_model", fake_load)
    return loads


def config(**kw):
    base = dict(
        name="t",
        models=["tiny"],
        techniques=["base", "zero_shot"],
        targets=["river", "scientist"],
        n_target=3,
        n_descendant=2,
        n_specificity=3,
        n_unrelated=2,
        max_new_tokens=4,
        batch_size=8,
    )
    return ExperimentConfig.from_dict({**base, **kw})


def test_rows_are_tidy_with_provenance(tmp_path, bench, no_hub_models):
    table = Runner(
        config(), root=tmp_path, bench=bench, progress=False, store=ArtifactStore(tmp_path / "a")
    ).run()
    per_cell = 3 + 2 + 3 + 2
    assert len(table) == 2 * 2 * per_cell
    far = table[table["relation"] == "unrelated"]
    assert len(far) == 2 * 2 * 2
    river_far = far[far["target"] == "river"]["question_concept"]
    assert not river_far.isin(["river", "nile", "danube", "water", "places", "brook"]).any()
    assert table["gate_fired"].isna().all()  # no conditional technique here
    assert set(table["relation"]) >= {"target", "descendant"}
    for col in (
        "model_id",
        "revision",
        "technique",
        "target",
        "question",
        "relation",
        "sample",
        "response",
        "refused_phrase",
        "refused_keyword",
        "config_hash",
        "seed",
        "versions",
    ):
        assert col in table.columns, col
    assert json.loads(table["versions"][0])["torch"]
    assert (tmp_path / "t" / "results.parquet").is_file()
    assert pd.read_parquet(tmp_path / "t" / "results.parquet").shape == table.shape
    assert no_hub_models == ["tiny"]


def test_evaluation_questions_are_held_out_eval_questions(bench):
    qs = evaluation_questions(bench, "river", 5, 4, 6)
    assert [q.relation for q in qs].count("target") == 5
    assert {q.relation for q in qs if q.relation != "target"} <= {
        "descendant",
        "sibling",
        "ancestor",
        "parent",
    }
    evals = {q for s in bench.questions for q in s.eval}
    assert all(q.question in evals for q in qs)
    assert all(q.concept_id in ("nile", "danube") for q in qs if q.relation == "descendant")


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"techniques": ["base", "telepathy"]}, "techniques"),
        ({"targets": ["ocean"]}, "targets"),
        ({"n_target": -1}, "n_target"),
        ({"technique_params": {"steering": {"strength": 1}}}, "technique_params"),
        (
            {"techniques": ["steering"], "technique_params": {"steering": {"strenght": 1}}},
            "'technique_params.steering'",
        ),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_config_fails_before_any_model_loads(tmp_path, bench, no_hub_models, bad, field):
    with pytest.raises(ConfigError, match=field):
        Runner(config(**bad), root=tmp_path, bench=bench, progress=False).run()
    assert no_hub_models == []


def test_yaml_config_roundtrip_and_errors(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("name: x\ntargets: [river]\nseeds: [0, 1]\n")
    c = ExperimentConfig.from_yaml(p)
    assert c.targets == ("river",) and c.seeds == (0, 1)
    p.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        ExperimentConfig.from_yaml(p)


def test_interrupted_run_resumes_without_recomputing_or_duplicating(
    tmp_path, bench, no_hub_models, monkeypatch
):
    cfg = config()
    runner = Runner(
        cfg, root=tmp_path, bench=bench, progress=False, store=ArtifactStore(tmp_path / "a")
    )
    real = Runner.run_cell
    calls = []

    def crash_on_third(self, lm, cell):
        calls.append(cell)
        if len(calls) == 3:
            raise KeyboardInterrupt  # killed mid-run
        return real(self, lm, cell)

    monkeypatch.setattr(Runner, "run_cell", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    assert len(list((tmp_path / "t" / "cells").glob("*.jsonl"))) == 2
    assert not list((tmp_path / "t" / "cells").glob("*.tmp"))
    done_before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t" / "cells").glob("*.jsonl")}

    calls.clear()
    monkeypatch.setattr(
        Runner, "run_cell", lambda self, lm, cell: calls.append(cell) or real(self, lm, cell)
    )
    table = Runner(
        cfg, root=tmp_path, bench=bench, progress=False, store=ArtifactStore(tmp_path / "a")
    ).run()
    assert len(calls) == 2  # only the missing cells
    assert {
        p.name: p.stat().st_mtime_ns
        for p in (tmp_path / "t" / "cells").glob("*.jsonl")
        if p.name in done_before
    } == done_before
    key = ["model", "technique", "target", "seed", "question_index", "sample"]
    assert not table.duplicated(subset=key).any()
    assert len(table) == 4 * 10

    # a finished run does nothing more
    calls.clear()
    again = Runner(
        cfg, root=tmp_path, bench=bench, progress=False, store=ArtifactStore(tmp_path / "a")
    ).run()
    assert calls == [] and len(again) == len(table)


def test_changed_config_never_reuses_stale_rows(tmp_path, bench, no_hub_models):
    store = ArtifactStore(tmp_path / "a")
    first = Runner(config(), root=tmp_path, bench=bench, progress=False, store=store).run()
    second = Runner(
        config(max_new_tokens=2), root=tmp_path, bench=bench, progress=False, store=store
    ).run()
    assert set(first["config_hash"]).isdisjoint(set(second["config_hash"]))
    assert (second["n_tokens"] <= 2).all() and len(second) == len(first)


def test_runner_and_notebooks_write_under_the_same_runs_root(tmp_path, monkeypatch, bench):
    """$WORKBENCH_RUNS moves every output of a run: the runner's cells and the notebook's tables."""
    from workbench.paths import run_path

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "elsewhere"))
    runner = Runner(
        ExperimentConfig(name="moved", models=("tiny",), targets=("river",)),
        bench=bench,
        progress=False,
    )
    assert runner.run_dir == run_path("moved") == tmp_path / "elsewhere" / "moved"


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda text: "", "it is empty (0 bytes)"),
        (lambda text: text[: len(text) // 2], "its last line is cut"),
        (lambda text: "{not json\n" + text, "line 1 is not JSON"),
        (lambda text: "[1, 2, 3]\n", "line 1 is not a row (a JSON object)"),
        (lambda text: text.split("\n", 1)[1], "it holds 9 rows, not the cell's 10"),
        (
            lambda text: '{"response": "x"}\n' + text.split("\n", 1)[1],
            "row 1 lacks model, question_index, sample, seed, target, technique",
        ),
    ],
    ids=["zero bytes", "last line cut", "not JSON", "not rows", "a row short", "unkeyed row"],
)
def test_a_damaged_cell_file_is_named_set_aside_and_run_again(
    tmp_path, bench, no_hub_models, monkeypatch, capsys, damage, problem
):
    """What a crash could leave before writes were durable: a 0-byte, cut or garbled cell file
    is not a finished cell (it once gave 9 rows instead of 12, or a pandas error naming no file)."""
    store = ArtifactStore(tmp_path / "a")
    cfg = config()
    first = Runner(cfg, root=tmp_path, bench=bench, progress=False, store=store).run()
    victim = sorted((tmp_path / "t" / "cells").glob("*.jsonl"))[0]
    victim.write_text(damage(victim.read_text()))
    real, calls = Runner.run_cell, []
    monkeypatch.setattr(
        Runner, "run_cell", lambda self, lm, cell: calls.append(cell) or real(self, lm, cell)
    )
    again = Runner(cfg, root=tmp_path, bench=bench, progress=False, store=store).run()
    err = capsys.readouterr().err
    assert f"{victim} is damaged ({problem})" in err and "that cell runs again" in err
    assert len(calls) == 1  # that cell alone
    assert (victim.parent / (victim.name + ".damaged")).is_file() and victim.is_file()
    key = ["model", "technique", "target", "seed", "question_index", "sample"]
    cols = [*key, "response"]
    pd.testing.assert_frame_equal(
        again[cols].sort_values(key).reset_index(drop=True),
        first[cols].sort_values(key).reset_index(drop=True),
    )


def test_writes_are_durable_and_a_crash_before_the_rename_leaves_nothing(tmp_path, monkeypatch):
    """fsync of the file before the rename and of the folder after (what databases do); a
    failure between writing and renaming (a full disk, a kill) leaves neither the file nor a
    temporary one."""
    import os

    from workbench import paths

    synced = []
    real = os.fsync
    monkeypatch.setattr(
        os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")) or real(fd)
    )
    target = tmp_path / "out" / "cell.jsonl"
    paths.write_text_atomic(target, '{"a": 1}\n')
    assert target.read_text() == '{"a": 1}\n'
    assert synced[0].endswith(".tmp") and synced[1] == str(target.parent)

    real_replace = os.replace

    def crash(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space left"):
        paths.write_text_atomic(tmp_path / "out" / "other.jsonl", "x\n")
    monkeypatch.setattr(os, "replace", real_replace)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["cell.jsonl"]
