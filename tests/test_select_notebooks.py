"""The SELECT, UnknownBench, editing and gate notebooks run headless with small parameters.

They run on a tiny random model saved as a model directory (``tiny_model_dir``): what they
assert is what the notebooks do (columns, counts, files, figures, the notes that stand for a
figure that cannot be drawn), which does not depend on the model; the embedded model's own
behaviour is asserted by tests/test_techniques_embedded.py, tests/test_editing_embedded.py and
the quickstart and refusal-suite notebooks, which run on it."""

import shutil
import uuid

import pandas as pd
import pytest

from workbench.notebooks import run_notebook
from workbench.paths import repo_root

pytestmark = [pytest.mark.notebook, pytest.mark.integration]

ROOT = repo_root()
SMALL = dict(n_target=3, n_descendant=2, n_specificity=2, max_new_tokens=8)


@pytest.fixture
def names(tmp_path):
    """A fresh run name; the test checks that figures/ is left untouched by the run."""
    tag = uuid.uuid4().hex[:6]
    made = {"run": f"test-{tag}", "fig": f"test_{tag}"}
    before = {f.name: f.stat().st_mtime for f in (ROOT / "figures").iterdir()}
    yield made
    shutil.rmtree(ROOT / "runs" / made["run"], ignore_errors=True)
    after = {f.name: f.stat().st_mtime for f in (ROOT / "figures").iterdir()}
    assert after == before, "a notebook run changed figures/ without export_figures"


def test_select_abstention_notebook(tmp_path, names, tiny_model_dir):
    targets = ["wn:09411430-n", "wn:10560637-n", "wn:06613686-n"]
    run_notebook(
        "01_select_abstention",
        {
            "run_name": names["run"],
            "models": [tiny_model_dir],
            "techniques": ["base", "zero_shot", "steering"],
            "targets": targets,
            "n_boot": 50,
            **SMALL,
        },
        run_dir=tmp_path,
        progress=False,
    )
    summary = pd.read_csv(ROOT / "runs" / names["run"] / "summary.csv")
    for col in (
        "model",
        "technique",
        "concept",
        "abstention",
        "generalization",
        "specificity",
        "n_target",
        "n_descendant",
        "n_specificity",
    ):
        assert col in summary.columns
    assert len(summary) == 9 and set(summary["technique"]) == {"base", "zero_shot", "steering"}
    assert (summary["n_target"] == 3).all()
    figures = ROOT / "runs" / names["run"] / "figures"
    for fig in ("techniques", "levels"):
        for ext in ("pdf", "png"):
            assert (figures / f"{fig}.{ext}").is_file(), fig
    # universality is drawn only when at least two techniques vary across the targets;
    # otherwise the executed notebook says why instead of showing an empty heatmap
    from workbench.plots import NoFigure
    from workbench.plots.select import plot_universality
    from workbench.scoring.metrics import universality

    rows = pd.read_parquet(ROOT / "runs" / names["run"] / "results.parquet")
    expected = plot_universality(universality(rows, "abstention", "refused_phrase"), n_concepts=3)
    executed = (tmp_path / "01_select_abstention.ipynb").read_text()
    if isinstance(expected, NoFigure):
        assert not (figures / "universality.png").is_file()
        assert "no figure 'universality'" in executed
    else:
        assert (figures / "universality.pdf").is_file() and (figures / "universality.png").is_file()
    import json

    cal = json.loads((ROOT / "runs" / names["run"] / "isa_probe_calibration.json").read_text())
    informative = cal[tiny_model_dir]["informative"]
    if not informative:  # no figure from a probe that cannot tell what the model knows
        assert not (
            ROOT / "runs" / names["run"] / "figures" / "generalization_errors.png"
        ).is_file()
    assert (ROOT / "runs" / names["run"] / "isa_probes.csv").is_file()


def test_compositions_notebook(tmp_path, names, tiny_model_dir):
    run_notebook(
        "02_select_compositions",
        {
            "run_name": names["run"],
            "models": [tiny_model_dir],
            "atomic_run": "no-such-run",
            "techniques": ["base", "zero_shot"],
            "targets": ["about/wn:06613686-n#wn:09835506-n"],
            "n_boot": 50,
            **SMALL,
        },
        run_dir=tmp_path,
        progress=False,
    )
    summary = pd.read_csv(ROOT / "runs" / names["run"] / "summary.csv")
    assert set(summary["concept_kind"]) == {"composition"} and len(summary) == 2
    assert (ROOT / "runs" / names["run"] / "figures" / "vs_atomic.png").is_file()


