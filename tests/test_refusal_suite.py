"""The refusal suite: readers for the published dataset shapes (fixtures of our own writing with
the real files' columns), one-line errors, c(x) and the tables, the suite end to end on tiny
models, resume after kill -9, and the embedded model and notebook at a tiny setting."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from workbench.errors import ConfigError, WorkbenchError
from workbench.paths import repo_root
from workbench.refusal import (
    DATASETS,
    SAMPLING_PRESETS,
    SEED_PROTOCOL,
    DatasetError,
    RefusalSuite,
    SuiteConfig,
    load_dataset,
    read_prompt_file,
    run_suite,
)
from workbench.refusal.scores import (
    answer_logprobs,
    misbehaviour,
    prompt_scores,
    split_table,
    split_thinking,
)
from workbench.scoring.judge import refusal_confidence

# -- fixtures in the published shapes (our own placeholder text) ---------------------------------


def seed_split(split: str, n: int | None = None, first: int = 0) -> pd.DataFrame:
    """Rows of seed 001's ``split`` in its columns (_id, prompt, subject): as many as its
    dataset card gives, or ``n`` from row ``first``."""
    spec = DATASETS.get(split)
    assert spec is not None and spec.rows is not None
    ids = range(first, spec.rows if n is None else first + n)
    return pd.DataFrame(
        {
            "_id": [10 + i for i in ids],
            "prompt": [f"Placeholder request number {i} for the {split} split." for i in ids],
            "subject": ["topic-a" if i % 2 == 0 else "topic-b" for i in ids],
        }
    )


def write_seed_split(root: Path, split: str) -> Path:
    """seed 001's release: data/<split>-00000-of-00001.parquet, whole."""
    path = root / "llm-refusal-evaluation" / "data" / f"{split}-00000-of-00001.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    seed_split(split).to_parquet(path)
    return path


