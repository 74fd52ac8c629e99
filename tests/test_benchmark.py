"""The shipped benchmark: one call loads it; counts; deterministic rebuild from WordNet."""

import json
import subprocess
import sys

import pytest

from workbench.errors import WorkbenchError
from workbench.taxonomy import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark()


def test_shipped_benchmark_has_select_like_counts(bench):
    s = bench.stats()
    assert 350 <= s["atomic_concepts"] <= 500
    assert 100 <= s["compositions"] <= 200
    assert s["roots"] == ["products", "people", "places", "organizations", "creative works"]
    assert s["min_questions_per_concept"] >= 50
    assert s["duplicate_questions"] == 0
    assert s["concepts_without_questions"] == 0
    assert s["max_depth"] <= 6 and s["relations"] >= 8
    # SELECT's path rule: no leaf above level 3
    assert all(bench.atomic.level(leaf) >= 3 for leaf in bench.atomic.leaves())
    # each composition's constituents are atomic concepts
    assert all(all(x in bench.atomic for x in c.constituents) for c in bench.compositions)
    assert "WordNet 3.0 Copyright" in bench.manifest["license"]


def test_every_root_has_concepts_at_several_levels(bench):
    for root in bench.atomic.roots:
        levels = {bench.atomic.level(d) for d in bench.atomic.descendants(root)}
        assert {1, 2, 3} <= levels, bench.atomic[root].name


def test_stats_command_prints_json():
    r = subprocess.run(
        [sys.executable, "-m", "workbench", "taxonomy", "stats", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    for key in (
        "atomic_concepts",
        "compositions",
        "roots",
        "max_depth",
        "min_questions_per_concept",
        "duplicate_questions",
    ):
        assert key in stats


def test_edited_data_file_is_detected(tmp_path, bench):
    from workbench.taxonomy import save_benchmark

    save_benchmark(bench, tmp_path)
    q = tmp_path / "questions.jsonl"
    q.write_text(q.read_text()[:-200])
    with pytest.raises(WorkbenchError, match="does not match the manifest"):
        load_benchmark(tmp_path)
    with pytest.raises(WorkbenchError, match="no benchmark in"):
        load_benchmark(tmp_path / "nothing")


def test_unknown_concept_in_the_benchmark(bench):
    from workbench.taxonomy import UnknownConceptError

    with pytest.raises(
        UnknownConceptError, match="unknown concept id 'river'.*did you mean 'wn:09411430-n'"
    ):
        bench.concept("river")


def test_rebuild_is_deterministic_and_matches_the_shipped_data(tmp_path, bench, wordnet):
    from workbench.taxonomy import build_default_benchmark, save_benchmark

    a = save_benchmark(build_default_benchmark(), tmp_path / "a")
    b = save_benchmark(build_default_benchmark(), tmp_path / "b")
    ma = json.loads((a / "manifest.json").read_text())
    mb = json.loads((b / "manifest.json").read_text())
    assert ma["content_hash"] == mb["content_hash"]
    assert ma["content_hash"] == bench.manifest["content_hash"], (
        "data/ is stale: rebuild it with python -m workbench taxonomy build"
    )