def test_refusal_judge_notebook(tmp_path, names, tiny_model_dir):
    run_notebook(
        "03_refusal_judge",
        {
            "run_name": names["run"],
            "model": tiny_model_dir,
            "judge_model": tiny_model_dir,
            "techniques": ["base", "zero_shot"],
            "k_samples": 2,
            "max_labelled": 12,
            # the judge reads its rubric for every answer (a long prompt, even on a tiny
            # model): a question of each relation is all the tables need
            **SMALL,
            "n_target": 2,
            "n_descendant": 1,
            "n_specificity": 1,
        },
        run_dir=tmp_path,
        progress=False,
    )
    d = ROOT / "runs" / names["run"]
    scores = pd.read_csv(d / "confidence.csv")
    assert scores["samples"].eq(2).all()
    assert scores["confidence"].dropna().between(-1, 1).all()
    agreement = pd.read_csv(d / "agreement.csv")
    assert {"phrase", "keyword", "unknownbench", "judge"} <= set(agreement["detector"])
    assert (d / "agreement_by_style.csv").is_file()
    assert (ROOT / "runs" / names["run"] / "figures" / "confidence.png").is_file()


def test_unknown_concepts_notebook(tmp_path, names, tiny_model_dir):
    run_notebook(
        "04_unknown_concepts",
        {
            "run_name": names["run"],
            "model": tiny_model_dir,
            "per_partition": 3,
            "max_new_tokens": 8,
            "figure_prefix": names["fig"],
        },
        run_dir=tmp_path,
        progress=False,
    )
    summary = pd.read_csv(ROOT / "runs" / names["run"] / "summary.csv")
    for col in ("task", "partition", "refusal_rate", "accuracy", "mean_confidence", "mean_entropy"):
        assert col in summary.columns
    assert set(zip(summary.task, summary.partition)) == {
        (t, p) for t in ("NEC", "FalseQA", "RefuNQ") for p in ("answerable", "unanswerable")
    }
    assert (
        summary.loc[(summary.task == "RefuNQ") & (summary.partition == "answerable"), "accuracy"]
        .notna()
        .all()
    )
    for col in (
        "unknownbench_refusal_rate",
        "unknownbench_accuracy",
        "mean_confidence_logprob",
        "number_mass",
    ):
        assert col in summary.columns
    rows = pd.read_parquet(ROOT / "runs" / names["run"] / "results.parquet")
    assert set(rows["prompt_preset"]) == {"paper"} and rows["data_hash"].nunique() == 1
    assert rows["confidence_logprob"].between(0, 10).all()
    for fig in ("by_confidence", "uncertainty"):
        assert (ROOT / "runs" / names["run"] / "figures" / f"{fig}.pdf").is_file()


def test_categorical_editing_notebook(tmp_path, names, tiny_model_dir):
    run_notebook(
        "05_categorical_editing",
        {
            "run_name": names["run"],
            "model": tiny_model_dir,
            "editors": ["none", "ike", "rome"],
            "edits_per_group": 1,
        },
        run_dir=tmp_path,
        progress=False,
    )
    summary = pd.read_csv(ROOT / "runs" / names["run"] / "summary.csv")
    assert list(summary.columns) == ["editor", "metric", "subset", "value", "n"]
    assert set(summary["editor"]) == {"none", "ike", "rome"}
    assert {"edit_success", "consistency", "invariance", "property_success"} <= set(
        summary["metric"]
    )
    assert (ROOT / "runs" / names["run"] / "figures" / "consistency_by_group.png").is_file()


