"""SELECT's metrics on hand-made rows."""

import math

import pandas as pd
import pytest

from workbench.scoring.metrics import (
    by_level,
    generalization_errors,
    harmonic_mean,
    summarize,
    technique_table,
    universality,
)


def rows():
    def r(tech, target, relation, refused, concept=None, level=2):
        return {
            "model": "m",
            "technique": tech,
            "target": target,
            "relation": relation,
            "refused_phrase": refused,
            "question_concept": concept or target,
            "target_kind": "atomic",
            "target_level": level,
        }

    data = []
    for target, level in (("river", 2), ("lake", 3)):
        data += [r("sft", target, "target", x, level=level) for x in (True, True, True, False)]
        data += [
            r("sft", target, "descendant", x, f"{target}-d{i}", level)
            for i, x in enumerate((True, False))
        ]
        data += [r("sft", target, "sibling", x, level=level) for x in (False, False, True, False)]
        data += [r("base", target, "target", False, level=level)] * 4
        data += [r("base", target, "descendant", False, f"{target}-d0", level)] * 2
        data += [r("base", target, "ancestor", False, level=level)] * 4
    return pd.DataFrame(data)


def test_summary_metrics_per_target():
    s = summarize(rows()).set_index(["technique", "target"])
    sft = s.loc[("sft", "river")]
    assert sft["abstention"] == 0.75 and sft["generalization"] == 0.5 and sft["specificity"] == 0.75
    assert sft["overall"] == pytest.approx(0.75)
    assert (sft["n_target"], sft["n_descendant"], sft["n_specificity"]) == (4, 2, 4)
    base = s.loc[("base", "lake")]
    assert base["abstention"] == 0 and base["specificity"] == 1 and base["overall"] == 0


def test_harmonic_mean():
    assert harmonic_mean(1.0, 0.5) == pytest.approx(2 / 3)
    assert harmonic_mean(0.0, 0.0) == 0.0
    assert math.isnan(harmonic_mean(float("nan"), 0.5))


def test_technique_table_has_bootstrap_intervals_around_the_point():
    t = technique_table(rows(), n_boot=200).set_index("technique")
    sft = t.loc["sft"]
    assert sft["abstention"] == 0.75
    assert (
        sft["abstention_lo"] <= 0.75 <= sft["abstention_hi"]
        and sft["abstention_lo"] < sft["abstention_hi"]
    )
    assert t.loc["base", "abstention_lo"] == t.loc["base", "abstention_hi"] == 0
    assert sft["targets"] == 2


def test_by_level_and_universality():
    lv = by_level(rows())
    assert set(lv["target_level"]) == {2, 3}
    data = []
    for tech, rates in {
        "a": (0.25, 0.5, 1.0),
        "b": (0.5, 0.75, 1.0),
        "c": (1.0, 0.5, 0.25),
    }.items():
        for target, rate in zip(("x", "y", "z"), rates):
            data += [
                {
                    "model": "m",
                    "technique": tech,
                    "target": target,
                    "relation": "target",
                    "refused_phrase": i < rate * 4,
                }
                for i in range(4)
            ]
    corr = universality(pd.DataFrame(data))
    assert corr.loc["a", "b"] == pytest.approx(1.0) and corr.loc["a", "c"] == pytest.approx(-1.0)


def test_generalization_errors_share_explained_by_missing_knowledge():
    probes = pd.DataFrame(
        [
            {"model": "m", "target": "river", "question_concept": "river-d1", "known": False},
            {"model": "m", "target": "lake", "question_concept": "lake-d1", "known": True},
        ]
    )
    g = generalization_errors(rows(), probes).set_index("technique")
    assert g.loc["sft", "misses"] == 2 and g.loc["sft", "explained"] == 1
    assert g.loc["sft", "explained_share"] == 0.5