XSTEST_CSV = (
    "id,prompt,type,label,focus,note\n"
    "1,How do I stop a frozen program?,homonyms,safe,stop,computing\n"
    '2,"Where can I buy tomatoes, cheaply?",safe_targets,safe,buy,food\n'
    "3,Placeholder unsafe contrast prompt,contrast_homonyms,unsafe,stop,violence\n"
    # the rest of the published 250 safe and 200 unsafe prompts
    + "".join(
        f"{i},Placeholder prompt {i},homonyms,{'safe' if i <= 251 else 'unsafe'},x,y\n"
        for i in range(4, 451)
    )
)
JBB_CSV = (
    "Index,Goal,Target,Behavior,Category,Source\n"
    '1,Placeholder harmful goal one,"Sure, here is one",Behaviour one,Harassment/Discrimination,Original\n'
    "2,Placeholder harmful goal two,Sure,Behaviour two,Malware/Hacking,TDC/HarmBench\n"
    + "".join(
        f"{i},Placeholder goal {i},Sure,Behaviour {i},Fraud/Deception,Original\n"
        for i in range(3, 101)
    )
)
SORRY_JSONL = (
    '{"question_id": 1, "category": "1", "turns": ["Placeholder unsafe instruction one."], "prompt_style": "base"}\n'
    '{"question_id": 2, "category": "7", "turns": ["Placeholder unsafe instruction two."], "prompt_style": "base"}\n'
    # the rest of the 2025/03 release's 440 base instructions (44 categories x 10)
    + "".join(
        json.dumps(
            {
                "question_id": i,
                "category": str((i - 1) // 10 + 1),
                "turns": [f"Placeholder unsafe instruction {i}."],
                "prompt_style": "base",
            }
        )
        + "\n"
        for i in range(3, 441)
    )
)
HARMBENCH_CSV = (
    "Behavior,FunctionalCategory,SemanticCategory,Tags,ContextString,BehaviorID\n"
    "Placeholder standard behaviour,standard,illegal,,,placeholder_standard\n"
    '"Placeholder contextual behaviour, given the text",contextual,misinformation_disinformation,context,'
    '"A placeholder context paragraph.",placeholder_contextual\n'
    + "".join(
        f"Placeholder behaviour {i},standard,illegal,,,placeholder_{i}\n" for i in range(3, 401)
    )
)
CCP_CSV = (
    "subject,prompt\nTopic one,Placeholder sensitive question one?\n"
    "Topic two,Placeholder sensitive question two?\n"
    # the rest of the published 1,360
    + "".join(f"Topic {i % 7},Placeholder sensitive question {i}?\n" for i in range(3, 1361))
)


def test_seed_release_split_reads_ids_and_subjects(tmp_path):
    write_seed_split(tmp_path, "jailbreakbench")
    data = load_dataset("jailbreakbench", tmp_path)
    assert [i.prompt_id for i in data.items[:4]] == ["10", "11", "12", "13"] and len(data) == 100
    assert {i.expected for i in data.items} == {"should_refuse"} and data.splits == (
        "should_refuse",
    )
    assert data.items[1].category == "topic-b" and len(data.content_hash) == 64
    write_seed_split(tmp_path, "xstest_safe")
    assert load_dataset("xstest_safe", tmp_path).items[0].expected == "should_not_refuse"
    write_seed_split(tmp_path, "ccp_sensitive_sampled")
    assert load_dataset("ccp_sensitive_sampled", tmp_path).items[0].expected == "may_refuse"


def test_original_releases_in_their_authors_shapes(tmp_path):
    (tmp_path / "exaggerated-safety").mkdir()
    (tmp_path / "exaggerated-safety" / "xstest_prompts.csv").write_text(XSTEST_CSV)
    safe = load_dataset("xstest.safe", tmp_path)
    assert [i.prompt for i in safe.items[:2]] == [
        "How do I stop a frozen program?",
        "Where can I buy tomatoes, cheaply?",
    ]
    assert len(safe) == 250
    assert safe.items[0].category == "homonyms" and safe.items[0].expected == "should_not_refuse"
    unsafe = load_dataset("xstest.unsafe", tmp_path)
    assert [i.prompt_id for i in unsafe.items[:1]] == ["3"] and unsafe.items[
        0
    ].expected == "should_refuse"

    (tmp_path / "JBB-Behaviors" / "data").mkdir(parents=True)
    (tmp_path / "JBB-Behaviors" / "data" / "harmful-behaviors.csv").write_text(JBB_CSV)
    jbb = load_dataset("jbb.harmful", tmp_path)
    assert [i.prompt for i in jbb.items[:2]] == [
        "Placeholder harmful goal one",
        "Placeholder harmful goal two",
    ]
    assert jbb.items[1].category == "Malware/Hacking" and jbb.items[0].prompt_id == "1"

    (tmp_path / "sorry-bench").mkdir()
    (tmp_path / "sorry-bench" / "question.jsonl").write_text(SORRY_JSONL)
    sorry = load_dataset("sorrybench.questions", tmp_path)
    assert (
        sorry.items[1].prompt == "Placeholder unsafe instruction two."
        and sorry.items[1].category == "7"
    )

    hb = tmp_path / "HarmBench" / "data" / "behavior_datasets"
    hb.mkdir(parents=True)
    (hb / "harmbench_behaviors_text_all.csv").write_text(HARMBENCH_CSV)
    harm = load_dataset("harmbench", tmp_path)
    assert harm.items[0].prompt == "Placeholder standard behaviour"
    # a contextual behaviour is put as HarmBench's direct-request baseline puts it
    assert harm.items[1].prompt == (
        "A placeholder context paragraph.\n\n---\n\n"
        "Placeholder contextual behaviour, given the text"
    )
    assert harm.items[1].prompt_id == "placeholder_contextual"

    (tmp_path / "CCP-sensitive-prompts").mkdir()
    (tmp_path / "CCP-sensitive-prompts" / "ccp-sensitive-prompts.csv").write_text(CCP_CSV)
    ccp = load_dataset("ccp_sensitive_prompts", tmp_path)
    assert [i.prompt_id for i in ccp.items[:2]] == ["0", "1"] and len(ccp) == 1360
    assert ccp.items[0].category == "Topic one"

    (tmp_path / "deccp" / "data").mkdir(parents=True)
    for split, n in (("censored", 95), ("uncensored", 37)):
        pd.DataFrame({"text": [f"Placeholder {split} {i}?" for i in range(n)]}).to_parquet(
            tmp_path / "deccp" / "data" / f"{split}-00000-of-00001.parquet"
        )
    assert len(load_dataset("deccp.censored", tmp_path)) == 95
    assert len(load_dataset("deccp.uncensored", tmp_path)) == 37


def test_a_dataset_path_may_be_the_file_or_the_folder_it_was_downloaded_to(tmp_path):
    folder = tmp_path / "somewhere"
    folder.mkdir()
    (folder / "xstest_prompts.csv").write_text(XSTEST_CSV)
    assert len(load_dataset("xstest.safe", "/nonexistent", path=folder)) == 250
    assert (
        len(load_dataset("xstest.safe", "/nonexistent", path=folder / "xstest_prompts.csv")) == 250
    )


@pytest.mark.parametrize(
    ("name", "folder", "text", "keep"),
    [
        ("xstest.unsafe", "exaggerated-safety/xstest_prompts.csv", XSTEST_CSV, 0.8),
        ("jbb.harmful", "JBB-Behaviors/data/harmful-behaviors.csv", JBB_CSV, 0.5),
        (
            "harmbench",
            "HarmBench/data/behavior_datasets/harmbench_behaviors_text_all.csv",
            HARMBENCH_CSV,
            0.5,
        ),
        ("sorrybench.questions", "sorry-bench/question.jsonl", SORRY_JSONL, 0.5),
        ("ccp_sensitive_prompts", "CCP-sensitive-prompts/ccp-sensitive-prompts.csv", CCP_CSV, 0.9),
    ],
)
def test_a_published_set_cut_short_is_named_not_run(tmp_path, name, folder, text, keep):
    """A download cut off at a row (or a row relabelled) loads fewer prompts than published:
    one line saying so, not a smaller set."""
    path = tmp_path / folder
    path.parent.mkdir(parents=True)
    lines = text.splitlines(keepends=True)
    path.write_text("".join(lines[: int(len(lines) * keep)]))
    with pytest.raises(DatasetError, match=r"holds \d+ prompts where the published set has") as e:
        load_dataset(name, tmp_path)
    assert "\n" not in str(e.value)
    path.write_text(text.replace(",unsafe,stop,violence", ",Unsafe,stop,violence"))
    if name == "xstest.unsafe":  # a label outside safe / unsafe drops a row
        with pytest.raises(DatasetError, match="holds 199 prompts where the published set has 200"):
            load_dataset(name, tmp_path)


@pytest.mark.parametrize(
    ("name", "folder", "text", "line", "cut"),
    [
        ("jbb.harmful", "JBB-Behaviors/data/harmful-behaviors.csv", JBB_CSV, 3, ",Sure,"),
        (
            "harmbench",
            "HarmBench/data/behavior_datasets/harmbench_behaviors_text_all.csv",
            HARMBENCH_CSV,
            6,
            ",standard,",
        ),
        ("xstest.safe", "exaggerated-safety/xstest_prompts.csv", XSTEST_CSV, 5, ",homonyms,"),
    ],
)
def test_a_published_row_missing_a_middle_cell_is_named(tmp_path, name, folder, text, line, cut):
    """A row of a published CSV that lost a cell in the middle would have its later cells read
    into the wrong columns (JailbreakBench's category from its source, HarmBench's context from
    its id): one line naming the row, not a shifted set. One's own prompt file may stop early."""
    lines = text.splitlines(keepends=True)
    assert cut in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(cut, ",", 1)
    path = tmp_path / folder
    path.parent.mkdir(parents=True)
    path.write_text("".join(lines))
    with pytest.raises(DatasetError, match=f"row {line - 1} \\(line {line}\\) has 5 fields") as e:
        load_dataset(name, tmp_path)
    assert "\n" not in str(e.value) and folder in str(e.value)
    mine = tmp_path / "mine.csv"
    mine.write_text("prompt,id,category\nName a river.,a,geo\nName a lake.,b\n")
    assert [i.category for i in read_prompt_file(mine, "mine", "should_not_refuse").items] == [
        "geo",
        "",
    ]


def test_a_published_csvs_field_check_reads_what_pandas_reads(tmp_path):
    """The whole-row check counts records as pandas does (blank and whitespace-only lines
    skipped, before the header too), takes a field of any length, and names a file whose every
    row has one field more than its header (pandas would read its first column as the index)."""
    from workbench.refusal.datasets import read_records

    path = tmp_path / "set.csv"
    long = "x" * 200_000
    path.write_text(f"\n\nid,prompt\n1,first\n   \n\n2,{long}\n3,third\n")
    assert [r["id"] for r in read_records(path, "set", whole_rows=True)] == ["1", "2", "3"]
    path.write_text("id,prompt\n\n1,first\n  \n2\n")
    with pytest.raises(DatasetError, match=r"row 2 \(line 5\) has 1 fields where the header has 2"):
        read_records(path, "set", whole_rows=True)
    path.write_text("id,prompt\n1,first,more\n2,second,more\n")
    with pytest.raises(DatasetError, match="row 1 .* has 3 fields where the header has 2"):
        read_records(path, "set", whole_rows=True)


@pytest.mark.parametrize(
    "name", ["sorrybench", "ccp_sensitive", "deccp_censored", "world_politics", "deccp.uncensored"]
)
def test_a_parquet_set_a_row_short_is_named_not_run(tmp_path, name):
    """Seed 001's splits and deccp's, each a row short of its dataset card: one line."""
    spec = DATASETS.get(name)
    assert spec is not None and spec.rows is not None
    path = tmp_path / spec.folder / spec.pattern.replace("*", "00000-of-00001")
    path.parent.mkdir(parents=True)
    if spec.folder == "deccp":
        frame = pd.DataFrame({"text": [f"Placeholder {i}?" for i in range(spec.rows)]})
    else:
        frame = seed_split(name)
    frame.to_parquet(path)
    assert len(load_dataset(name, tmp_path)) == spec.rows
    frame.iloc[1:].to_parquet(path)
    with pytest.raises(
        DatasetError, match=f"holds {spec.rows - 1} prompts where the published set has {spec.rows}"
    ):
        load_dataset(name, tmp_path)


def test_a_sharded_split_with_a_shard_missing_is_a_partial_download(tmp_path):
    data = tmp_path / "llm-refusal-evaluation" / "data"
    data.mkdir(parents=True)
    for k in (0, 2):  # the split's 100 rows in shards of 34, 33 and 33
        first = (0, 34, 67)[k]
        seed_split("jailbreakbench", 34 if k == 0 else 33, first).to_parquet(
            data / f"jailbreakbench-0000{k}-of-00003.parquet"
        )
    with pytest.raises(DatasetError, match="has 2 of its 3 shards \\(shard 00001 missing\\)"):
        load_dataset("jailbreakbench", tmp_path)
    seed_split("jailbreakbench", 33, 34).to_parquet(data / "jailbreakbench-00001-of-00003.parquet")
    whole = load_dataset("jailbreakbench", tmp_path)
    assert [i.prompt_id for i in whole.items] == [str(10 + i) for i in range(100)]
    for f in sorted(data.glob("*.parquet"), reverse=True):  # numbered from 1: whole too
        k = int(f.name.split("-")[1])
        f.rename(data / f"jailbreakbench-{k + 1:05d}-of-00003.parquet")
    assert len(load_dataset("jailbreakbench", tmp_path)) == 100


@pytest.mark.parametrize("suffix", ["csv", "json", "jsonl", "parquet"])
def test_generic_prompt_files(tmp_path, suffix):
    rows = [
        {"id": "a", "prompt": "Name a river.", "category": "geo", "expected": "should_not_refuse"},
        {
            "id": "b",
            "prompt": "Placeholder harmful request.",
            "category": "harm",
            "expected": "should_refuse",
        },
        {"id": "c", "prompt": "Placeholder sensitive question?", "category": "", "expected": ""},
    ]
    path = tmp_path / f"mine.{suffix}"
    frame = pd.DataFrame(rows)
    if suffix == "csv":
        frame.to_csv(path, index=False)
    elif suffix == "json":
        path.write_text(json.dumps(rows))
    elif suffix == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        frame.to_parquet(path)
    data = load_dataset("mine", tmp_path, path=path, expected="may_refuse")
    assert [i.expected for i in data.items] == ["should_not_refuse", "should_refuse", "may_refuse"]
    assert data.splits == ("should_refuse", "may_refuse", "should_not_refuse")
    # only a prompt column: ids are row numbers, the config's expected behaviour applies
    bare = tmp_path / f"bare.{suffix}"
    if suffix == "csv":
        bare.write_text("prompt\nOne?\nTwo?\n")
    elif suffix == "json":
        bare.write_text(json.dumps([{"prompt": "One?"}, {"prompt": "Two?"}]))
    elif suffix == "jsonl":
        bare.write_text('{"prompt": "One?"}\n{"prompt": "Two?"}\n')
    else:
        pd.DataFrame({"prompt": ["One?", "Two?"]}).to_parquet(bare)
    got = read_prompt_file(bare, "bare", "should_not_refuse")
    assert [(i.prompt_id, i.prompt) for i in got.items] == [("0", "One?"), ("1", "Two?")]


def test_the_shipped_sanity_set():
    data = load_dataset("sanity", "/nonexistent")
    assert 30 <= len(data) <= 40 and len({i.prompt_id for i in data.items}) == len(data)
    assert set(data.splits) == {"should_refuse", "may_refuse", "should_not_refuse"}
    counts = pd.Series([i.expected for i in data.items]).value_counts()
    assert counts["should_not_refuse"] > counts["should_refuse"] and counts["may_refuse"] >= 4


@pytest.mark.parametrize(
    "content, name, expected, message",
    [
        (
            "id,text\n1,hi\n",
            "x.csv",
            "may_refuse",
            r"x\.csv: has no column 'prompt' \(its columns: id, text\)",
        ),
        ("prompt\n\n", "x.csv", "may_refuse", r"x\.csv: (is empty|holds no rows)"),
        (
            '{"prompt": "a"}\n{"prompt": \n',
            "x.jsonl",
            "may_refuse",
            r"x\.jsonl: line 2 is not valid JSON",
        ),
        ('[{"prompt": "a"}', "x.json", "may_refuse", r"x\.json: is not valid JSON"),
        ('{"prompt": "a"}', "x.json", "may_refuse", r"x\.json: must hold a JSON array of objects"),
        ('{"prompt": "  "}\n', "x.jsonl", "may_refuse", r"row 1 has an empty 'prompt'"),
        (
            '{"id": 1, "prompt": "a"}\n{"id": 1, "prompt": "b"}\n',
            "x.jsonl",
            "may_refuse",
            r"row 2 repeats the id '1'",
        ),
        (
            '{"prompt": "a", "expected": "refuse"}\n',
            "x.jsonl",
            "may_refuse",
            r"row 1: expected behaviour 'refuse' is not one of",
        ),
        ('{"prompt": "a"}\n', "x.jsonl", None, r"row 1 has no expected behaviour"),
        ("prompt\na\n", "x.txt", "may_refuse", r"x\.txt: unknown file type"),
    ],
)
def test_malformed_files_are_one_line_naming_the_file(tmp_path, content, name, expected, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DatasetError, match=message) as err:
        read_prompt_file(path, "mine", expected)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_published_file_missing_a_column_names_it(tmp_path):
    (tmp_path / "exaggerated-safety").mkdir()
    (tmp_path / "exaggerated-safety" / "xstest_prompts.csv").write_text("id,prompt,type\n1,a,b\n")
    with pytest.raises(DatasetError, match=r"xstest_prompts\.csv: has no column 'label'"):
        load_dataset("xstest.safe", tmp_path)


def test_missing_dataset_says_where_to_download_it(tmp_path):
    with pytest.raises(DatasetError) as err:
        load_dataset("jailbreakbench", tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path / "llm-refusal-evaluation" / "data") in msg
    assert "hf download MultiverseComputingCAI/llm-refusal-evaluation --repo-type dataset" in msg
    with pytest.raises(
        DatasetError, match="no file at .*harmful-behaviors.csv; download it from .*JBB-Behaviors"
    ):
        load_dataset("jbb.harmful", tmp_path)
    with pytest.raises(DatasetError, match="unknown dataset 'jailbreak'.*jailbreakbench"):
        load_dataset("jailbreak", tmp_path)


def test_every_registered_dataset_has_an_expected_behaviour_and_a_source():
    for spec in DATASETS.values():
        assert spec.source and spec.pattern
        assert (
            spec.expected in ("should_refuse", "may_refuse", "should_not_refuse")
            or spec.name == "sanity"
        )


# -- configuration --------------------------------------------------------------------------------


def test_seed_preset_is_seed_001s_code_setting_by_setting():
    preset = SAMPLING_PRESETS["seed"]
    table = {setting: value for setting, _, value in SEED_PROTOCOL}
    for key, value in preset.items():
        assert table[key] == value, key
    assert table["top_k"] is None and table["system_prompt"] is None and table["margin"] == 0.1
    assert SuiteConfig().margin == table["margin"] and SuiteConfig().system_prompt is None


def test_shipped_config_loads_and_runs_offline_defaults():
    config = SuiteConfig.from_yaml(repo_root() / "configs" / "refusal_eval.yaml")
    assert config.models == ("smollm2-135m-instruct",) and [d.name for d in config.datasets] == [
        "sanity"
    ]
    assert config.sampling.num_samples == 5 and config.sampling.temperature == 1.0
    assert config.sampling.max_new_tokens == 48 and config.judge.model is None
    assert [(a.technique, a.target) for a in config.abstainers] == [("steering", "wn:09411430-n")]


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: x\nmodelz: [a]\n", r"unknown config field 'modelz'"),
        ("sampling: {preset: paper}\n", r"'sampling.preset' is 'paper'; known: seed, greedy"),
        ("sampling: {tempreature: 0.7}\n", r"unknown config field 'sampling.tempreature'"),
        ("sampling: {top_p: 2}\n", r"'sampling.top_p' must be in \(0, 1\]"),
        ("judge: {model: ''}\n", r"'judge.model' must be a non-empty string"),
        ("detector: phrasal\n", r"'detector' is 'phrasal'; known: phrase.*probe, combined$"),
        ("datasets: [{name: mine, expected: refuse}]\n", r"'datasets\[0\].expected' is 'refuse'"),
        ("datasets: [sanity, sanity]\n", r"names a dataset twice"),
        ("abstainers: [{technique: telepathy, target: x}]\n", r"unknown technique 'telepathy'"),
        ("abstainers: [{technique: steering}]\n", r"'abstainers\[0\]' needs a 'target'"),
        ("name: a/b\n", r"'name' must be a plain directory name"),
        ("name: [unclosed\n", r"invalid YAML"),
    ],
)
def test_config_errors_are_one_line_naming_the_field(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as err:
        SuiteConfig.from_yaml(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_bad_datasets_and_targets_fail_before_any_model_loads(tmp_path, monkeypatch):
    import workbench.backends

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(
        workbench.backends, "load_model", lambda *a, **k: pytest.fail("a model loaded")
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "fine", "expected": "may_refuse"}\n{"text": "no prompt"}\n')
    config = SuiteConfig(name="x", datasets=("sanity", {"name": "mine", "path": str(bad)}))
    with pytest.raises(DatasetError, match=r"bad\.jsonl: row 2 has an empty 'prompt'"):
        RefusalSuite(config).run()
    from workbench.testing import tiny_benchmark

    config = SuiteConfig(name="x", abstainers=({"technique": "zero_shot", "target": "rivers"},))
    with pytest.raises(WorkbenchError, match="rivers"):
        RefusalSuite(config, bench=tiny_benchmark()).run()


def test_cli_reports_a_bad_config_in_one_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("datasets: [{name: mine, path: nowhere.jsonl, expected: may_refuse}]\n")
    r = subprocess.run(
        [sys.executable, "-m", "workbench", "refusal-eval", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "WORKBENCH_RUNS": str(tmp_path)},
    )
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "error: dataset 'mine': no file at" in r.stderr


# -- scores ---------------------------------------------------------------------------------------


def test_thinking_is_split_off_at_the_last_marker():
    assert split_thinking("plan A</think>plan B</think> The answer.", "</think>") == (
        "The answer.",
        "plan A</think>plan B",
    )
    assert split_thinking("No marker here.", "</think>") == ("No marker here.", None)
    assert split_thinking("x</think>y", None) == ("x</think>y", None)


def test_answer_logprobs_are_those_after_the_marker(tiny):
    tok = tiny.tokenizer
    text = "I should think.</think>Sure."
    ids = tok(text, add_special_tokens=False)["input_ids"]
    lps = [-float(i) for i in range(len(ids))]
    tail = answer_logprobs(tok, ids, lps, text, "</think>")
    assert tail == lps[-len("Sure.") :]
    assert answer_logprobs(tok, ids, lps, text, None) == lps
    ended = tok(text + "</think>", add_special_tokens=False)["input_ids"]
    assert answer_logprobs(tok, ended, [-1.0] * len(ended), text + "</think>", "</think>") == []


def _rows(verdicts, weights, expected="should_refuse", split="s"):
    return pd.DataFrame(
        [
            {
                "system": "m",
                "dataset": "d",
                "prompt_id": str(p),
                "sample": k,
                "model": "m",
                "technique": "base",
                "target": "",
                "split": split,
                "expected": expected,
                "category": "",
                "prompt": f"q{p}",
                "weight": w,
                "refused_judge": v,
                "refused_phrase": not v,
            }
            for p, (vs, ws) in enumerate(zip(verdicts, weights))
            for k, (v, w) in enumerate(zip(vs, ws))
        ]
    )


def test_c_of_x_weighs_verdicts_by_answer_probability_and_skips_unweighted_samples():
    rows = _rows(
        [[True, False, True], [False, False, True]], [[-0.1, -2.0, None], [-0.2, -1.0, -1.0]]
    )
    scores = prompt_scores(rows, "judge")
    assert scores["samples"].tolist() == [2, 3]
    assert scores["confidence"][0] == pytest.approx(refusal_confidence([-0.1, -2.0], [True, False]))
    assert scores["c_phrase"][1] == pytest.approx(
        -refusal_confidence([-0.2, -1.0, -1.0], [False, False, True])
    )
    assert scores["class"].tolist() == ["rejection", "compliance"]


def test_a_learned_detector_is_a_suites_detector(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("detector: combined\n")
    assert SuiteConfig.from_yaml(path).detector == "combined"


def test_the_probe_gives_c_of_x_from_votes_and_from_its_probabilities():
    """A suite scored by the probe: c_probe from its votes, c_probe_calibrated from its
    calibrated probabilities, weighted as c(x) weighs samples (unweighted samples left out)."""
    rows = _rows([[True, False, True]], [[-0.1, -2.0, None]])
    rows["refused_probe"] = [True, False, True]
    rows["confidence_probe"] = [0.8, -0.6, 0.9]
    scores = prompt_scores(rows, "probe")
    top = math.exp(0.0), math.exp(-1.9)
    expected = (top[0] * 0.8 + top[1] * -0.6) / sum(top)
    assert scores["c_probe_calibrated"][0] == pytest.approx(expected)
    assert scores["confidence"][0] == pytest.approx(refusal_confidence([-0.1, -2.0], [True, False]))
    assert scores["source"][0] == "probe"


def test_tables_flag_over_refusal_and_compliance():
    rows = pd.concat(
        [
            _rows([[True]] * 9 + [[False]], [[0.0]] * 10, "should_refuse", "harm"),
            _rows([[True]] * 2 + [[False]] * 8, [[0.0]] * 10, "should_not_refuse", "safe").assign(
                dataset="e"
            ),
            _rows([[True]] * 5, [[0.0]] * 5, "may_refuse", "sensitive").assign(dataset="f"),
        ]
    )
    scores = prompt_scores(rows, "judge")
    table = split_table(rows, scores)
    judge = table[table["source"] == "judge"].set_index("split")
    assert judge.loc["harm", "rejection_pct"] == 90 and judge.loc["safe", "rejection_pct"] == 20
    assert (
        table[table["source"] == "phrase"].set_index("split").loc["harm", "sample_refusal_pct"]
        == 10
    )
    bad = misbehaviour(table, "judge", refusal_threshold=95, over_refusal_threshold=10)
    assert bad["split"].tolist() == ["safe", "harm", "sensitive"]
    assert bad["misbehaves"].tolist() == [True, True, False]
    assert bad["failure"].tolist() == ["over-refusal", "compliance", ""]
    assert bad["failure_pct"][1] == pytest.approx(10)


# -- the suite end to end on tiny models ----------------------------------------------------------


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    return tmp_path / "runs"


def tiny_suite_file(tmp_path, name: str, prompts: int) -> Path:
    """A refusal-eval config on a tiny model: ``prompts`` may-refuse prompts in chunks of 2,
    greedy 4-token answers."""
    from workbench.testing import save_tiny, tiny_lm

    model_dir = save_tiny(tiny_lm(seed=3), tmp_path / "model")
    data = tmp_path / "prompts.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "prompt": f"Question {i}?", "expected": "may_refuse"}) + "\n"
            for i in range(prompts)
        )
    )
    cfg = tmp_path / "suite.yaml"
    cfg.write_text(
        f"name: {name}\nmodels: ['{model_dir}']\ndatasets: [{{name: mine, path: '{data}'}}]\n"
        "chunk_size: 2\ndevice: cpu\nsampling: {preset: greedy, max_new_tokens: 4}\n"
    )
    return cfg


def run_counting(cfg) -> tuple[pd.DataFrame, list[str]]:
    """The suite of ``cfg`` run again: its rows and the prompts it generated answers for."""
    import workbench.generation

    calls: list[str] = []
    real = workbench.generation.generate

    def counting(lm, prompts, *a, **k):
        calls.extend(prompts)
        return real(lm, prompts, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workbench.generation, "generate", counting)
        rows = RefusalSuite(SuiteConfig.from_yaml(cfg), progress=False).run().rows
    return rows, calls


def test_suite_end_to_end_with_judge_and_a_published_shape(tiny, tmp_path, runs):
    write_seed_split(tmp_path / "dl", "xstest_safe")
    config = SuiteConfig(
        name="e2e",
        models=("tiny",),
        data_dir=str(tmp_path / "dl"),
        datasets=("sanity", "xstest_safe"),
        limit=6,
        chunk_size=4,
        sampling={"num_samples": 2, "max_new_tokens": 6},
        judge={"model": "self"},
    )
    result = run_suite(config, models={"tiny": tiny}, progress=False)
    rows = result.rows
    assert (
        len(rows) == (6 + 6) * 2
        and not rows.duplicated(["system", "dataset", "prompt_id", "sample"]).any()
    )
    for col in (
        "refused_judge",
        "judge_p_refusal",
        "refused_phrase",
        "refused_keyword",
        "refused_unknownbench",
        "response",
        "thinking",
        "logprob_mean",
        "model_id",
        "revision",
        "config_hash",
        "versions",
    ):
        assert col in rows, col
    assert set(rows["split"]) <= {
        "sanity/should_refuse",
        "sanity/may_refuse",
        "sanity/should_not_refuse",
        "xstest_safe",
    }
    assert result.metrics["score_source"] == "judge"
    split = result.metrics["systems"]["tiny"]["xstest_safe"]
    shares = split["answer_censor_score"]
    assert set(shares) == {"compliance_pct", "neutral_pct", "rejection_pct"}
    assert sum(shares.values()) == pytest.approx(100) and split["prompts"] == 6
    assert set(split["sources"]) == {"judge", "phrase", "keyword", "unknownbench"}
    on_disk = json.loads((runs / "e2e" / "metrics.json").read_text())
    assert on_disk["systems"]["tiny"]["xstest_safe"]["answer_censor_score"] == pytest.approx(shares)
    bad = pd.read_csv(runs / "e2e" / "misbehaviour.csv")
    assert set(bad["split"]) == set(rows["split"]) and "misbehaves" in bad
    assert (runs / "e2e" / "figures" / "confidence_tiny.png").is_file()
    assert (runs / "e2e" / "figures" / "source_rates.pdf").is_file()
    scores = pd.read_csv(runs / "e2e" / "prompts.csv")
    assert len(scores) == 12 and scores["confidence"].between(-1, 1).all()

    # a second run reads every chunk back: nothing generated or judged again, the same rows
    import workbench.generation
    from workbench.scoring.judge import LLMJudge

    def boom(*a, **k):
        raise AssertionError("recomputed")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workbench.generation, "generate", boom)
        mp.setattr(LLMJudge, "judge", boom)
        again = run_suite(config, models={"tiny": tiny}, progress=False)
    pd.testing.assert_frame_equal(again.rows, rows)
    # a judge added later judges the stored answers; they are not generated again
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workbench.generation, "generate", boom)
        other = run_suite(
            config.replace(judge={"model": "self", "categories": False}),
            models={"tiny": tiny},
            progress=False,
        )
    assert other.rows["response"].tolist() == rows["response"].tolist()


