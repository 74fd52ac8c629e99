"""IS-A probes by log-probability, calibrated on control pairs, with a sanity gate."""

import pytest

from workbench.experiments.probes import (
    calibrate,
    control_probes,
    probe_descendants,
    true_false_scores,
)
from workbench.scoring.metrics import generalization_errors
from workbench.testing import tiny_benchmark


def test_separated_controls_make_an_informative_probe():
    # a model leaning to "False" everywhere, but less so on true statements: calibration helps
    cal = calibrate([-1.0, -0.8, -1.2, -0.5], [-3.0, -2.5, -2.8, -3.5])
    assert cal.informative and cal.auroc == 1.0
    assert cal.raw_true_called_false == 1.0  # uncalibrated, it calls every true control false
    assert cal.true_called_false == 0.0 and cal.false_called_true == 0.0
    assert -2.5 < cal.threshold < -0.5


def test_unseparated_or_degenerate_controls_make_it_uninformative():
    flat = calibrate([-2.0, -2.1, -1.9, -2.0], [-2.0, -1.9, -2.1, -2.0])
    assert not flat.informative and "not separated" in flat.reason
    reversed_ = calibrate([-3.0, -3.5], [-1.0, -0.5])
    assert not reversed_.informative


def test_probe_rows_and_the_analysis_follow_the_gate(tiny):
    bench = tiny_benchmark()
    controls = control_probes(bench, ["river"], n=4)
    assert {p.expected for p in controls} == {True, False}
    assert not any(p.concept_id in ("river", "nile", "danube") for p in controls)
    scores = true_false_scores(tiny, ["Every river is a kind of body of water."] * 2)
    assert scores[0] == pytest.approx(scores[1])
    rows, cal = probe_descendants(tiny, bench, ["river"], "m")
    assert set(rows["question_concept"]) == {"nile", "danube"}
    assert rows["p_true"].between(0, 1).all()
    if cal.informative:
        assert rows["known"].notna().all()
    else:
        assert rows["known"].isna().all()
    import pandas as pd

    answered = pd.DataFrame(
        [
            {
                "model": "m",
                "technique": "sft",
                "target": "river",
                "relation": "descendant",
                "question_concept": d,
                "refused_phrase": False,
            }
            for d in ("nile", "danube")
        ]
    )
    g = generalization_errors(answered, rows.assign(known=None)).iloc[0]
    assert (
        g["misses"] == 2 and g["probed"] == 0 and g["explained_share"] != g["explained_share"]
    )  # NaN


def test_is_a_statements_stay_grammatical_with_plural_names():
    from workbench.taxonomy.model import Concept, Taxonomy
    from workbench.taxonomy.questions import relation_probes

    tax = Taxonomy.from_concepts(
        [
            Concept("veh", "Vehicles", root="things", plural="Vehicles"),
            Concept("truck", "Trucks", parent="veh", root="things", plural="Trucks"),
            Concept("bigblue", "Big Blue Hauler", kind="instance", parent="truck", root="things"),
            Concept("tools", "Hand Tools", parent="veh", root="things", plural="Hand Tools"),
        ]
    )
    statements = {(p.concept_id, p.other_id): p.statement for p in relation_probes(tax, "bigblue")}
    assert statements[("bigblue", "truck")] == (
        "Big Blue Hauler can be classified as a member, a subtype or a subcategory of Trucks."
    )
    assert statements[("bigblue", "tools")].endswith("of Hand Tools.")
    bench = tiny_benchmark()
    rows = [p.statement for p in control_probes(bench, ["river"], n=4)]
    assert not any(s.startswith("Every ") or " is a " in s for s in rows)
