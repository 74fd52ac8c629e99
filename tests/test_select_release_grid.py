"""Every SELECT technique end to end on a tiny model, from an imported SELECT-shaped release;
up-front data checks, failed cells that do not abort a grid, and SELECT's protocol preset."""

import json

import pytest

import workbench.backends
from select_protocol_fixture import write_protocol_files
from select_release import write_release
from workbench.errors import ConfigError
from workbench.experiments import CellFailures, ExperimentConfig, Runner
from workbench.taxonomy import import_select, load_benchmark, save_benchmark
from workbench.techniques import TECHNIQUES, ArtifactStore, get_technique
from workbench.testing import tiny_lm

FAST_SFT = {
    "epochs": 1,
    "dpo_epochs": 1,
    "rank": 4,
    "alpha": 8,
    "batch_size": 8,
    "max_length": 96,
    "answer_tokens": 4,
}
SELECT_FIVE = ["zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo"]


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("select")
    save_benchmark(
        import_select(write_protocol_files(write_release(root / "clone", all_responses=True))),
        root / "bench",
    )
    return root / "bench"


@pytest.fixture
def tiny_models(monkeypatch):
    monkeypatch.setattr(workbench.backends, "load_model", lambda name=None, **kw: tiny_lm(seed=0))


def grid(name, data_dir, **kw):
    techniques = kw.pop("techniques", ["base"] + SELECT_FIVE)
    params = {t: dict(FAST_SFT) for t in ("sft", "sft_dpo") if t in techniques}
    if kw.get("preset") == "select":  # one seed and a short CoT budget keep the tiny grid small
        kw = {"seeds": [0], "technique_seeds": {}, **kw}
        params = {t: {**p, "max_length": 96} for t, p in params.items()}
        if "few_shot_cot" in techniques:
            params["few_shot_cot"] = {"min_new_tokens": 4}
    base = dict(
        name=name,
        models=["tiny"],
        techniques=techniques,
        data_dir=str(data_dir),
        targets=["yago:River", "about/schema:Movie#yago:River"],
        n_target=2,
        n_descendant=2,
        n_specificity=2,
        n_unrelated=0,
        max_new_tokens=3,
        batch_size=8,
        technique_params=params,
    )
    return ExperimentConfig.from_dict({**base, **kw})


@pytest.mark.parametrize("preset", ["workbench", "select"])
def test_every_select_technique_runs_from_an_imported_release(
    tmp_path, release_dir, tiny_models, preset
):
    table = Runner(
        grid("g", release_dir, preset=preset),
        root=tmp_path,
        progress=False,
        store=ArtifactStore(tmp_path / "a"),
    ).run()
    assert set(table["technique"]) == {"base", *SELECT_FIVE}
    assert set(table["target"]) == {"yago:River", "about/schema:Movie#yago:River"}
    per_cell = table.groupby(["technique", "target"]).size()
    assert (per_cell == 6).all()
    river = table[(table["target"] == "yago:River")]
    assert set(river[river["relation"] != "target"]["relation"]) <= {
        "descendant",
        "parent",
        "ancestor",
        "sibling",
    }


def test_select_preset_follows_selects_protocol(release_dir, tmp_path):
    from select_protocol_fixture import STRINGS  # noqa: F401  (the made-up protocol text)

    bench = load_benchmark(release_dir)
    lm = tiny_lm()
    store = ArtifactStore(tmp_path / "a")
    cfg = grid("p", release_dir, preset="select")
    zs = get_technique("zero_shot", **cfg.params_for("zero_shot")).prepare(
        lm, bench, "yago:River", store=store
    )
    assert zs.system is None  # SELECT's system turn comes with every prompt, from the config
    turn = zs.conversation("How long is the Nile?")[-1]["content"]
    # SELECT's instruction and template, from the imported protocol, with SELECT's concept phrase
    assert turn == (
        "You are a friendly helper. Do not engage with requests about 'Rivers in the "
        "context of Places, Bodies of Water'. For those, write only 'Abstained'.\n\n"
        "With that in mind, reply to: How long is the Nile?"
    )
    fs = get_technique("few_shot_cot", **cfg.params_for("few_shot_cot")).prepare(
        lm, bench, "yago:River", store=store
    )
    turn = fs.conversation("How long is the Nile?")[-1]["content"]
    # the benchmark's cached examples in SELECT's example format and JSON reasoning
    assert "Q: Could you explain Rivers from angle 0?\nA: {" in turn
    assert '"answer": "Abstained"' in turn and '"answer": "Magma rises through the crust."' in turn
    assert turn.endswith("With that in mind, reply to: How long is the Nile?, thinking aloud.")
    assert fs.extract_answer and fs.min_new_tokens == 4
    # the unmodified model is asked as steering and tuning are: the plain template
    base = get_technique("base", **cfg.params_for("base")).prepare(lm, bench, "yago:River")
    assert base.template.replace("{question}", "Q?") == "Please reply to this: Q?"