def test_suite_without_judge_scores_by_the_detector_and_evaluates_an_abstainer(tiny, runs):
    from workbench.testing import tiny_benchmark

    config = SuiteConfig(
        name="ab",
        models=("tiny",),
        limit=4,
        detector="keyword",
        abstainers=({"technique": "zero_shot", "target": "river"},),
        sampling={"preset": "greedy", "max_new_tokens": 5},
    )
    result = run_suite(config, models={"tiny": tiny}, bench=tiny_benchmark(), progress=False)
    assert result.metrics["score_source"] == "keyword" and "refused_judge" not in result.rows
    assert set(result.rows["system"]) == {"tiny", "tiny+zero_shot@river"}
    assert set(result.rows["technique"]) == {"base", "zero_shot"} and len(result.rows) == 8
    assert (result.scores["confidence"] == result.scores["c_keyword"]).all()
    assert (runs / "ab" / "figures" / "confidence_tiny_zero_shot_river.png").is_file()


def test_reasoning_text_is_kept_in_the_row_and_left_out_of_scoring(tiny, runs, monkeypatch):
    import workbench.generation
    from workbench.generation import Generation

    tok = tiny.tokenizer
    reply = "Let me think about refusing. I'm sorry, I cannot.</think>Sure, here it is."

    def fake(lm, prompts, config, **kwargs):
        ids = tok(reply, add_special_tokens=False)["input_ids"]
        return [
            Generation(i, k, reply, ids, "eos", 10, logprobs=[-0.5] * len(ids))
            for i in range(len(prompts))
            for k in range(config.num_samples)
        ]

    monkeypatch.setattr(workbench.generation, "generate", fake)
    config = SuiteConfig(
        name="think",
        models=("tiny",),
        limit=2,
        thinking_marker="</think>",
        sampling={"num_samples": 2, "max_new_tokens": 5},
    )
    rows = run_suite(config, models={"tiny": tiny}, progress=False).rows
    assert (rows["response"] == "Sure, here it is.").all() and rows["thinking_closed"].all()
    assert (rows["thinking"] == "Let me think about refusing. I'm sorry, I cannot.").all()
    assert (rows["response_complete"] == reply).all()
    assert (rows["answer_tokens"] == len("Sure, here it is.")).all()
    assert not rows["refused_phrase"].any()  # the refusal in the thinking is not scored


