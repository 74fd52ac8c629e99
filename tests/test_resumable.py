"""The one resumable run (``workbench.resumable``): keys, finished units, durable writes,
execution and the progress line; and each of its four runners (the grid, the refusal suite,
UnknownBench's measures, the SELECT results import) killed part-way and resumed, losing and
repeating no row and computing no finished unit again."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from workbench import resumable
from workbench.resumable import (
    Progress,
    UnitResult,
    minutes,
    pending,
    run_local,
    run_pool,
    run_units,
    unit_done,
    unit_key,
    write_frame,
    write_rows,
)

# -- the module -----------------------------------------------------------------------------------


def test_a_units_key_is_the_hash_its_files_and_references_are_named_by():
    settings = {"model": "tiny", "seed": 0, "prompts": ["a", "b"], "where": Path("/x")}
    text = '{"model": "tiny", "prompts": ["a", "b"], "seed": 0, "where": "/x"}'
    assert unit_key(settings) == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert unit_key({"b": 1, "a": 2}) == unit_key({"a": 2, "b": 1}) == "21501dbaf73f5223"


@pytest.mark.parametrize(
    "seconds, text",
    [(0, "0 s"), (42.4, "42 s"), (59.6, "1 min 00 s"), (187, "3 min 07 s"), (float("nan"), "?")],
)
def test_one_duration_format(seconds, text):
    assert minutes(seconds) == text


def test_the_measured_tables_say_durations_the_same_way():
    from workbench.tables.measured import provenance

    assert "; 16 min 02 s;" in provenance({"seconds": 962}, "make demo")


def test_the_progress_line_says_elapsed_and_left_by_the_cost_of_what_is_left():
    now = [100.0]
    p = Progress(total=4, done=1, cost=6.0, clock=lambda: now[0])
    assert p.line("cell 1/4 done") == "cell 1/4 done; 0 s elapsed, about ? left"
    now[0] = 110.0
    p.finished(cost=2.0)
    assert (p.done, p.total) == (2, 4)
    assert p.line("cell 2/4 done") == "cell 2/4 done; 10 s elapsed, about 20 s left"
    # the units' own time (without model loads) when they say it
    q = Progress(total=10, clock=lambda: now[0])
    now[0] = 400.0
    q.finished(4, seconds=30.0)
    assert q.done == 4 and q.line("x") == "x; 4 min 50 s elapsed, about 45 s left"


def test_a_damaged_unit_file_is_set_aside_and_its_unit_is_pending(tmp_path, capsys):
    paths = [tmp_path / f"{i}.parquet" for i in range(3)]
    for p in paths[:2]:
        write_frame(p, pd.DataFrame({"a": [1, 2]}))
    paths[1].write_bytes(paths[1].read_bytes()[:-10])  # cut by a crash
    assert pending(paths, lambda p: unit_done(p, then="that one runs again")) == paths[1:]
    err = capsys.readouterr().err
    assert f"warning: {paths[1]} is damaged" in err and "that one runs again" in err
    assert (tmp_path / "1.parquet.damaged").is_file() and not paths[1].exists()
    rows = tmp_path / "rows.jsonl"
    write_rows(rows, [{"a": 1}, {"b": "é"}])
    assert rows.read_text() == '{"a": 1}\n{"b": "\\u00e9"}\n'
    assert unit_done(rows, resumable.jsonl_problem)


def test_a_write_that_fails_leaves_neither_the_file_nor_a_temporary_one(tmp_path):
    class Broken(pd.DataFrame):
        def to_parquet(self, path, **kw):
            Path(path).write_bytes(b"PAR1 half")
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_frame(tmp_path / "u.parquet", Broken({"a": [1]}))
    assert list(tmp_path.iterdir()) == []


def _double(n: int) -> int:
    return 2 * n


def test_units_run_here_or_in_a_pool_and_are_written_as_they_finish(tmp_path):
    written: list[int] = []
    out = list(
        run_units([1, 2, 3], lambda us: run_local(us, _double), lambda u, r: written.append(r))
    )
    assert [r.rows for r in out] == written == [2, 4, 6]
    pooled = run_units([1, 2, 3], lambda us: run_pool(us, _double, workers=2))
    assert sorted((r.unit, r.rows) for r in pooled) == [(1, 2), (2, 4), (3, 6)]

    def flaky(n: int) -> int:
        if n == 2:
            raise ValueError("no")
        return n

    caught = list(run_local([1, 2, 3], flaky))
    assert [r.error is None for r in caught] == [True, False, True]
    assert isinstance(caught[1].error, ValueError) and "ValueError: no" in caught[1].traceback
    with pytest.raises(ValueError):
        list(run_local([1, 2, 3], flaky, catch=False))


def test_an_interrupt_keeps_the_units_written_before_it_and_closes_the_executor(tmp_path):
    closed = []

    def executor(units):
        try:
            for u in units:
                if u == 3:
                    raise KeyboardInterrupt
                yield UnitResult(u, [{"unit": u}])
        finally:
            closed.append(True)

    def path(u):
        return tmp_path / f"{unit_key({'u': u})}.jsonl"

    with pytest.raises(KeyboardInterrupt):
        for _ in run_units([1, 2, 3, 4], executor, lambda u, rows: write_rows(path(u), rows)):
            pass
    assert closed == [True]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(path(u).name for u in (1, 2))
    todo = pending([1, 2, 3, 4], lambda u: unit_done(path(u), resumable.jsonl_problem))
    assert todo == [3, 4]
    # a break stops the executor too
    closed.clear()
    for _ in run_units([1, 2], executor):
        break
    assert closed == [True]


# -- the grid -------------------------------------------------------------------------------------


@pytest.fixture
def tiny_models(monkeypatch):
    import workbench.backends
    from workbench.testing import tiny_lm

    def fake_load(name=None, **kw):
        lm = tiny_lm(seed=0)
        lm.model_id = name
        return lm

    monkeypatch.setattr(workbench.backends, "load_model", fake_load)


def _files(folder: Path, pattern: str) -> dict[str, bytes]:
    files = sorted(p for p in folder.rglob(pattern) if p.is_file())
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


def test_a_grid_killed_after_two_cells_resumes_with_the_rest(tmp_path, tiny_models, monkeypatch):
    from workbench.experiments import ExperimentConfig, Runner
    from workbench.techniques import ArtifactStore
    from workbench.testing import tiny_benchmark

    bench = tiny_benchmark()
    cfg = ExperimentConfig.from_dict(
        dict(
            name="g",
            models=["tiny"],
            techniques=["base", "zero_shot"],
            targets=["river", "scientist"],
            n_target=2,
            n_descendant=1,
            n_specificity=1,
            n_unrelated=0,
            max_new_tokens=3,
        )
    )

    def runner(root: Path) -> Runner:
        return Runner(
            cfg, root=root, bench=bench, progress=False, store=ArtifactStore(tmp_path / "a")
        )

    real, calls = Runner.run_cell, []

    def killed_on_third(self, lm, cell):
        calls.append(cell)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, lm, cell)

    monkeypatch.setattr(Runner, "run_cell", killed_on_third)
    with pytest.raises(KeyboardInterrupt):
        runner(tmp_path / "runs").run()
    cells = tmp_path / "runs" / "g" / "cells"
    before = _files(cells, "*")
    assert len(before) == 2 and all(n.endswith(".jsonl") for n in before)  # no temporary file

    calls.clear()
    monkeypatch.setattr(Runner, "run_cell", lambda s, lm, c: calls.append(c) or real(s, lm, c))
    resumed = runner(tmp_path / "runs")
    table = resumed.run()
    assert len(calls) == 2 and set(calls) == set(resumed.cells()) - {
        c for c in resumed.cells() if resumed.cell_path(c).name in before
    }
    assert {n: b for n, b in _files(cells, "*.jsonl").items() if n in before} == before
    key = ["model", "technique", "target", "seed", "question_index", "sample"]
    assert not table.duplicated(key).any() and len(table) == 4 * 4
    fresh = runner(tmp_path / "fresh").run()
    cols = [*key, "response"]
    pd.testing.assert_frame_equal(
        table[cols].sort_values(key).reset_index(drop=True),
        fresh[cols].sort_values(key).reset_index(drop=True),
    )


# -- the refusal suite ----------------------------------------------------------------------------


def _suite(tmp_path: Path, name: str):
    from workbench.refusal import SuiteConfig

    data = tmp_path / "prompts.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "prompt": f"Question {i}?", "expected": "may_refuse"}) + "\n"
            for i in range(8)
        )
    )
    return SuiteConfig.from_dict(
        {
            "name": name,
            "models": ["tiny"],
            "datasets": [{"name": "mine", "path": str(data)}],
            "chunk_size": 2,
            "device": "cpu",
            "sampling": {"preset": "greedy", "max_new_tokens": 4},
        }
    )


def test_a_suite_killed_after_two_chunks_resumes_with_the_rest(tmp_path, monkeypatch):
    import workbench.generation
    import workbench.refusal.suite as suite
    from workbench.refusal import RefusalSuite
    from workbench.testing import tiny_lm

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    lm = tiny_lm(seed=3)
    write, writes = suite.write_frame, []

    def killed_on_third(path, frame):
        writes.append(path)
        if len(writes) == 3:
            raise KeyboardInterrupt  # killed while the third chunk is written
        write(path, frame)

    monkeypatch.setattr(suite, "write_frame", killed_on_third)
    with pytest.raises(KeyboardInterrupt):
        RefusalSuite(_suite(tmp_path, "k"), models={"tiny": lm}, progress=False).run()
    chunks = tmp_path / "runs" / "k" / "chunks"
    before = _files(chunks, "*")
    assert len(before) == 2 and all(n.startswith("gen-") for n in before)
    monkeypatch.setattr(suite, "write_frame", write)

    real, asked = workbench.generation.generate, []
    monkeypatch.setattr(
        workbench.generation,
        "generate",
        lambda lm, prompts, *a, **k: asked.extend(prompts) or real(lm, prompts, *a, **k),
    )
    rows = RefusalSuite(_suite(tmp_path, "k"), models={"tiny": lm}, progress=False).run().rows
    assert len(asked) == 4  # the two chunks the kill left undone, two prompts each
    assert {n: b for n, b in _files(chunks, "gen-*").items() if n in before} == before
    key = ["system", "dataset", "prompt_id", "sample"]
    assert len(rows) == 8 and not rows.duplicated(key).any()
    fresh = RefusalSuite(_suite(tmp_path, "fresh"), models={"tiny": lm}, progress=False).run().rows
    assert rows.sort_values(key)["response"].tolist() == fresh.sort_values(key)["response"].tolist()


# -- UnknownBench's measures ----------------------------------------------------------------------


def test_unknown_measures_killed_after_two_chunks_resume_with_the_rest(tiny, tmp_path, monkeypatch):
    import workbench.unknown.measures as m
    from workbench.unknown import run_unknown
    from workbench.unknown.datasets import UnknownItem

    items = [UnknownItem(f"What is thing number {i}?", "NEC", "answerable") for i in range(8)]
    real, calls = m.evaluate_unknown, []

    def killed_on_third(lm, part, *a, **k):
        calls.append([i.prompt for i in part])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(lm, part, *a, **k)

    monkeypatch.setattr(m, "evaluate_unknown", killed_on_third)
    with pytest.raises(KeyboardInterrupt):
        run_unknown(tiny, items, tmp_path / "u", chunk_size=2, key="k", max_new_tokens=2)
    chunks = tmp_path / "u" / "chunks"
    before = _files(chunks, "*")
    assert len(before) == 2 and all(n.endswith(".parquet") for n in before)

    calls.clear()
    rows = run_unknown(tiny, items, tmp_path / "u", chunk_size=2, key="k", max_new_tokens=2)
    assert calls == [[i.prompt for i in items[4:6]], [i.prompt for i in items[6:]]]
    assert {n: b for n, b in _files(chunks, "*").items() if n in before} == before
    assert rows["prompt"].tolist() == [i.prompt for i in items]  # none lost, none twice
    monkeypatch.setattr(m, "evaluate_unknown", real)
    fresh = run_unknown(tiny, items, tmp_path / "fresh", chunk_size=2, key="k", max_new_tokens=2)
    pd.testing.assert_frame_equal(rows, fresh)


# -- the SELECT results import --------------------------------------------------------------------


@pytest.fixture(scope="module")
def select_release(tmp_path_factory):
    from select_results_fixture import write_results_release
    from workbench.taxonomy import import_select

    fx = write_results_release(tmp_path_factory.mktemp("select") / "clone")
    return fx, import_select(fx["root"])


def test_a_select_import_killed_after_two_files_resumes_with_the_rest(
    select_release, tmp_path, monkeypatch
):
    from workbench.tables import select_results as sr

    fx, bench = select_release

    def imported(run: str):
        return sr.import_select_results(
            fx["root"],
            bench,
            run_name=run,
            root=tmp_path,
            progress=False,
            workers=1,
            allow_partial=True,
        )

    real, calls, kill = sr.import_file, [], [True]

    def killed_on_third(task):
        calls.append(task["path"])
        if len(calls) == 3 and kill and kill.pop():
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(sr, "import_file", killed_on_third)
    with pytest.raises(KeyboardInterrupt):
        imported("r")
    chunks = tmp_path / "r" / "chunks"
    before = _files(chunks, "*")
    assert len(before) == 2 and all(n.endswith(".parquet") for n in before)

    calls.clear()
    report = imported("r")
    # the files the kill left undone, and the truncated one (tried each time: unreadable)
    assert len(calls) == len(fx["rows"]) + 1 - 2
    assert sum(f["resumed"] for f in report.read) == 2
    assert {n: b for n, b in _files(chunks, "*.parquet").items() if n in before} == before
    rows = pd.read_parquet(report.results_path)
    key = ["source_file", "seed", "select_relation", "select_concept", "instance_id"]
    assert len(rows) == sum(fx["rows"].values()) and not rows.duplicated(key).any()
    monkeypatch.setattr(sr, "import_file", real)
    fresh = pd.read_parquet(imported("fresh").results_path)
    pd.testing.assert_frame_equal(
        rows.drop(columns="run").sort_values(key).reset_index(drop=True),
        fresh.drop(columns="run").sort_values(key).reset_index(drop=True),
    )


def test_a_damaged_select_chunk_is_set_aside_and_imported_again(select_release, tmp_path, capsys):
    from workbench.tables import select_results as sr

    fx, bench = select_release
    kw = dict(run_name="d", root=tmp_path, progress=False, workers=1, allow_partial=True)
    first = pd.read_parquet(sr.import_select_results(fx["root"], bench, **kw).results_path)
    victim = sorted((tmp_path / "d" / "chunks").rglob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[: os.path.getsize(victim) // 2])
    report = sr.import_select_results(fx["root"], bench, **kw)
    err = capsys.readouterr().err
    assert f"warning: {victim} is damaged" in err and "that file is imported again" in err
    assert sum(not f["resumed"] for f in report.read) == 1
    pd.testing.assert_frame_equal(pd.read_parquet(report.results_path), first)
