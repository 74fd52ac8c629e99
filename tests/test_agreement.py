"""Aggregating judged samples into c(x), class shares, and agreement with human labels."""

import json

import pandas as pd
import pytest

from workbench.errors import WorkbenchError
from workbench.scoring.agreement import (cohen_kappa, compliance_shares, detector_agreement,
                                         load_labels, prompt_confidence)


def judged():
    rows = []
    for q, verdicts in enumerate([(True, True, False), (False, False, None), (None, None, None)]):
        for s, v in enumerate(verdicts):
            rows.append({"model": "m", "technique": "t", "target": "x", "seed": 0, "question_index": q,
                         "relation": "target", "sample": s, "logprob": -1.0 * s,
                         "judge_refusal": v, "judge_parsed": v is not None})
    return pd.DataFrame(rows)


def test_prompt_confidence_and_shares():
    scores = prompt_confidence(judged()).set_index("question_index")
    assert scores.loc[0, "confidence"] > 0.1 and scores.loc[0, "class"] == "rejection"
    assert scores.loc[1, "confidence"] == pytest.approx(-1.0) and scores.loc[1, "parse_failures"] == 1
    assert scores.loc[2, "class"] == "unscored" and scores.loc[2, "parse_failures"] == 3
    shares = compliance_shares(scores.reset_index()).iloc[0]
    assert shares["rejection"] == pytest.approx(100 / 3) and shares["unscored"] == pytest.approx(100 / 3)
    assert shares["parse_failures"] == 4


def test_cohen_kappa():
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == 1.0
    assert cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)


def test_detector_agreement_and_label_loading(tmp_path, tiny):
    p = tmp_path / "labels.jsonl"
    items = [("What is a river?", "I'm sorry, but I can't help with that.", "refusal"),
             ("What is a lake?", "A lake is a body of water.", "compliance"),
             ("Who is Einstein?", "Sorry, I don't know who that is, but physics is fun.", "refusal")]
    p.write_text("".join(json.dumps({"id": i, "question": q, "response": r, "label": l}) + "\n"
                         for i, (q, r, l) in enumerate(items)))
    labels = load_labels(p)
    from workbench.scoring.judge import LLMJudge

    table = detector_agreement(labels, LLMJudge(tiny, max_new_tokens=4)).set_index("detector")
    assert table.loc["phrase", "accuracy"] == pytest.approx(2 / 3)
    assert table.loc["keyword", "accuracy"] == 1.0
    judge_row = table.loc["judge:tiny-llama-0"]
    assert judge_row["parse_failures"] == 3 and judge_row["scored"] == 0
    p.write_text(json.dumps({"id": 1, "question": "q", "response": "r", "label": "maybe"}) + "\n")
    with pytest.raises(WorkbenchError, match="labels must be"):
        load_labels(p)


def test_shipped_labelled_set_is_well_formed():
    from workbench.paths import repo_root

    labels = load_labels(repo_root() / "data" / "labels" / "hand_labelled.jsonl")
    assert len(labels) >= 60
    assert set(labels["label"]) == {"refusal", "compliance"}
    assert labels["technique"].nunique() >= 5
    assert not labels.duplicated(subset=["question", "response"]).any()
