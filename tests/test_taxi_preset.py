"""taxi's protocol as a preset: the release's defects found and corrected, its wording read from
the clone, its settings as in the docs table (docs/taxi.md), and the editors' taxi options on tiny models."""

import json
import re

import pandas as pd
import pytest
import torch

from taxi_release import fixed_tsv, food_rows, taxi_rows, write_clone
from workbench.editing import (
    FT,
    ROME,
    evaluate_editor,
    load_taxi,
    split_query,
)
from workbench.editing.corpus import context_templates, sample_texts
from workbench.editing.presets import (
    EDITING_PRESETS,
    TAXI_DEPTH,
    WORKBENCH_IKE,
    check_against_clone,
    editor_params,
    editors_for,
    relative_layer,
)
from workbench.editing.taxi import (
    find_taxi_root,
    normalise_subjects,
    prepare_release,
    read_hparams,
    read_protocol,
    release_report,
    stale_rows,
)
from workbench.errors import ConfigError, WorkbenchError
from workbench.paths import repo_root


@pytest.fixture()
def clone(tmp_path):
    return write_clone(tmp_path / "taxi")


def released(root):
    return load_taxi(root / "datasets" / "edits-evaluation.json")


# -- the release's defects ----------------------------------------------------------------------
def test_stale_rows_and_spaced_subjects_are_counted(clone):
    frame = released(clone)
    st = stale_rows(frame)
    # three 'made_from' rows repeat <answer> in the reverse template; two lack the forward slot
    assert st["reverse_repeats_answer"].sum() == 3 and st["forward_lacks_slot"].sum() == 2
    report = release_report(frame)
    assert (report.stale_rows, report.reverse_repeats_answer, report.forward_lacks_slot) == (
        3,
        3,
        2,
    )
    assert report.spaced_subjects == {"Brie ": {"edits": 2, "queries": 4}}
    assert report.rows == 9 and report.edits == 5


def test_stale_rows_are_corrected_from_the_clones_taxonomy(clone):
    fixed, report = prepare_release(released(clone), clone, fix_stale=True)
    assert report.corrected == 3 and report.stale_after == 0
    assert set(report.correction_files) == {"taxonomy/food-data.tsv", "taxonomy/animal-data.tsv"}
    made = fixed[fixed["property"] == "made_from"]
    assert set(made["query_rev"]) == {"<answer> is what makes <subj>"}
    assert set(made["query_fwd"]) == {"<subj> is made from <answer>"}
    # rows the TSV does not hold are untouched
    others = released(clone)
    others = others[others["property"] != "made_from"].reset_index(drop=True)
    pd.testing.assert_frame_equal(
        fixed[fixed["property"] != "made_from"].reset_index(drop=True), others
    )
    assert any("corrected 3 rows" in line for line in report.lines())


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (
            lambda t: (t / "animal-data.tsv").unlink(),
            "holds 1 of the 2 taxonomy files the edits need: taxonomy/animal-data.tsv missing",
        ),
        (
            lambda t: (t / "food-data.tsv").write_bytes(b"entity\tproperty\n\xe9\tx\n"),
            r"food-data.tsv: not UTF-8 text \(byte 0xe9",
        ),
        (
            lambda t: (t / "food-data.tsv").write_text(fixed_tsv() + 'cheese\t"never closed\n'),
            r"food-data.tsv, line \d+: unexpected end of data",
        ),
        (
            lambda t: (t / "food-data.tsv").write_text(
                fixed_tsv().replace("\t\t\t\n", "\t\t\t\textra\n", 1)
            ),
            "food-data.tsv, row 2: 10 fields where the header has 9",
        ),
    ],
)
def test_a_partial_or_damaged_taxonomy_is_one_line(clone, damage, said):
    """Each was a traceback, a row shifted into the index or groups left uncorrected quietly."""
    damage(clone / "taxonomy")
    with pytest.raises(WorkbenchError, match=said) as e:
        prepare_release(released(clone), clone, fix_stale=True)
    assert "\n" not in str(e.value)


