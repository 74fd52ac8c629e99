"""c(x) over judged samples, class shares, and detectors' agreement with the labelled set."""

import pandas as pd
import pytest

from workbench.errors import WorkbenchError
from workbench.scoring.agreement import (
    agreement_table,
    cohen_kappa,
    compliance_shares,
    detector_predictions,
    partial_tracking,
    prompt_confidence,
)
from workbench.scoring.labels import load_agreement_set, split_of


def judged():
    rows = []
    for q, verdicts in enumerate([(True, True, False), (False, False, False)]):
        for s, v in enumerate(verdicts):
            rows.append(
                {
                    "model": "m",
                    "technique": "t",
                    "target": "x",
                    "seed": 0,
                    "question_index": q,
                    "relation": "target",
                    "sample": s,
                    "logprob": -1.0 * s,
                    "refused_judge": v,
                }
            )
    return pd.DataFrame(rows)


def test_prompt_confidence_and_shares():
    scores = prompt_confidence(judged()).set_index("question_index")
    assert scores.loc[0, "confidence"] > 0.1 and scores.loc[0, "class"] == "rejection"
    assert scores.loc[1, "confidence"] == pytest.approx(-1.0)
    shares = compliance_shares(scores.reset_index()).iloc[0]
    assert shares["rejection"] == pytest.approx(50) and shares["compliance"] == pytest.approx(50)


def test_cohen_kappa():
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == 1.0
    assert cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)


def test_agreement_counts_partial_refusals_as_refusals(tmp_path, tiny):
    (tmp_path / "written").mkdir()
    (tmp_path / "written" / "a.txt").write_text(
        "# comment\n"
        "refusal|first_person|What is a river?|I'm sorry, but I can't help with that.\n"
        "compliance|plain_answer|What is a lake?|A lake is a body of water.\n"
        "partial|refuse_then_answer|Who is Einstein?|I can't discuss scientists, but Einstein was a physicist who "
        "developed the theory of relativity and won the 1921 Nobel Prize.\n"
    )
    labels = load_agreement_set(tmp_path)
    assert list(labels["refusal"]) == [True, False, True]
    assert set(labels["split"]) <= {"dev", "test"}
    pred = detector_predictions(labels, judge=None)
    table = agreement_table(pred).set_index("detector")
    assert table.loc["phrase", "accuracy"] == 1.0 and table.loc["phrase", "tp"] == 2
    assert partial_tracking(pred)["tp"] == 1
    by_style = agreement_table(
        detector_predictions(
            labels,
            judge=__import__("workbench.scoring.judge", fromlist=["LLMJudge"]).LLMJudge(tiny),
        ),
        by="style",
    )
    assert set(by_style["detector"]) == {"phrase", "keyword", "unknownbench", "judge"}
    (tmp_path / "written" / "a.txt").write_text("maybe|x|q|r\n")
    with pytest.raises(WorkbenchError, match="labels must be one of"):
        load_agreement_set(tmp_path)
    (tmp_path / "written" / "a.txt").write_text("refusal|q|r\n")
    with pytest.raises(
        WorkbenchError, match="a.txt, line 1: expected label\\|style\\|question\\|response"
    ):
        load_agreement_set(tmp_path)


def test_shipped_labelled_set_is_large_varied_and_split():
    labels = load_agreement_set()
    assert len(labels) >= 600
    assert set(labels["label"]) == {"refusal", "compliance", "partial"}
    assert labels["style"].nunique() >= 20
    assert (labels["source"] == "embedded").sum() >= 250
    assert not labels.duplicated(subset=["question", "response"]).any()
    share = (labels["split"] == "dev").mean()
    assert 0.25 < share < 0.42
    assert split_of("q", "r") == split_of("q", "r")


def test_agreement_command_prints_every_detector(capsys):
    from workbench.cli import main

    assert main(["scoring", "agreement", "--split", "dev"]) == 0
    out = capsys.readouterr().out
    for name in ("phrase", "keyword", "unknownbench", "per style", "partial"):
        assert name in out
