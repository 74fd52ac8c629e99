"""SELECT import is loud: missing files fall back with a warning recorded in the manifest, a
concept without training questions is an error, Git LFS pointers are named; evaluation never
asks a question some concept trains on; hints name the right command; fine-tuning says when
reference answers fall back."""

import json
import warnings

import pytest

from select_release import OVERLAP, write_release
from workbench.errors import ConfigError, WorkbenchError
from workbench.experiments.runner import evaluation_questions
from workbench.releases import ReleaseError
from workbench.taxonomy import load_benchmark, save_benchmark
from workbench.taxonomy.model import TaxonomyError
from workbench.taxonomy.select_format import SelectImportWarning, import_select


def _quiet_import(root, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SelectImportWarning)
        return import_select(root, **kw)


def test_a_complete_release_imports_without_fallbacks(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectImportWarning)
        bench = import_select(write_release(tmp_path))
    assert bench.manifest["fallbacks"] == []
    assert bench.manifest["overlap"] == {"count": 0, "questions": [], "pairs": []}
    assert bench.excluded_eval == frozenset()


def test_a_missing_atoms_train_file_warns_names_the_fallback_and_is_recorded(tmp_path, capsys):
    from workbench.cli import main

    root = write_release(tmp_path / "clone", drop=("atoms/data.train.json",))
    # a file of the release missing: an error in one line naming it and how to allow it
    with pytest.raises(
        ReleaseError,
        match=r"^select at .* is incomplete against .*"
        r"release_manifest\.json: missing atoms/data\.train\.json; "
        r".*allow_partial=True",
    ) as e:
        import_select(root)
    assert "\n" not in str(e.value)
    with pytest.warns(
        SelectImportWarning,
        match=r"atoms/data\.train\.json is missing: .*'extra_queries'"
        r".*no reference answers",
    ):
        bench = import_select(root, allow_partial=True)
    assert bench.manifest["release_load"] == "partial: missing atoms/data.train.json"
    assert len(bench.questions["yago:River"].train) == 15  # from extra_queries
    assert not any(a.concept_id in bench.atomic for a in bench.answers.values())
    assert any(a.concept_id in bench.compositions for a in bench.answers.values())
    assert [f.split(" ")[0] for f in bench.manifest["fallbacks"]] == ["atoms/data.train.json"]
    # the command prints it, and the written manifest keeps it for later runs
    assert main(["taxonomy", "import-select", str(root), "--out", str(tmp_path / "bench")]) == 2
    assert "error: select at" in capsys.readouterr().err
    assert (
        main(
            [
                "taxonomy",
                "import-select",
                str(root),
                "--out",
                str(tmp_path / "bench"),
                "--allow-partial",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "warning: atoms/data.train.json is missing" in captured.err
    assert "release: partial: missing atoms/data.train.json" in captured.out
    assert load_benchmark(tmp_path / "bench").manifest["fallbacks"] == bench.manifest["fallbacks"]
    assert main(["taxonomy", "stats", "--data", str(tmp_path / "bench")]) == 0
    assert "fallback: atoms/data.train.json is missing" in capsys.readouterr().out


@pytest.mark.parametrize(
    "missing, says",
    [
        ("compositions/data.train.json", "compositions have no reference answers"),
        ("atoms/example_cache.json", "atoms have no cached few-shot examples"),
        ("compositions/example_cache.json", "compositions have no cached few-shot examples"),
        ("compositions/hints.json", "not checked against them"),
    ],
)
def test_each_missing_optional_file_names_what_falls_back(tmp_path, missing, says):
    with pytest.warns(SelectImportWarning, match=missing.replace(".", r"\.") + " is missing"):
        bench = import_select(write_release(tmp_path, drop=(missing,)), allow_partial=True)
    assert len(bench.manifest["fallbacks"]) == 1 and says in bench.manifest["fallbacks"][0]


def test_a_concept_without_training_questions_is_an_error_unless_allowed(tmp_path):
    root = write_release(tmp_path / "clone", no_training_for=("yago:Lake",))
    with pytest.raises(
        TaxonomyError,
        match=r"1 of 17 concepts have no training questions \(no "
        r"'extra_queries' in atoms/data\.json and none in "
        r"atoms/data\.train\.json\): 'yago:Lake'",
    ):
        import_select(root)
    with pytest.warns(SelectImportWarning, match=r"1 of 17 concepts have no training questions"):
        bench = import_select(root, allow_missing_training=True)
    s = bench.stats()
    assert s["concepts_without_train_questions"] == 1 and s["min_train_per_concept"] == 0
    assert s["min_eval_per_concept"] == 20 and s["max_eval_per_concept"] == 30
    # no train file at all and no extra_queries anywhere in atoms: every atom is named in the count
    root = write_release(tmp_path / "bare", with_train_file=False, extra_queries=False)
    with pytest.raises(
        TaxonomyError,
        match=r"17 of 17 concepts .*and no atoms/data\.train\.json\)"
        r".*and 12 more",
    ):
        import_select(root, allow_partial=True)


def test_stats_report_each_split_truthfully(tmp_path):
    s = _quiet_import(write_release(tmp_path)).stats()
    assert (s["min_train_per_concept"], s["max_train_per_concept"]) == (7, 15)
    assert (s["min_validation_per_concept"], s["max_validation_per_concept"]) == (3, 5)
    assert (s["min_eval_per_concept"], s["max_eval_per_concept"]) == (20, 30)
    assert s["train_questions"] == 17 * 15 + 12 * 7
    assert s["concepts_without_train_questions"] == 0


def test_a_git_lfs_pointer_is_named_with_the_command_to_fetch_it(tmp_path):
    root = write_release(tmp_path)
    pointer = (
        "version https://git-lfs.github.com/spec/v1\noid sha256:" + "ab" * 32 + "\nsize 123456\n"
    )
    (root / "data" / "SELECT" / "atoms" / "data.train.json").write_text(pointer)
    with pytest.raises(TaxonomyError) as e:
        import_select(root)
    message = str(e.value)
    assert "\n" not in message
    assert "atoms/data.train.json is a Git LFS pointer" in message and "git lfs pull" in message


def test_evaluation_never_asks_a_question_some_concept_trains_on(tmp_path):
    with pytest.warns(SelectImportWarning, match="3 evaluation question"):
        bench = import_select(write_release(tmp_path / "clone", overlap=True))
    overlap = bench.manifest["overlap"]
    assert overlap["count"] == 3
    assert {(p["eval_of"], tuple(p["train_of"]), p["question"]) for p in overlap["pairs"]} == {
        (e, (t,), q) for e, t, q in OVERLAP
    }
    assert bench.excluded_eval == {q for _, _, q in OVERLAP}
    # the released evaluation lists stay as released
    assert bench.questions["yago:Documentary"].eval[0] == OVERLAP[0][2]
    assert len(bench.questions["yago:Documentary"].eval) == 30
    for target in (
        "schema:Movie",
        "yago:Documentary",
        "schema:CreativeWork",
        "about/schema:Movie#yago:River",
        "dumping-in/yago:Chemical_substance#yago:River",
    ):
        asked = evaluation_questions(
            bench, target, 30, 200, 200, n_unrelated=200, n_constituent=200, n_composition=200
        )
        assert not {q.question for q in asked} & bench.excluded_eval, target
    # the excluded question's place is taken by another: the target still gets n questions
    own = evaluation_questions(bench, "yago:Documentary", 5, 0, 0)
    assert len(own) == 5 and OVERLAP[0][2] not in {q.question for q in own}
    # saved and loaded, the exclusion holds and the content hash says it changed
    save_benchmark(bench, tmp_path / "bench")
    loaded = load_benchmark(tmp_path / "bench")
    assert loaded.excluded_eval == bench.excluded_eval
    plain = save_benchmark(_quiet_import(write_release(tmp_path / "plain")), tmp_path / "b2")
    assert loaded.content_hash() != load_benchmark(plain).content_hash()


def test_a_hash_mismatch_in_an_imported_directory_suggests_reimporting(tmp_path):
    root = write_release(tmp_path / "clone")
    bench = _quiet_import(root)
    out = save_benchmark(bench, tmp_path / "bench")
    q = out / "questions.jsonl"
    q.write_text(q.read_text()[:-100])
    release = bench.manifest["release_dir"]
    with pytest.raises(
        WorkbenchError,
        match=r"does not match the manifest's hash .* re-import it with: "
        r"python -m workbench taxonomy import-select "
        f"{release} --out {out}$",
    ) as e:
        load_benchmark(out)
    assert "taxonomy build" not in str(e.value)


def test_reference_answers_that_fall_back_are_counted_and_none_at_all_is_an_error(
    tmp_path, monkeypatch
):
    import workbench.techniques.finetune as ft
    from workbench.techniques import get_technique

    monkeypatch.setattr(ft, "_own_answers", lambda lm, qs, tokens: [f"own {q}" for q in qs])
    bench = _quiet_import(write_release(tmp_path / "full"))
    sft = get_technique("sft", comply_answers="reference")
    sft.check_data(bench, "yago:River")
    data = sft.data(bench, "yago:River")
    with_ref = [q.question for q in data.unrelated if q.question in bench.answers]
    assert with_ref  # the fixture answers 4 training questions per atom
    with pytest.warns(
        ft.ReferenceFallbackWarning,
        match=rf"sft for 'yago:River': {len(data.unrelated) - len(with_ref)} of "
        rf"{len(data.unrelated)} questions have no reference answer",
    ):
        pairs = sft.pairs(None, data)
    kept = dict(pairs[len(data.related) :])
    assert all(kept[q] == bench.answers[q].comply for q in with_ref)
    with warnings.catch_warnings():  # "own" never warns
        warnings.simplefilter("error", ft.ReferenceFallbackWarning)
        get_technique("sft").pairs(None, data)
    # a benchmark without any reference answers: an error before any model loads
    bare = _quiet_import(
        write_release(tmp_path / "bare", with_train_file=False), allow_partial=True
    )
    assert bare.answers == {}
    for name in ("sft", "sft_dpo"):
        with pytest.raises(
            ConfigError,
            match=f"technique '{name}' has comply_answers='reference', "
            "but the benchmark has no reference answers",
        ):
            get_technique(name, comply_answers="reference").check_data(bare, "yago:River")
        get_technique(name).check_data(bare, "yago:River")


def test_the_manifest_of_an_import_is_plain_json(tmp_path):
    out = save_benchmark(_quiet_import(write_release(tmp_path / "c", overlap=True)), tmp_path / "b")
    manifest = json.loads((out / "manifest.json").read_text())
    assert (
        manifest["overlap"]["count"] == 3
        and manifest["counts"]["eval_questions_excluded_as_seen"] == 3
    )


def test_concepts_the_train_file_lacks_take_extra_queries_with_a_warning(tmp_path):
    root = write_release(tmp_path)
    train = root / "data" / "SELECT" / "atoms" / "data.train.json"
    data = json.loads(train.read_text())
    del data["yago:River"]
    train.write_text(json.dumps(data))
    with pytest.raises(
        ReleaseError,
        match=r"atoms/data\.train\.json has 16 of 17 concepts, 320 of "
        r"340 queries",
    ):
        import_select(root)
    with pytest.warns(
        SelectImportWarning,
        match=r"atoms/data\.train\.json lacks 1 of 17 concepts "
        r"\(first: yago:River\)",
    ):
        bench = import_select(root, allow_partial=True)
    assert len(bench.questions["yago:River"].train) == 15
    assert not any(a.concept_id == "yago:River" for a in bench.answers.values())


def test_a_malformed_question_list_is_an_error_naming_file_and_line(tmp_path):
    root = write_release(tmp_path)
    path = root / "data" / "SELECT" / "atoms" / "data.json"
    data = json.loads(path.read_text())
    data["yago:Lake"]["queries"] = "What is a lake?"  # a string, not a list
    path.write_text(json.dumps(data, indent=1))
    line = next(
        n for n, text in enumerate(path.read_text().splitlines(), 1) if '"yago:Lake":' in text
    )
    with pytest.raises(
        TaxonomyError,
        match=rf"atoms/data\.json, line {line}: 'yago:Lake' 'queries' is "
        r"not a list of strings \(got str 'What is a lake\?'\)",
    ):
        import_select(root, allow_partial=True)  # malformed is never allowed


def test_a_file_not_utf8_or_a_context_not_an_object_is_one_line(tmp_path):
    """Both were tracebacks (UnicodeDecodeError, AttributeError) before."""
    root = write_release(tmp_path)
    path = root / "data" / "SELECT" / "atoms" / "data.json"
    raw = path.read_bytes()
    path.write_bytes(b"\xe9" + raw[1:])
    with pytest.raises(TaxonomyError, match=r"atoms/data.json: not UTF-8 text \(byte 0xe9") as e:
        import_select(root)
    assert "\n" not in str(e.value)
    path.write_bytes(b"\xef\xbb\xbf" + raw)  # a byte-order mark is no error
    import_select(root)
    data = json.loads(raw)
    first = next(iter(data))
    data[first]["context"] = ["not", "an", "object"]
    path.write_text(json.dumps(data))
    with pytest.raises(TaxonomyError, match=f"{first!r} has context .* not an object"):
        import_select(root)