def test_without_a_taxonomy_the_stale_rows_are_kept_and_said_so(tmp_path):
    root = write_clone(tmp_path / "taxi", tsv=False)
    _kept, report = prepare_release(released(root), root, fix_stale=True)
    assert report.corrected == 0 and report.stale_after == 3
    assert any("no taxonomy TSV" in line for line in report.lines())
    _off, report = prepare_release(released(root), root, fix_stale=False)
    assert report.stale_after == 3 and any("fix_stale is off" in line for line in report.lines())


def test_subjects_are_spelled_the_same_in_the_edit_and_its_queries(clone, tiny):
    frame, _ = prepare_release(released(clone), clone, subjects="as_released")
    seen = []

    class Spy(FT):
        name = "spy"

        def edit(self, lm, subject, category):
            seen.append(subject)
            from workbench.editing import EditedModel

            return EditedModel(lm)

    brie = frame[frame["subj"] == "Brie "]
    evaluate_editor(tiny, Spy(), brie)
    assert seen == ["Brie ", "Brie "]  # as released: the trailing space in the edit too
    norm, report = prepare_release(released(clone), clone, subjects="normalised")
    assert report.subjects == "normalised" and "Brie " not in set(norm["subj"])
    assert {"Brie -> bread", "Brie -> fruit"} <= set(norm["edit"])
    assert all("Brie " not in cs for cs in norm["rev_choices"])
    seen.clear()
    scored = evaluate_editor(tiny, Spy(), norm[norm["subj"] == "Brie"])
    assert seen == ["Brie", "Brie"]
    assert set(scored.loc[scored["direction"] == "reverse", "answer"]) == {"Brie"}
    with pytest.raises(WorkbenchError, match="subjects must be"):
        prepare_release(released(clone), clone, subjects="stripped")


def test_an_edit_whose_queries_disagree_on_the_subject_is_an_error(tiny):
    rows = pd.DataFrame(taxi_rows()[:2])
    rows.loc[1, "subj"] = "Siamese "
    with pytest.raises(WorkbenchError, match="several subjects"):
        evaluate_editor(tiny, FT(layer=0, steps=1), rows)


def test_normalise_subjects_leaves_other_rows_alone():
    frame = pd.DataFrame(taxi_rows())
    pd.testing.assert_frame_equal(normalise_subjects(frame), frame)


def test_append_slots_fill_as_taxis_code(clone):
    # taxi empties every slot and appends the choice: the reverse category query keeps its words
    query = "a <subj> is a kind of <answer>"
    assert split_query(query, "<subj>", "append", answer="dog") == ("a  is a kind of dog", "")
    assert split_query(query, "<answer>", "append", subj="Brie ") == ("a Brie  is a kind of", "")
    # the stale reverse template, as released: the answer twice, the choice after it
    assert split_query(
        "<answer> is what makes <answer>", "<subj>", "append", answer="ground wheat"
    ) == ("ground wheat is what makes ground wheat", "")
    with pytest.raises(ValueError, match="slots"):
        split_query("<subj> x", "<subj>", "around")


def test_find_taxi_root_from_the_file_or_the_folder(clone, tmp_path):
    assert find_taxi_root(clone / "datasets" / "edits-evaluation.json") == clone.resolve()
    assert find_taxi_root(clone) == clone.resolve()
    loose = tmp_path / "loose.json"
    loose.write_text("{}")
    assert find_taxi_root(loose) is None


# -- taxi's wording and settings from the clone ---------------------------------------------------
def test_protocol_text_is_read_from_the_clone(clone):
    p = read_protocol(clone)
    assert p.ike_template == "Suppose {s} were one {c} {{really}}!\n"
    assert p.ike_template.format(s="Brie ", c="bread") == "Suppose Brie  were one bread {really}!\n"
    assert p.rewrite_prompt == "Consider the {s}, which belongs to"
    assert p.kl_prompt == "{s} means"
    assert set(p.files) == {"easyeditor/custom/custom.py", "easyeditor/models/rome/compute_v.py"}
    assert all(re.fullmatch("[0-9a-f]{64}", h) for h in p.files.values())


