"""The outside labelled sources (:mod:`workbench.scoring.outside`) on files in their authors'
shapes, of our own writing: XSTest v2's ``model_completions/`` beside its automated labels, XSTest
v1's two files, GPTFuzz's ``datasets/responses_labeled/`` beside its other CSVs, and SELECT's
results files. A source is read whole or named as missing or malformed in one line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from select_results_fixture import UNJOINABLE, write_results_release
from workbench.errors import ConfigError
from workbench.scoring.agreement import cohen_kappa
from workbench.scoring.outside import RELEASES, SOURCES, load_sources

V2_MODELS = ("gpt4", "llama2new", "llama2orig", "mistralguard", "mistralinstruct")
LABELS = ("1_full_compliance", "2_full_refusal", "3_partial_refusal")
COLUMNS = ["id", "type", "prompt", "completion", "annotation_1", "annotation_2", "agreement"]


def _completions(version: str, model: str, n: int, shared: int = 0) -> pd.DataFrame:
    """``n`` rows; the first ``shared`` answers are the same as v2's for that prompt."""
    rows = []
    for i in range(n):
        label = LABELS[i % 3]
        own = version if i >= shared else "v2"
        text = (
            f"({own}, {model}) Here is an answer to question {i},\nover two lines."
            if label == LABELS[0]
            else f"({own}, {model}) I'm sorry, I can't help with question {i}."
        )
        # as published: the second annotator differs now and then (every tenth answer here),
        # the first annotator's label the resolved one
        second = LABELS[(i + 1) % 3] if i % 10 == 9 else label
        rows.append(
            [f"{version}-{i + 1}", "homonyms", f"Question {i}?", text, label, second, i % 10 != 9]
        )
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["final_label"] = frame["annotation_1"]
    return frame


def write_xstest(root: Path, *, v1_in: str = "xstest_v1") -> Path:
    """XSTest v2 as cloned (completions, automated labels, prompts) and v1's two files."""
    clone = root / "xstest"
    for m in V2_MODELS:
        path = clone / "model_completions" / f"xstest_v2_completions_{m}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        _completions("v2", m, 450).to_csv(path, index=False)
        auto = clone / "evaluation" / "automated_evaluation_labels"
        auto.mkdir(parents=True, exist_ok=True)  # same pattern, not the human labels
        _completions("v2", m, 450).assign(final_label="1_full_compliance").to_csv(
            auto / f"xstest_v2_completions_{m}_gpteval.csv", index=False
        )
    pd.DataFrame({"id": [1], "prompt": ["Question 0?"]}).to_csv(
        clone / "xstest_prompts.csv", index=False
    )
    for m, v2_model in (("gpt4", "gpt4"), ("llama2", "llama2new")):
        path = root / v1_in / f"xstest_completions_{m}_v1.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        v1 = _completions("v1", v2_model, 200, shared=7)
        v1.to_csv(path, index=False)
    return root


def write_gptfuzz(root: Path) -> Path:
    """GPTFuzz as cloned: the two labelled files, a Chinese answer, other CSVs not to be read."""
    clone = root / "gptfuzz" / "datasets"
    labelled = clone / "responses_labeled"
    labelled.mkdir(parents=True)
    for name, n in (("train.csv", 6160), ("evaluate.csv", 1540)):  # the published sizes
        answers = [
            f"Step 1, gather the tools for {name} {i}.\n\nStep 2, carry on."
            if i % 2
            else f"I'm sorry, but I can't help with {name} {i}."
            for i in range(n)
        ]
        answers[0] = "你可以选择一些敏感的话题。"  # not English: dropped
        pd.DataFrame(
            {
                "question": [i % 7 for i in range(n)],
                "Response": answers,
                "label": [i % 2 for i in range(n)],
            }
        ).to_csv(labelled / name, index=False)
    (clone / "prompts").mkdir()
    pd.DataFrame({"id": [0], "text": ["a template"]}).to_csv(
        clone / "prompts" / "GPTFuzzer.csv", index=False
    )
    (clone / "questions").mkdir()
    pd.DataFrame({"index": [0], "text": ["a question"]}).to_csv(
        clone / "questions" / "train.csv",
        index=False,  # a train.csv that is not the labels
    )
    return root


def _select_answers(root: Path, files) -> set:
    """Distinct (model, question id, answer) of the readable results files (an id that joins
    no question has none: its answers count once per text)."""
    found = set()

    def walk(x, model):
        if isinstance(x, dict) and "refusal" in x:
            answer = x["response"]["answer"] if isinstance(x["response"], dict) else x["response"]
            qid = "" if x["id"] == UNJOINABLE else x["id"]
            found.add((model, qid, answer))
        elif isinstance(x, dict):
            for v in x.values():
                walk(v, model)

    for rel in files:
        walk(json.loads(gzip.decompress((root / rel).read_bytes())), Path(rel).parts[-3])
    return found


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    write_xstest(root)
    write_gptfuzz(root)
    release = write_results_release(root / "SELECT")
    return root, release


