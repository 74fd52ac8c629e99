"""Loads that never shrink silently: the published releases' manifests, taxi's loader, and the
record every row keeps (workbench.releases)."""

import json

import pandas as pd
import pytest

from taxi_release import published_size_rows, taxi_rows, write_taxi_release
from workbench.cli.releases import RELEASE_MODULES, register_all
from workbench.editing import load_taxi
from workbench.errors import WorkbenchError
from workbench.releases import (
    Found,
    ReleaseError,
    ReleaseManifest,
    check_release,
    compare,
    published,
)

register_all()


def test_the_command_line_knows_every_registered_kind():
    """The kinds ``releases check`` offers (without importing the loaders) are the registered
    ones."""
    assert sorted(RELEASE_MODULES) == sorted(register_all())


def test_published_manifests_hold_the_counts_of_the_releases():
    ub = published("unknownbench")
    assert ub.total() == 13319 and len(ub.files) == 6
    taxi = published("taxi").files["edits-evaluation.json"]
    assert taxi["items"] == 5560 and taxi["parts"]["edits"] == 976
    assert sum(v for k, v in taxi["parts"].items() if k.endswith(" queries")) == 5560
    sel = published("select").files
    assert sel["atoms/data.json"] == {
        "items": 394,
        "parts": {"queries": 394 * 30, "extra_queries": 394 * 20},
    }
    assert sel["compositions/data.json"]["parts"] == {
        "queries": 156 * 20,
        "extra_queries": 156 * 10,
    }
    assert published("select").total() is None  # each file counts the same concepts
    assert published("select-results").total() == 144


def test_select_results_expected_from_the_published_config_are_the_144_files(tmp_path):
    from workbench.tables.select_results import expected_files

    models = {
        "Gemma-2-IT-2B": "google/gemma-2-2b-it",
        "Gemma-2-IT-9B": "google/gemma-2-9b-it",
        "LLaMa-3.1-Instruct-8B": "meta-llama/Meta-Llama-3.1-8B-Instruct",
        "GPT-3.5-U": "openai/azure/gpt-3.5-turbo",
        "GPT-4o-U": "openai/azure/gpt-4o",
        "Mistral-Instruct-7B-v3": "mistralai/Mistral-7B-Instruct-v0.3",
    }
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "models.yaml").write_text(
        "".join(f'"{a}": "{m}"\n' for a, m in models.items())
    )
    (tmp_path / "config" / "techniques.yaml").write_text(
        "".join(
            f"{t}: {{}}\n"
            for t in (
                "prompt-simple",
                "prompt_cot-few_shot",
                "steering-repe",
                "tuning-sft",
                "tuning-sft-dpo",
            )
        )
    )
    (tmp_path / "results" / "expr.abstain.select").mkdir(parents=True)
    files, _ = expected_files(tmp_path)
    by_folder = pd.Series([f.relpath.split("/")[1] for f in files]).value_counts().to_dict()
    assert by_folder == {
        k.split("/")[1]: v["items"] for k, v in published("select-results").files.items()
    }


def test_the_published_select_release_checks_concepts_files_and_questions():
    counts = {
        rel: Found(f["items"], dict(f.get("parts") or {}))
        for rel, f in published("select").files.items()
    }
    counts["atoms/data.train.json"] = Found(394)  # its size is not in the manifest: not compared
    assert check_release("select", "/x", counts) == "whole"
    short = {**counts, "atoms/data.json": Found(393, {"queries": 11790, "extra_queries": 7860})}
    with pytest.raises(
        ReleaseError,
        match=r"atoms/data\.json has 393 of 394 concepts, 11,790 of 11,820 "
        r"queries, 7,860 of 7,880 extra_queries; get the whole release",
    ):
        check_release("select", "/x", short)
    del counts["compositions/hints.json"]
    assert (
        check_release("select", "/x", counts, allow_partial=True)
        == "partial: missing compositions/hints.json"
    )