def test_without_the_code_the_workbench_wording_is_used_and_said(tmp_path, tiny):
    root = write_clone(tmp_path / "taxi", code=False)
    p = read_protocol(root)
    assert (p.ike_template, p.rewrite_prompt, p.kl_prompt, p.files) == (None, None, None, {})
    params, notes = editor_params("taxi", "ike", tiny, p)
    assert params["template"] == WORKBENCH_IKE and "workbench wording" in notes["template"]
    params, notes = editor_params("taxi", "rome", tiny, read_protocol(write_clone(tmp_path / "t2")))
    assert (
        params["templates"] == ("Consider the {s}, which belongs to",)
        and params["kl_prompt"] == "{s} means"
    )
    assert notes["templates"] == "taxi's clone"


def test_broken_protocol_file_is_named(tmp_path):
    from workbench.editing.taxi import TaxiProtocolError

    root = write_clone(tmp_path / "taxi")
    (root / "easyeditor/custom/custom.py").write_text("def edit_and_evaluate(:\n")
    with pytest.raises(TaxiProtocolError, match="custom.py"):
        read_protocol(root)


def test_clone_settings_agree_with_the_preset_and_drift_is_named(clone):
    assert check_against_clone(read_hparams(clone)) == []
    (clone / "hparams/ROME/llama-7b.yaml").write_text(
        (clone / "hparams/ROME/llama-7b.yaml")
        .read_text()
        .replace("kl_factor: 0.0625", "kl_factor: 0.1")
    )
    assert check_against_clone(read_hparams(clone)) == [
        "rome: kl_factor is 0.1 in the clone, 0.0625 in the taxi preset"
    ]


# -- the preset ------------------------------------------------------------------------------------
def test_run_settings_take_the_presets_unless_given():
    from workbench.editing.presets import run_settings

    assert run_settings("taxi") == {
        "normalization": "none",
        "slots": "append",
        "subjects": "as_released",
    }
    assert run_settings("workbench") == {
        "normalization": "token",
        "slots": "in_place",
        "subjects": "normalised",
    }
    assert run_settings("taxi", "token", "normalised")["normalization"] == "token"
    with pytest.raises(ConfigError, match="subjects"):
        run_settings("taxi", subjects="stripped")
    with pytest.raises(ConfigError, match="normalization"):
        run_settings("taxi", normalization="word")


def test_layers_map_by_relative_depth():
    assert relative_layer(0, 30) == 0 and relative_layer(TAXI_DEPTH - 1, 30) == 29
    assert relative_layer(21, 30) == 20 and relative_layer(5, 30) == 5  # SmolLM2-135M: 30 blocks
    assert relative_layer(21, 32) == 21 and relative_layer(5, 2) == 0 and relative_layer(21, 2) == 1
    with pytest.raises(ConfigError):
        relative_layer(32, 30)


def test_editors_for_the_taxi_preset(tiny, clone):
    eds, record = editors_for("taxi", ["none", "ike", "ft", "rome"], tiny, read_protocol(clone))
    _none, ike, ft, rome = eds
    assert ike.template == "Suppose {s} were one {c} {{really}}!\n"
    assert (ft.layer, rome.layer) == (1, 0)  # the tiny model has 2 blocks
    assert ft.max_change is None and ft.loss == "last_position" and ft.stop_loss == 1e-2
    assert ft.templates == ("Consider the {s}, which belongs to",)
    assert rome.recipe == "easyedit" and rome.kl_factor == 0.0625 and rome.damping == 0.0
    assert rome.corpus == "model_samples" and rome.final_step is False
    assert record["ft"]["sources"]["layer"] == "taxi's block 21 of 32 -> 1 of 2"
    eds, _ = editors_for("taxi", ["ft"], tiny, None, layer=0)
    assert eds[0].layer == 0
    with pytest.raises(ConfigError, match="unknown editing preset"):
        editors_for("easyedit", ["ft"], tiny)


def test_the_readme_table_matches_the_preset():
    """The table 'taxi's protocol, setting by setting' holds a row per preset value; a
    drift on either side fails here."""
    readme = (repo_root() / "docs" / "taxi.md").read_text()
    assert "taxi's protocol, setting by setting" in readme
    table = readme.split("taxi's protocol, setting by setting", 1)[1]
    taxi = EDITING_PRESETS["taxi"]
    for key in ("normalization", "slots", "subjects"):
        assert f"`{key}={taxi[key]}`" in table, key
    for editor in ("ft", "rome"):
        for key, value in taxi[editor].items():
            if key in ("templates", "kl_prompt"):
                continue
            assert f"`{key}={value!r}`".replace("'", "") in table.replace("'", ""), (
                editor,
                key,
                value,
            )