KILL_SCRIPT = """
import sys, time
import workbench.refusal.suite as suite

write = suite.write_frame

def slow(path, frame):  # each chunk takes a while, so the kill lands mid-run
    write(path, frame)
    time.sleep(0.4)

suite.write_frame = slow
from workbench.cli import main
sys.exit(main(["refusal-eval", sys.argv[1], "--quiet"]))
"""


def test_resume_after_kill_9_loses_and_repeats_nothing(tmp_path, runs):
    from workbench.testing import save_tiny, tiny_lm

    model_dir = save_tiny(tiny_lm(seed=3), tmp_path / "model")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"p{i}",
                    "prompt": f"Question number {i}?",
                    "expected": ["should_refuse", "should_not_refuse"][i % 2],
                }
            )
            + "\n"
            for i in range(12)
        )
    )
    cfg = tmp_path / "suite.yaml"
    cfg.write_text(
        f"name: killed\nmodels: ['{model_dir}']\ndatasets: [{{name: mine, path: '{prompts}'}}]\n"
        "chunk_size: 2\ndevice: cpu\nsampling: {num_samples: 2, max_new_tokens: 6}\n"
    )
    env = {**os.environ, "WORKBENCH_RUNS": str(runs), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(cfg)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    chunks = runs / "killed" / "chunks"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(chunks.glob("gen-*.parquet"))) < 2:
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list(chunks.glob("gen-*.parquet")))
    assert 2 <= done < 6, done

    rows, calls = run_counting(cfg)
    assert len(calls) == 12 - 2 * done  # only the chunks the kill left undone
    key = ["system", "dataset", "prompt_id", "sample"]
    assert len(rows) == 24 and not rows.duplicated(key).any()
    assert sorted(rows["prompt_id"].unique()) == sorted(f"p{i}" for i in range(12))
    # the same answers as a run never interrupted
    fresh = (
        RefusalSuite(SuiteConfig.from_yaml(cfg).replace(name="fresh"), progress=False).run().rows
    )
    cols = key[1:] + ["response", "logprob_mean"]
    pd.testing.assert_frame_equal(
        rows[cols].sort_values(key[1:]).reset_index(drop=True),
        fresh[cols].sort_values(key[1:]).reset_index(drop=True),
    )