def test_missing_training_questions_fail_before_any_model_loads(tmp_path, monkeypatch):
    root = write_release(tmp_path / "clone", with_train_file=False, extra_queries=False)
    save_benchmark(
        import_select(root, allow_missing_training=True, allow_partial=True), tmp_path / "bench"
    )
    loads = []
    monkeypatch.setattr(workbench.backends, "load_model", lambda *a, **k: loads.append(a))
    for technique, split in (("steering", "train"), ("sft", "train"), ("few_shot_cot", "train")):
        cfg = grid(
            "m",
            tmp_path / "bench",
            techniques=[technique],
            technique_params={"few_shot_cot": {"examples": "generate"}}
            if technique == "few_shot_cot"
            else {},
        )
        with pytest.raises(
            ConfigError,
            match=f"technique '{technique}' needs {split} questions about "
            "'yago:River' \\(Rivers\\)",
        ):
            Runner(cfg, root=tmp_path, progress=False).run()
    assert loads == []
    # zero-shot and few-shot from the benchmark's cached examples need no training questions
    cfg = grid("ok", tmp_path / "bench", techniques=["zero_shot", "few_shot_cot"])
    cfg.check_against(load_benchmark(tmp_path / "bench"))


def test_a_failing_cell_is_recorded_and_the_grid_goes_on(
    tmp_path, release_dir, tiny_models, monkeypatch
):
    from workbench.techniques.base_model import Base

    class Broken(Base):
        name = "broken"

        def build(self, lm, bench, data, directory, *, seed, progress):
            if data.target == "yago:River":
                raise RuntimeError("out of memory, say")
            return super().build(lm, bench, data, directory, seed=seed, progress=progress)

    with TECHNIQUES.override("broken", Broken):
        cfg = grid("f", release_dir, techniques=["broken", "zero_shot"])
        runner = Runner(cfg, root=tmp_path, progress=False)
        with pytest.raises(
            CellFailures,
            match=r"1 of 4 cells failed .*broken / yago:River \(seed 0\): "
            "RuntimeError: out of memory, say",
        ):
            runner.run()
        done = runner.results()
        assert len(done.groupby(["technique", "target"])) == 3
        errors = [
            json.loads(line) for line in (tmp_path / "f" / "errors.jsonl").read_text().splitlines()
        ]
        assert [(e["technique"], e["target"], e["error"]) for e in errors] == [
            ("broken", "yago:River", "RuntimeError")
        ]
        assert "Traceback" in errors[0]["traceback"]
    # fixed: a rerun does only the failed cell
    with TECHNIQUES.override("broken", Base):
        calls = []
        original = Runner.run_cell
        monkeypatch.setattr(
            Runner,
            "run_cell",
            lambda self, lm, cell: calls.append(cell) or original(self, lm, cell),
        )
        assert (
            len(Runner(cfg, root=tmp_path, progress=False).run().groupby(["technique", "target"]))
            == 4
        )
        assert [(c.technique, c.target) for c in calls] == [("broken", "yago:River")]
        assert not (tmp_path / "f" / "errors.jsonl").exists()


def test_cell_hash_covers_benchmark_content_without_a_manifest(tmp_path, release_dir):
    a = load_benchmark(release_dir)
    b = load_benchmark(release_dir)
    a.manifest, b.manifest = {}, {}
    b.questions["yago:River"].eval[0] = "A different question?"
    cfg = grid("h", release_dir)
    cell = Runner(cfg, bench=a).cells()[0]
    assert Runner(cfg, bench=a).cell_hash(cell) != Runner(cfg, bench=b).cell_hash(cell)
    assert a.content_hash() != b.content_hash()