# -- the editors' taxi options on tiny models -------------------------------------------------------
def test_ft_without_a_norm_constraint_moves_further_and_restores(tiny):
    before = {k: v.clone() for k, v in tiny.model.state_dict().items()}
    key = "model.layers.1.mlp.down_proj.weight"
    free = FT(
        layer=1, steps=5, lr=1e-2, max_change=None, loss="last_position", templates=("A {s} is",)
    )
    with free.edit(tiny, "Labrador", "cat"):
        free_change = (tiny.model.state_dict()[key] - before[key]).abs().max().item()
    bounded = FT(
        layer=1, steps=5, lr=1e-2, max_change=1e-3, loss="last_position", templates=("A {s} is",)
    )
    with bounded.edit(tiny, "Labrador", "cat"):
        bounded_change = (tiny.model.state_dict()[key] - before[key]).abs().max().item()
    assert bounded_change <= 1e-3 + 1e-7 < free_change
    assert all(torch.equal(v, before[k]) for k, v in tiny.model.state_dict().items())
    with pytest.raises(ValueError, match="FT loss"):
        FT(loss="mean")


def test_ft_last_position_loss_is_easyedits(tiny):
    """Every target token's log-probability read at the prompt's last position, averaged."""
    tok = tiny.tokenizer
    ft = FT(
        layer=1, steps=1, lr=0.0, max_change=None, loss="last_position", templates=("A {s} is",)
    )
    edited = ft.edit(tiny, "Labrador", "big cat")
    ids = tok("A Labrador is")["input_ids"]
    target = tok(" big cat", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(tiny.model(torch.tensor([ids])).logits[0, -1].float(), -1)
    assert edited.info["final_loss"] == pytest.approx(-logp[target].mean().item(), abs=1e-5)
    edited.restore()


def test_stop_loss_ends_before_stepping(tiny):
    before = {k: v.clone() for k, v in tiny.model.state_dict().items()}
    ft = FT(layer=1, steps=5, lr=1.0, max_change=None, stop_loss=1e9)
    with ft.edit(tiny, "Labrador", "cat"):
        assert all(torch.equal(v, before[k]) for k, v in tiny.model.state_dict().items())


def test_model_samples_are_seeded_and_sized(tiny):
    a = sample_texts(tiny, ["The", "A"], 2, 6, seed=3)
    assert a == sample_texts(tiny, ["The", "A"], 2, 6, seed=3) and len(a) == 4
    assert [t[:1] for t in a] == ["T", "T", "A", "A"] and a != sample_texts(
        tiny, ["The", "A"], 2, 6, seed=4
    )
    ctx = context_templates(tiny, ((4, 5), (6, 5)), seed=1)
    assert ctx[0] == "{}" and len(ctx) == 11
    assert all(c.endswith(". {}") and c.count("{}") == 1 for c in ctx[1:])


def test_rome_easyedit_recipe_with_kl_restores_and_maps_the_prompt_key(tiny):
    """The rank-one update sends the bare prompt's key to the optimised value (EasyEdit's
    solve), whatever the KL term; restore() gives back every weight."""
    before = {k: v.clone() for k, v in tiny.model.state_dict().items()}
    rome = ROME(
        layer=0,
        recipe="easyedit",
        corpus=["the dog runs", "a cat sleeps here", "one two three"],
        context_lengths=((4, 5),),
        steps=4,
        final_step=False,
        kl_factor=0.0625,
        weight_decay=1e-3,
        stop_loss=5e-2,
        templates=("A {s} is a kind of",),
        damping=1e-2,
    )
    assert len(rome.context_templates(tiny)) == 6
    from workbench.editing.editors import _reps_at, _subject_batch

    seqs, pos, _, _ = _subject_batch(tiny, "Labrador", ["A {s} is a kind of"], None)
    out_before = _reps_at(tiny, 0, seqs, pos)[1][0]
    edited = rome.edit(tiny, "Labrador", "cat")
    changed = [k for k, v in tiny.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed == ["model.layers.0.mlp.down_proj.weight"]
    assert edited.info["update_norm"] > 0
    # the bare prompt's key now gives the optimised value: the output moved by exactly |delta|
    moved = (_reps_at(tiny, 0, seqs, pos)[1][0] - out_before).norm().item()
    assert moved == pytest.approx(edited.info["delta_norm"], rel=1e-3) and moved > 0
    edited.restore()
    assert all(torch.equal(v, before[k]) for k, v in tiny.model.state_dict().items())
    with pytest.raises(ValueError, match="recipe"):
        ROME(recipe="memit")
    with pytest.raises(ValueError, match="corpus"):
        ROME(corpus="wikipedia")


def test_rome_kl_term_holds_the_kl_prompt_closer(tiny):
    """With a large KL weight the next-token distribution after the KL prompt's subject moves
    less than without it."""

    def kl_after(kl_factor):
        rome = ROME(
            layer=0,
            corpus=["the dog runs", "a cat sleeps"],
            steps=6,
            kl_factor=kl_factor,
            templates=("A {s} is a kind of",),
            lr=0.5,
        )
        ids = tiny.tokenizer("Labrador is a")["input_ids"]
        pos = len(tiny.tokenizer("Labrador")["input_ids"]) - 1
        with torch.no_grad():
            p0 = torch.log_softmax(tiny.model(torch.tensor([ids])).logits[0, pos].float(), -1)
        with rome.edit(tiny, "Labrador", "cat"), torch.no_grad():
            p1 = torch.log_softmax(tiny.model(torch.tensor([ids])).logits[0, pos].float(), -1)
        return torch.nn.functional.kl_div(p0, p1, log_target=True, reduction="sum").item()

    assert kl_after(50.0) < kl_after(0.0)


def test_model_sample_statistics_are_cached_by_spec(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    rome = ROME(layer=0, corpus="model_samples", n_samples=6, sample_tokens=8, seed=2)
    c = rome.second_moment(tiny)
    assert c.shape == (64, 64) and torch.allclose(c, c.T)
    files = list((tmp_path / "rome_stats").iterdir())
    assert len(files) == 1 and "-6.pt" in files[0].name
    assert torch.equal(rome.second_moment(tiny), c)
    other = ROME(
        layer=0, corpus="model_samples", n_samples=6, sample_tokens=8, seed=3
    ).second_moment(tiny)
    assert len(list((tmp_path / "rome_stats").iterdir())) == 2 and not torch.equal(other, c)


# -- the notebook on a release-shaped clone ----------------------------------------------------------
@pytest.mark.notebook
def test_notebook_05_with_the_taxi_preset_on_a_release_shaped_clone(tmp_path):
    import shutil

    from workbench.notebooks import run_notebook

    root = write_clone(tmp_path / "taxi", rows=taxi_rows() + food_rows())
    run_name = f"test-taxi-preset-{tmp_path.name}"
    run = repo_root() / "runs" / run_name
    try:
        run_notebook(
            "05_categorical_editing",
            {
                "run_name": run_name,
                "editing_preset": "taxi",
                "editors": ["none", "ike"],
                "taxi_file": str(root / "datasets" / "edits-evaluation.json"),
                "edits_per_group": 0,
            },
            run_dir=tmp_path / "nb",
            progress=False,
        )
        record = json.loads((run / "protocol.json").read_text())
        assert record["normalization"] == "none" and record["slots"] == "append"
        assert record["release"]["corrected"] == 3 and record["release"]["spaced_subjects"] == {
            "Brie ": {"edits": 2, "queries": 4}
        }
        assert (
            record["editors"]["ike"]["params"]["template"]
            == "Suppose {s} were one {c} {{really}}!\n"
        )
        assert record["settings_drift"] == []
        forward = pd.read_csv(run / "forward.csv")
        overall = forward[forward["subset"] == "overall"].set_index(["editor", "metric"])["n"]
        assert (
            overall[("ike", "edit_success")] == 4
        )  # the four edits with a category query, forward
    finally:
        shutil.rmtree(run, ignore_errors=True)