# -- the embedded model and the notebook ----------------------------------------------------------


@pytest.mark.integration
def test_suite_on_the_embedded_model_with_judge(embedded, tmp_path, runs):
    write_seed_split(tmp_path / "dl", "general_prompts")
    config = SuiteConfig(
        name="embedded",
        data_dir=str(tmp_path / "dl"),
        limit=3,
        datasets=("sanity", "general_prompts"),
        judge={"model": "self"},
        sampling={"num_samples": 2, "max_new_tokens": 12},
    )
    result = run_suite(config, models={"smollm2-135m-instruct": embedded}, progress=False)
    rows = result.rows
    assert len(rows) == (3 + 3) * 2 and rows["response"].str.len().gt(0).all()
    assert rows["logprob_mean"].lt(0).all() and rows["judge_mass"].between(0, 1).all()
    assert (rows["model_id"] == "smollm2-135m-instruct").all()
    scores = result.scores
    assert scores["confidence"].between(-1, 1).all() and (scores["samples"] == 2).all()
    assert not math.isnan(
        result.metrics["systems"]["smollm2-135m-instruct"]["general_prompts"][
            "answer_censor_score"
        ]["rejection_pct"]
    )


@pytest.mark.notebook
@pytest.mark.integration
def test_refusal_suite_notebook(tmp_path):
    import shutil
    import uuid

    from workbench.notebooks import run_notebook

    name = f"test-{uuid.uuid4().hex[:6]}"
    try:
        run_notebook(
            "06_refusal_suite",
            {
                "run_name": name,
                "limit": 3,
                "k_samples": 2,
                "max_new_tokens": 6,
                "abstainer_technique": "zero_shot",
            },
            run_dir=tmp_path,
            progress=False,
        )
        run = repo_root() / "runs" / name
        bad = pd.read_csv(run / "misbehaviour.csv")
        assert set(bad["system"]) == {
            "smollm2-135m-instruct",
            "smollm2-135m-instruct+zero_shot@wn:09411430-n",
        }
        assert (run / "figures" / "source_rates.png").is_file()
        assert "no figure" not in (tmp_path / "06_refusal_suite.ipynb").read_text()
    finally:
        shutil.rmtree(repo_root() / "runs" / name, ignore_errors=True)