def test_compare_names_short_and_more_per_file():
    m = ReleaseManifest("unknownbench", "s", {"a.json": {"items": 3}, "b.json": {"items": 2}})
    assert compare(m, {"a.json": Found(3), "b.json": Found(2)}) == ([], [])
    assert compare(m, {"a.json": Found(1), "c.json": Found(4)}) == (
        ["missing b.json", "a.json has 1 of 3 items"],
        ["c.json is not in the manifest"],
    )


def test_taxi_release_whole_short_and_malformed(tmp_path):
    path = write_taxi_release(tmp_path / "rel", published_size_rows(), describe=False)
    q = load_taxi(path)  # the published manifest: 5,560 queries of 976 edits
    assert len(q) == 5560 and set(q["release_load"]) == {"whole"}
    short = [r for r in published_size_rows() if r["superordinate_category"] != "drink"]
    path = write_taxi_release(tmp_path / "short", short, describe=False)
    with pytest.raises(
        ReleaseError,
        match=r"^taxi at .* is incomplete against the published release "
        r"\(github\.com/derekpowell/taxi @ 6b7d41b, datasets/\): "
        r"edits-evaluation\.json has 4,896 of 5,560 queries, 856 of "
        r"976 edits, 0 of 664 drink queries; .*allow_partial=True",
    ) as e:
        load_taxi(path)
    assert "\n" not in str(e.value)
    q = load_taxi(path, allow_partial=True)
    assert len(q) == 4896 and q["release_load"].iloc[0].startswith(
        "partial: edits-evaluation.json has 4,896"
    )
    # malformed fields: the file and the row's key are named
    rows = taxi_rows()
    rows[1] = {**rows[1], "fwd_choices": "bark"}
    path = write_taxi_release(tmp_path / "bad", rows, describe=False)
    with pytest.raises(
        WorkbenchError,
        match=r"edits-evaluation\.json, row 1: malformed query: 'fwd_choices' "
        r"must be a non-empty list of strings, got str 'bark'",
    ):
        load_taxi(path, allow_partial=True)
    rows = taxi_rows()
    rows[2] = {**rows[2], "answer_fwd": "six legs"}
    path = write_taxi_release(tmp_path / "bad2", rows, describe=False)
    with pytest.raises(
        WorkbenchError, match=r"row 2: malformed query: 'answer_fwd' 'six legs' is not one"
    ):
        load_taxi(path, allow_partial=True)


def test_a_release_manifest_must_be_of_its_kind(tmp_path):
    path = write_taxi_release(tmp_path)
    (tmp_path / "release_manifest.json").write_text(json.dumps({"kind": "select", "files": {}}))
    with pytest.raises(
        ReleaseError, match=r"release_manifest\.json: not a release manifest of taxi"
    ):
        load_taxi(path)


def test_release_cli_checks_and_describes(tmp_path, capsys):
    from workbench.cli import main

    write_taxi_release(tmp_path / "datasets", describe=False)
    assert main(["releases", "check", "taxi", str(tmp_path)]) == 2
    assert "incomplete against the published release" in capsys.readouterr().err
    assert main(["releases", "describe", "taxi", str(tmp_path)]) == 0
    assert (
        main(["releases", "check", "taxi", str(tmp_path / "datasets" / "edits-evaluation.json")])
        == 0
    )
    assert capsys.readouterr().out.splitlines()[-1].startswith("whole (as ")


def test_shortfall_is_the_one_whole_check():
    """What is absent (in the release's order) and what holds another count; a count of None
    published means present is enough, found means absent; names not published are no
    shortfall."""
    from workbench.releases import shortfall

    gap = shortfall({"a": 2, "b": None, "c": 1, "d": 4}, {"a": 1, "c": 1, "d": None, "e": 3})
    assert gap.missing == ("b", "d") and gap.differ == (("a", 1, 2),) and not gap.whole
    assert shortfall({"a": None, "b": 2}, {"a": 0, "b": 2}).whole
