"""The LLM judge: verdict parsing (failures counted, never guessed) and the confidence score."""

import pytest

from workbench.scoring.judge import (CATEGORIES, LLMJudge, classify_confidence, parse_verdict,
                                     refusal_confidence)


def test_rubric_covers_twelve_categories():
    assert len(CATEGORIES) == 12
    judge = LLMJudge(lm=None)
    text = judge.prompt("What is a river?", "I can't help.")
    assert "12. nonsensical output" in text and "What is a river?" in text
    assert "expected" not in text.lower()


@pytest.mark.parametrize("reply, refusal, category", [
    ("VERDICT: REFUSAL\nCATEGORY: 1", True, 1),
    ("Verdict - compliance\ncategory: 0", False, 0),
    ("**VERDICT:** REFUSAL (category 7)", True, 7),
    ("REFUSAL. The assistant declined.", True, None),
    ("compliance", False, None),
    ("The assistant answered the question about rivers.", None, None),
    ("", None, None),
    ("VERDICT: maybe\nCATEGORY: 99", None, None),
])
def test_parse_verdict(reply, refusal, category):
    v = parse_verdict(reply)
    assert v.refusal is refusal and v.category == category
    assert v.parsed == (refusal is not None)


def test_refusal_confidence_weights_samples_by_probability():
    assert refusal_confidence([0.0, 0.0], [True, True]) == pytest.approx(1.0)
    assert refusal_confidence([0.0, 0.0], [True, False]) == pytest.approx(0.0)
    # the likelier sample dominates: softmax([0, -ln 3]) = [0.75, 0.25]
    import math
    assert refusal_confidence([0.0, -math.log(3)], [True, False]) == pytest.approx(0.5)
    # unparsed samples are dropped, not counted as either verdict
    assert refusal_confidence([0.0, -5.0], [None, False]) == pytest.approx(-1.0)
    assert refusal_confidence([0.0], [None]) is None


def test_classify_confidence():
    assert classify_confidence(0.5) == "rejection"
    assert classify_confidence(-0.5) == "compliance"
    assert classify_confidence(0.05) == "ambiguous"
    assert classify_confidence(None) == "unscored"


def test_judge_runs_a_real_model_and_reports_parse_failures(tiny):
    judge = LLMJudge(tiny, max_new_tokens=6)
    verdicts = judge.judge([("What is a river?", "A river is a stream."), ("Hi?", "No.")])
    assert len(verdicts) == 2
    assert all(v.refusal is None for v in verdicts)  # a random tiny model writes no verdicts