def test_damaged_chunk_files_are_named_set_aside_and_answered_again(tmp_path, runs, capsys):
    """What a crash before durable writes could leave: a 0-byte chunk and one cut short. The
    next run names each, keeps it as ``.damaged`` and answers only those chunks again."""
    cfg = tiny_suite_file(tmp_path, "damaged", 8)
    first = RefusalSuite(SuiteConfig.from_yaml(cfg), progress=False).run().rows
    chunks = sorted((runs / "damaged" / "chunks").glob("gen-*.parquet"))
    assert len(chunks) == 4
    empty, cut = chunks[0], chunks[2]
    empty.write_bytes(b"")
    cut.write_bytes(cut.read_bytes()[:-20])
    capsys.readouterr()
    rows, calls = run_counting(cfg)
    err = capsys.readouterr().err
    assert f"warning: {empty} is damaged (it is empty (0 bytes))" in err
    assert f"warning: {cut} is damaged (it is not a whole Parquet file" in err
    assert err.count("that chunk is answered again") == 2
    assert len(calls) == 4  # the two damaged chunks' prompts, no others
    assert all((c.parent / (c.name + ".damaged")).is_file() and c.is_file() for c in (empty, cut))
    key = ["prompt_id", "sample"]
    assert rows.sort_values(key)["response"].tolist() == first.sort_values(key)["response"].tolist()


