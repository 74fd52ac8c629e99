"""Importing SELECT's released results as a run, and SELECT's aggregation of them."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from select_results_fixture import (
    ANSWER,
    UNJOINABLE,
    atom_q,
    md5,
    write_results_release,
)
from workbench.scoring.metrics import select_table, select_wide, technique_table
from workbench.tables import select_results as sr
from workbench.taxonomy import import_select, save_benchmark

T975_DF1 = 12.706204736174707  # Student-t 97.5% quantile, one degree of freedom
KEY = ["source_file", "seed", "select_relation", "select_concept", "instance_id"]


def _partial(*args, **kwargs):
    """The fixture release lacks files on purpose: import what is there."""
    return sr.import_select_results(*args, allow_partial=True, **kwargs)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("select")
    fx = write_results_release(root / "clone")
    return fx, import_select(fx["root"])


@pytest.fixture(scope="module")
def imported(release, tmp_path_factory):
    fx, bench = release
    runs = tmp_path_factory.mktemp("runs")
    report = _partial(fx["root"], bench, run_name="sel", root=runs, progress=False, workers=1)
    return report, pd.read_parquet(report.results_path)


def test_expected_files_derive_from_config_and_list_absent_and_unreadable(release, imported):
    fx, _ = release
    report, rows = imported
    assert report.expected == len(fx["expected"]) == 30  # the API model: prompting only
    assert sorted(report.absent) == sorted(fx["absent"])
    reasons = {u["path"]: u["reason"] for u in report.unreadable}
    assert sorted(reasons) == sorted(fx["unreadable"])
    assert "LFS" in reasons[fx["unreadable"][0]] and "truncated" in reasons[fx["unreadable"][1]]
    missing = json.loads((report.run_dir / "missing_files.json").read_text())
    assert sorted(missing["absent"]) == sorted(fx["absent"]) and len(missing["unreadable"]) == 2
    assert {f["path"]: f["rows"] for f in report.read} == fx["rows"]
    assert report.rows == len(rows) == sum(fx["rows"].values())
    assert "21 absent, 2 unreadable" in report.summary()
    # every row records the partial import, naming what is missing
    assert report.release_load.startswith("partial: 7 of 30 files; absent ")
    assert set(rows["release_load"]) == {report.release_load}


def test_an_incomplete_release_is_an_error_naming_the_missing_files(release, tmp_path):
    from workbench.releases import ReleaseError

    fx, bench = release
    with pytest.raises(
        ReleaseError,
        match=r"^SELECT's results at .* are incomplete against what "
        r"its config/ lists: 8 of 30 files; absent results/.* and "
        r"17 more; unreadable .*LFS.*allow_partial=True",
    ) as e:
        sr.import_select_results(
            fx["root"], bench, run_name="strict", root=tmp_path, progress=False
        )
    assert "\n" not in str(e.value) and not (tmp_path / "strict" / "results.parquet").exists()


def test_a_release_without_its_config_is_named_not_imported_as_whole(tmp_path):
    """Without config/models.yaml a model folder missing was simply not expected, and a
    techniques.yaml that is not a mapping expected no file at all: both imported as 'whole'."""
    import shutil

    fx = write_results_release(tmp_path / "clone")
    bench = import_select(fx["root"])
    cfg = fx["root"] / "config"
    (cfg / "techniques.yaml").write_text("- prompt-simple\n- steering-repe\n")
    with pytest.raises(sr.SelectResultsError, match=r"techniques.yaml: expected technique: "):
        _partial(fx["root"], bench, run_name="t", root=tmp_path / "runs", progress=False)
    shutil.rmtree(cfg)
    with pytest.raises(
        sr.SelectResultsError, match=r"models.yaml absent: .* could not be named"
    ) as e:
        sr.import_select_results(
            fx["root"], bench, run_name="m", root=tmp_path / "runs", progress=False
        )
    assert "\n" not in str(e.value) and not (tmp_path / "runs" / "m").exists()
    report = _partial(
        fx["root"], bench, run_name="p", root=tmp_path / "runs", progress=False, workers=1
    )
    assert report.release_load.startswith("partial") and any("absent" in n for n in report.notes)


def test_rows_join_questions_and_label_relations(imported):
    report, rows = imported
    assert report.unjoined == 1 and report.unknown_targets == 0
    assert not rows.duplicated(KEY).any()
    assert set(rows["model"]) == {"Tiny-IT-1B", "Chat-API"}
    assert set(rows["model_id"]) == {"acme/tiny-it-1b", "openai/azure/chat-api"}
    assert set(rows["technique"]) == {"zero_shot", "few_shot_cot"}
    assert (
        rows["question"].dropna().map(md5) == rows.loc[rows["question"].notna(), "instance_id"]
    ).all()
    abst = rows[rows["eval_type"] == "abstention"]
    assert (abst["relation"] == "target").all() and (
        abst["question_concept"] == abst["target"]
    ).all()
    gen = rows[(rows["eval_type"] == "generalization")]
    lost = gen[gen["instance_id"] == UNJOINABLE]
    assert len(lost) == 1 and not lost["joined"].iloc[0] and lost["question"].isna().all()
    assert set(gen.loc[gen["joined"], "relation"]) == {"descendant"}
    spec = rows[(rows["eval_type"] == "specificity") & (rows["target"] == "yago:River")]
    assert dict(zip(spec["question_concept"], spec["relation"])) == {
        "yago:Body_of_water": "parent",
        "schema:Place": "ancestor",
        "yago:Lake": "sibling",
    }
    roots = rows[(rows["eval_type"] == "specificity") & (rows["target"] == "schema:Place")]
    assert set(roots["relation"]) == {"sibling"}


def test_compositions_get_relation_qualified_ids(imported):
    _, rows = imported
    comp = rows[rows["partition"] == "compositions"]
    abst = comp[comp["eval_type"] == "abstention"]
    # one released pair under two relations: two workbench concepts
    assert {
        "dumping-in/yago:Fertilizer#yago:River",
        "damage-from-production-of-to/yago:Fertilizer#yago:River",
    } <= set(abst["target"])
    assert set(abst["target_kind"]) == {"composition"}
    spec = comp[comp["eval_type"] == "specificity"].set_index("question_concept")["relation"]
    assert spec.to_dict() == {
        "about/schema:CreativeWork#yago:River": "parent",
        "about/schema:CreativeWork#yago:Body_of_water": "ancestor",
        "dumping-in/yago:Chemical_substance#yago:Lake": "other_relation",
    }


def test_cot_responses_flags_detectors_and_provenance(release, imported):
    fx, bench = release
    _, rows = imported
    cot = rows[rows["technique"] == "few_shot_cot"]
    assert set(cot["response"]) == {"Abstained", ANSWER}
    assert cot["response_complete"].str.contains("Reasoning").all()
    assert rows.loc[rows["technique"] == "zero_shot", "response_complete"].isna().all()
    gone = rows[
        (rows["instance_id"] == md5(atom_q("yago:River", 2)))
        & (rows["seed"] == 101)
        & (rows["technique"] == "zero_shot")
    ]
    assert gone["select_flag_keyword"].isna().all() and gone["select_flag_phr_kw"].isna().all()
    assert (gone["select_flag_heuristic"] == False).all()  # noqa: E712
    for name in sr.detector_functions(bench):
        assert rows[f"refused_{name}"].notna().all()
    assert (rows.loc[rows["response"] == "Abstained", "refused_phrase"]).all()
    assert {"phrase_partial", "phrase_kind", "select_technique", "versions"} <= set(rows.columns)
    assert set(rows["select_technique"]) == {"prompt-simple", "prompt_cot-few_shot"}
    for path, sha in rows.groupby("source_file")["source_sha256"].first().items():
        import hashlib

        assert hashlib.sha256((fx["root"] / path).read_bytes()).hexdigest() == sha


def test_select_aggregation_averages_seeds_before_concepts_with_a_t_interval(imported):
    report, _ = imported
    t = sr.select_results_table(report.results_path).set_index(
        ["target_kind", "model", "technique", "metric"]
    )
    # River: seed 101 2/3, seed 202 0/1 -> 1/3 (pooled would be 2/4); Lake: 1 and 1/2 -> 3/4
    row = t.loc[("atomic", "Tiny-IT-1B", "zero_shot", "abstention")]
    assert row["mean"] == pytest.approx(13 / 24, abs=1e-12)
    assert row["ci"] == pytest.approx(T975_DF1 * (3 / 4 - 1 / 3) / 2, abs=1e-9)
    assert row["n_concepts"] == 2
    # specificity is 1 - refusal: River 3/4 answered, Place 1/2
    row = t.loc[("atomic", "Tiny-IT-1B", "zero_shot", "specificity")]
    assert row["mean"] == pytest.approx(5 / 8) and row["ci"] == pytest.approx(T975_DF1 * 0.25 / 2)
    # generalization counts the unjoined id, as SELECT does: Body of water 2/4, Movie 1
    assert t.loc[("atomic", "Tiny-IT-1B", "zero_shot", "generalization"), "mean"] == pytest.approx(
        0.75
    )
    assert math.isnan(t.loc[("atomic", "Chat-API", "zero_shot", "abstention"), "ci"])
    comp = t.loc[("composition", "Tiny-IT-1B", "zero_shot", "abstention")]
    assert comp["mean"] == pytest.approx(0.5) and comp["n_concepts"] == 3
    wide = select_wide(t.reset_index())
    assert wide.loc[("atomic", "abstention", "Tiny-IT-1B"), "zero_shot"] == "54.17% ± 264.7%"


def test_select_table_on_runner_rows_and_technique_table_dispatch():
    rows = pd.DataFrame(
        [
            {
                "model": "m",
                "technique": "x",
                "target": t,
                "seed": s,
                "relation": rel,
                "refused_phrase": r,
            }
            for t, s, rel, r in [
                ("a", 0, "target", True),
                ("a", 1, "target", False),
                ("a", 1, "target", False),
                ("b", 0, "target", True),
                ("a", 0, "sibling", True),
                ("b", 0, "parent", False),
                ("a", 0, "descendant", None),
            ]
        ]
    )
    t = technique_table(rows, aggregate="select").set_index("metric")
    assert t.loc["abstention", "mean"] == pytest.approx((0.5 + 1) / 2)  # a: (1 + 0) / 2 seeds
    assert t.loc["specificity", "mean"] == pytest.approx(0.5)
    assert "generalization" not in t.index  # its only value is missing
    assert list(t.columns) == ["model", "technique", "mean", "ci", "n_concepts"]
    assert select_table(rows.iloc[0:0]).empty
    with pytest.raises(Exception, match="aggregate"):
        technique_table(rows, aggregate="median")


def _clean(frame):
    return frame.sort_values(KEY).reset_index(drop=True)


def test_resume_neither_loses_nor_duplicates_rows(release, imported, tmp_path, monkeypatch):
    fx, bench = release
    _, full = imported
    # interrupted after two files
    calls = {"n": 0}
    real = sr.import_file

    def flaky(task):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(sr, "import_file", flaky)
    with pytest.raises(KeyboardInterrupt):
        _partial(fx["root"], bench, run_name="r", root=tmp_path, progress=False, workers=1)
    monkeypatch.setattr(sr, "import_file", real)
    chunks = sorted((tmp_path / "r" / "chunks").rglob("*.parquet"))
    assert len(chunks) == 2
    report = _partial(fx["root"], bench, run_name="r", root=tmp_path, progress=False, workers=1)
    assert sum(f["resumed"] for f in report.read) == 2
    again = pd.read_parquet(report.results_path)
    pd.testing.assert_frame_equal(
        _clean(again.drop(columns="run")), _clean(full.drop(columns="run"))
    )
    # results.parquet and one chunk deleted: rebuilt, nothing doubled
    report.results_path.unlink()
    chunks = sorted((tmp_path / "r" / "chunks").rglob("*.parquet"))
    chunks[0].unlink()
    report = _partial(fx["root"], bench, run_name="r", root=tmp_path, progress=False, workers=1)
    assert sum(not f["resumed"] for f in report.read) == 1
    again = pd.read_parquet(report.results_path)
    assert not again.duplicated(KEY).any()
    pd.testing.assert_frame_equal(
        _clean(again.drop(columns="run")), _clean(full.drop(columns="run"))
    )


def test_process_pool_gives_the_same_rows(release, imported, tmp_path):
    fx, bench = release
    _, full = imported
    report = _partial(fx["root"], bench, run_name="p", root=tmp_path, progress=False, workers=2)
    pooled = pd.read_parquet(report.results_path)
    pd.testing.assert_frame_equal(
        _clean(pooled.drop(columns="run")), _clean(full.drop(columns="run"))
    )


def test_every_registered_detector_gets_a_column(release, tmp_path, monkeypatch):
    from workbench.scoring import detectors as registry

    fx, bench = release
    seen = []

    def detectors_for(b=None):
        seen.append(b)
        return {**registry.DETECTORS, "terse": lambda text, question=None: len(text) < 12}

    monkeypatch.setattr(registry, "detectors_for", detectors_for)
    report = _partial(fx["root"], bench, run_name="d", root=tmp_path, progress=False, workers=1)
    rows = pd.read_parquet(report.results_path)
    assert seen and seen[0] is bench and "terse" in report.detectors
    assert (rows["refused_terse"] == (rows["response"].str.len() < 12)).all()


def test_models_filter_and_unknown_model(release, tmp_path):
    fx, bench = release
    report = _partial(
        fx["root"],
        bench,
        run_name="api",
        root=tmp_path,
        progress=False,
        models=["Chat-API"],
        workers=1,
    )
    assert report.expected == 12 and report.rows == 2
    with pytest.raises(sr.SelectResultsError, match="unknown model"):
        _partial(fx["root"], bench, run_name="x", root=tmp_path, models=["nope"])


def test_a_file_of_the_wrong_shape_is_reported_not_fatal(tmp_path):
    import gzip

    fx = write_results_release(tmp_path / "clone")
    bad = (
        fx["root"]
        / "results/expr.abstain.select/openai--azure--chat-api/specificity/prompt-simple.json.gz"
    )
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_bytes(
        gzip.compress(json.dumps({"555": {"yago:Nile": ["not a record map"]}}).encode())
    )
    report = _partial(
        fx["root"],
        import_select(fx["root"]),
        run_name="bad",
        root=tmp_path / "runs",
        progress=False,
        models=["Chat-API"],
    )
    assert [u["path"] for u in report.unreadable] == [str(bad.relative_to(fx["root"]))]
    assert "not an object" in report.unreadable[0]["reason"] and report.rows == 2


def test_read_results_names_what_is_wrong(tmp_path):
    p = tmp_path / "x.json.gz"
    p.write_bytes(b"not gzip at all")
    with pytest.raises(sr.SelectResultsError, match="gzip"):
        sr.read_results(p)
    assert (
        sr.model_dir_name("meta-llama/Meta-Llama-3.1-8B-Instruct")
        == "meta-llama--meta-llama-3.1-8b-instruct"
    )
    assert not sr.ran_for("openai/azure/gpt-4o", "tuning-sft") and sr.ran_for(
        "openai/azure/gpt-4o", "prompt-simple"
    )


def test_cli_imports_and_prints_selects_table(release, tmp_path, capsys):
    from workbench.cli import main

    fx, bench = release
    save_benchmark(bench, tmp_path / "bench")
    code = main(
        [
            "import-select-results",
            str(fx["root"]),
            "--benchmark",
            str(tmp_path / "bench"),
            "--run",
            "cli",
            "--root",
            str(tmp_path / "runs"),
            "--workers",
            "1",
            "--allow-partial",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "21 absent, 2 unreadable" in out and "ids not joined to a question: 1" in out
    assert "54.17% ± 264.7%" in out and "few_shot_cot" in out
    assert (tmp_path / "runs" / "cli" / "results.parquet").is_file()