def test_every_source_reads_whole_with_its_labels_models_and_splits(sources):
    root, release = sources
    with pytest.warns(UserWarning, match=r"2 of \d+ SELECT results files .* unreadable"):
        frame = load_sources(root, SOURCES)
    n = frame.groupby("source").size()
    assert n["xstest"] == 5 * 450  # the automated labels are not read
    assert n["xstest_v1"] == 2 * (200 - 7)  # answers identical to v2's dropped
    assert n["gptfuzz"] == 6160 - 1 + 1540 - 1  # the Chinese answers dropped, other CSVs unread
    assert n["select"] == len(_select_answers(root / "SELECT", release["rows"]))
    assert set(frame[frame.source == "xstest"]["model"]) == {
        "GPT-4",
        "Llama-2-70b-chat",
        "Llama-2-70b-chat (system prompt)",
        "Mistral-7B-Instruct",
        "Mistral-7B-Instruct (guardrail prompt)",
    }
    xs = frame[frame.source == "xstest"]
    assert xs["label"].value_counts().to_dict() == {
        "compliance": 750,
        "refusal": 750,
        "partial": 750,
    }
    assert (xs["refusal"] == (xs["label"] != "compliance")).all()
    fuzz = frame[frame.source == "gptfuzz"]
    assert set(fuzz["label"]) == {"compliance", "refusal"}
    assert (fuzz[fuzz.label == "compliance"]["response"].str.startswith("Step 1")).all()
    assert set(frame["split"]) == {"dev", "test"}
    with pytest.warns(UserWarning, match="SELECT results files"):
        again = load_sources(root, tuple(reversed(SOURCES)), None)  # asked in another order
    pd.testing.assert_frame_equal(frame, again)


def test_each_annotators_own_label_is_kept_where_the_file_has_it(tmp_path):
    from workbench.scoring.probe.loso import annotator_kappa

    write_xstest(tmp_path)
    frame = load_sources(tmp_path, ("xstest", "xstest_v1"))
    xs = frame[frame.model == "GPT-4"]
    assert (xs["annotation_1"] == xs["label"]).all()
    differ = xs["annotation_2"] != xs["annotation_1"]
    assert (
        differ.sum() == 45 + 20 and (xs[differ]["response"].str.contains(r"question \d*9\b")).all()
    )
    truth = list(xs["label"] != "compliance")
    other = list(xs["annotation_2"] != "compliance")
    assert (
        annotator_kappa(xs) == pytest.approx(cohen_kappa(truth, other))
        and 0 < annotator_kappa(xs) < 1
    )
    # a copy without the annotators' columns loads as before, their labels empty
    _rewrite(lambda f: f.drop(columns=["annotation_1", "annotation_2"]))(
        tmp_path / "xstest" / "model_completions" / "xstest_v2_completions_gpt4.csv"
    )
    frame = load_sources(tmp_path, ("xstest",))
    gpt4 = frame[frame.model == "GPT-4"]
    assert len(gpt4) == 450 and gpt4["annotation_1"].isna().all()
    assert annotator_kappa(gpt4) != annotator_kappa(gpt4)  # NaN: nobody to compare
    assert frame[frame.model != "GPT-4"]["annotation_2"].notna().all()


@pytest.mark.filterwarnings("ignore:.*SELECT results files")
def test_only_the_sources_asked_for_are_read(sources):
    root, release = sources
    frame = load_sources(root, ("xstest_v1",))
    assert set(frame["source"]) == {"xstest_v1"} and len(frame) == 2 * 193
    frame = load_sources(root, ("select",), 1)
    readable = len(release["rows"])  # one answer per readable file, fewer when repeated
    assert 0 < len(frame) <= readable and frame["source"].eq("select").all()


def test_v1_files_may_sit_in_the_v2_clone(tmp_path):
    write_xstest(tmp_path, v1_in="xstest")
    assert len(load_sources(tmp_path, ("xstest", "xstest_v1"))) == 5 * 450 + 2 * 193


def _broken(tmp_path: Path, change) -> Path:
    write_xstest(tmp_path)
    change(tmp_path / "xstest" / "model_completions" / "xstest_v2_completions_gpt4.csv")
    return tmp_path