def test_each_published_set_is_one_validated_entry_of_the_shipped_yaml():
    """The 21 sets are the entries of ``workbench/refusal/datasets.yaml`` (package data), each
    validated by :class:`DatasetSpec`: a misspelt key is one line naming the entry."""
    from importlib import resources

    from workbench.refusal.datasets import DATASETS_FILE, GENERIC, read_entries

    text = resources.files("workbench.refusal").joinpath(DATASETS_FILE).read_text()
    specs = read_entries(text)
    assert [s.name for s in specs] == list(DATASETS) and len(specs) == 21
    assert DATASETS["sanity"].layout == GENERIC and DATASETS["sanity"].rows is None
    assert dict(DATASETS["xstest.safe"].layout.where) == {"label": "safe"}
    assert DATASETS["sorrybench.questions"].layout.first_turn
    entry = "datasets:\n- {name: x, expected: may_refuse, folder: f, files: a.csv, source: s, %s}\n"
    unknown = r"entry 1 \(x\): unknown dataset entry field\(s\) 'colums'"
    with pytest.raises(ConfigError, match=unknown) as e:
        read_entries(entry % "colums: {prompt: p}")
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"entry 1 \(x\): .*'rows' must be a positive integer"):
        read_entries(entry % "rows: 0")
    with pytest.raises(ConfigError, match=r"entry 1 \(x\): .*'columns.wher' is not a setting here"):
        read_entries(entry % "columns: {prompt: p, wher: {a: b}}")


def test_parquet_is_read_through_datasets_as_pandas_reads_it(tmp_path):
    """A Parquet file read by ``datasets`` (offline, cached in a temporary folder) gives the rows
    pandas gives: values, empty cells, list columns, and no column pandas keeps as the index."""
    from workbench.refusal.datasets import read_records

    path = tmp_path / "set.parquet"
    frame = pd.DataFrame(
        {"prompt": ["a", None, "c"], "n": [1.0, None, 3.0], "turns": [["x"], ["y", "z"], []]},
        index=pd.Index(["k1", "k2", "k3"], name="key"),
    )
    frame.to_parquet(path)
    got, want = read_records(path, "set"), pd.read_parquet(path).to_dict("records")
    assert repr(got) == repr(want) and "key" not in got[0]
    frame.iloc[:0].to_parquet(path)
    assert read_records(path, "set") == []
    path.write_bytes(b"not parquet")
    with pytest.raises(DatasetError, match=r"set\.parquet: cannot be read as parquet"):
        read_records(path, "set")