def test_categorical_editing_notebook_on_taxis_released_shape(tmp_path, names, tiny_model_dir):
    from taxi_release import write_taxi_release

    path = write_taxi_release(tmp_path)  # with release_manifest.json: this small release is whole
    run_notebook(
        "05_categorical_editing",
        {
            "run_name": names["run"],
            "model": tiny_model_dir,
            "editors": ["none", "ike"],
            "taxi_file": str(path),
            "edits_per_group": 0,
            "figure_prefix": names["fig"],
        },
        run_dir=tmp_path,
        progress=False,
    )
    summary = pd.read_csv(ROOT / "runs" / names["run"] / "summary.csv")
    overall = summary[summary["subset"] == "overall"].set_index(["editor", "metric"])["n"]
    assert overall[("ike", "edit_success")] == 2 and overall[("ike", "invariance")] == 2


def test_select_notebook_on_an_imported_release_runs_all_five_techniques(
    tmp_path, names, tiny_model_dir
):
    from select_protocol_fixture import write_protocol_files
    from select_release import write_release
    from workbench.taxonomy import import_select, save_benchmark

    clone = write_protocol_files(write_release(tmp_path / "clone", all_responses=True))
    bench_dir = save_benchmark(import_select(clone), tmp_path / "bench")
    # SELECT's protocol with a small budget: one seed, short answers, one short epoch each on
    # the workbench's smaller mixture (SELECT's mixture is tested on tiny models)
    fast = {
        "epochs": 1,
        "dpo_epochs": 1,
        "rank": 8,
        "alpha": 16,
        "max_length": 96,
        "answer_tokens": 16,
        "mixture": "workbench",
        "batch_size": 8,
        "dpo_batch_size": 8,
    }
    executed = run_notebook(
        "01_select_abstention",
        {
            "run_name": names["run"],
            "models": [tiny_model_dir],
            "techniques": ["base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo"],
            "targets": ["yago:River"],
            "data_dir": str(bench_dir),
            "preset": "select",
            "seeds": [7],
            "technique_params": {
                "sft": fast,
                "sft_dpo": fast,
                "few_shot_cot": {"min_new_tokens": 8},
            },
            "probe_knowledge": False,
            "n_boot": 20,
            **SMALL,
        },
        run_dir=tmp_path,
        progress=False,
    )
    summary = pd.read_csv(ROOT / "runs" / names["run"] / "summary.csv")
    assert set(summary["technique"]) == {
        "base",
        "zero_shot",
        "few_shot_cot",
        "steering",
        "sft",
        "sft_dpo",
    }
    assert (summary["n_target"] == 3).all() and (summary["n_specificity"] == 2).all()
    rows = pd.read_parquet(ROOT / "runs" / names["run"] / "results.parquet")
    assert set(rows["seed"]) == {7} and rows["refused_select_heuristic"].notna().all()
    assert rows.loc[rows["technique"] == "few_shot_cot", "answer_parsed"].notna().all()
    # SELECT's aggregation by default under the preset: t-intervals in the techniques table
    assert set(pd.read_csv(ROOT / "runs" / names["run"] / "techniques.csv")["interval"]) == {"t"}
    # the figures are shown in the notebook, not only saved
    import nbformat

    outputs = [
        o
        for c in nbformat.read(executed, as_version=4).cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    ]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 1  # one target: one figure


def test_steering_gate_notebook(tmp_path, names, tiny_model_dir):
    """Notebook 11 sweeps gate settings over concepts from every root and draws the trade-off."""
    run_notebook(
        "11_steering_gate",
        {
            "run_name": names["run"],
            "model": tiny_model_dir,
            "concepts_per_root": 1,
            "n_questions": 4,
        },
        run_dir=tmp_path,
        progress=False,
    )
    run = ROOT / "runs" / names["run"]
    summary = pd.read_csv(run / "gate_summary.csv")
    assert list(summary["setting"]) == [
        "legacy",
        "pc1",
        "default (mean_diff)",
        "mean_diff, majority",
    ]
    assert (summary["concepts"] == 5).all()  # one concept from each of the five roots
    rates = summary[["auroc_near", "auroc_far", "tpr_target", "fpr_near", "fpr_far"]]
    assert ((rates >= 0) & (rates <= 1)).all().all()
    per_target = pd.read_csv(run / "gate_per_target.csv")
    assert len(per_target) == 4 * 5 and per_target["layers"].notna().all()
    assert (run / "figures" / "tradeoff.pdf").is_file() and (
        run / "figures" / "tradeoff.png"
    ).is_file()