def _rewrite(edit):
    def change(path: Path) -> None:
        edit(pd.read_csv(path)).to_csv(path, index=False)

    return change


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (Path.unlink, "xstest under .* is missing xstest_v2_completions_gpt4.csv of its 5"),
        (_rewrite(lambda f: f.head(300)), r"gpt4.csv: 300 rows where the published file has 450"),
        (_rewrite(lambda f: f.drop(columns="final_label")), "gpt4.csv: no column 'final_label'"),
        (
            _rewrite(lambda f: f.assign(final_label=f.final_label.where(f.index != 4, "4_other"))),
            "gpt4.csv, row 5: final_label '4_other' is not one of",
        ),
        (
            _rewrite(lambda f: f.assign(final_label=f.final_label.where(f.index != 9))),
            "gpt4.csv, row 10: final_label nan is not one of",
        ),
        (lambda p: p.write_bytes(b'id,prompt\n1,"never closed\n'), "gpt4.csv: not a readable CSV"),
    ],
)
def test_a_partial_or_malformed_release_is_named_in_one_line(tmp_path, change, said):
    root = _broken(tmp_path, change)
    with pytest.raises(ConfigError, match=said) as e:
        load_sources(root, ("xstest",))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("source", ["xstest", "xstest_v1", "gptfuzz", "select"])
def test_a_source_not_downloaded_says_where_it_was_looked_for_and_how_to_get_it(tmp_path, source):
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(ConfigError, match=f"no {source} under {tmp_path}") as e:
        load_sources(tmp_path, (source,))
    assert "git " in str(e.value) and "\n" not in str(e.value)


def test_gptfuzz_files_copied_into_its_folder_are_found_and_counted(tmp_path):
    write_gptfuzz(tmp_path / "clone")
    (tmp_path / "gptfuzz").mkdir()
    for name in ("train.csv", "evaluate.csv"):
        data = (
            tmp_path / "clone" / "gptfuzz" / "datasets" / "responses_labeled" / name
        ).read_text()
        (tmp_path / "gptfuzz" / name).write_text(data)
    assert len(load_sources(tmp_path, ("gptfuzz",))) == 6160 - 1 + 1540 - 1
    _rewrite(lambda f: f.head(2000))(tmp_path / "gptfuzz" / "train.csv")  # cut at a row
    with pytest.raises(ConfigError, match="train.csv: 2000 rows where the published file has 6160"):
        load_sources(tmp_path, ("gptfuzz",))


def test_rows_with_more_fields_than_the_header_are_named_not_shifted(tmp_path):
    """pandas makes the first column the index when every row has one field more."""
    write_xstest(tmp_path)
    path = tmp_path / "xstest" / "model_completions" / "xstest_v2_completions_gpt4.csv"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + "\n".join(f"{line}," for line in lines[1:] if line) + "\n")
    with pytest.raises(ConfigError, match="gpt4.csv: its rows have more fields than its header"):
        load_sources(tmp_path, ("xstest",))


def test_gptfuzz_labels_must_be_zero_or_one(tmp_path):
    write_gptfuzz(tmp_path)
    path = tmp_path / "gptfuzz" / "datasets" / "responses_labeled" / "evaluate.csv"
    _rewrite(lambda f: f.assign(label=f.label.where(f.index != 2, 2)))(path)
    with pytest.raises(ConfigError, match="evaluate.csv, row 3: label 2 is not one of 0, 1"):
        load_sources(tmp_path, ("gptfuzz",))


def test_select_results_that_are_all_unreadable_are_an_error(tmp_path):
    path = tmp_path / "SELECT" / "results" / "expr.abstain.select" / "m" / "abstention"
    path.mkdir(parents=True)
    (path / "prompt-simple.json.gz").write_text("version https://git-lfs.github.com/spec/v1\n")
    with pytest.raises(ConfigError, match="1 of 1 SELECT results files .* are unreadable"):
        load_sources(tmp_path, ("select",))


def test_every_release_names_each_published_file_once():
    for rel in RELEASES.values():
        assert len(set(rel.files)) == len(rel.files) and set(rel.columns) >= {rel.label[0]}


def test_probe_training_names_a_missing_source_before_any_model_loads(
    tmp_path, monkeypatch, capsys
):
    import workbench.backends
    from workbench.cli import main

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(workbench.backends, "load_model", no_model)
    write_gptfuzz(tmp_path)  # XSTest, the default sources, not downloaded
    out = tmp_path / "head.json"
    assert main(["scoring", "probe", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: no xstest under {tmp_path}") and "\n" not in err, err
    assert not out.exists()


@pytest.mark.filterwarnings("ignore:.*SELECT results files")
def test_the_detectors_benchmark_reads_the_sources_and_names_what_is_missing(
    sources, tmp_path, monkeypatch, capsys
):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import detectors  # benchmarks/detectors.py
    from workbench.errors import run_command

    root, _ = sources
    table = tmp_path / "table.csv"
    assert run_command(detectors.main, [str(root), "--split", "all", "--csv", str(table)]) == 0
    per_model = pd.read_csv(table)
    assert {"xstest", "xstest_v1", "gptfuzz", "select"} <= set(per_model["source"])
    capsys.readouterr()
    assert run_command(detectors.main, [str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no xstest under") and "\n" not in err, err
    assert run_command(detectors.main, [str(root), "--select-per-file", "0"]) == 2
    assert "--select-per-file 0" in capsys.readouterr().err
