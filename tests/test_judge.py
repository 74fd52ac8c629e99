"""The LLM judge reads verdicts by constrained choice: a distribution over the labels, always."""

import math

import pytest

from workbench.scoring.judge import (
    CATEGORIES,
    LLMJudge,
    classify_confidence,
    refusal_confidence,
)


def test_rubric_covers_twelve_categories():
    assert len(CATEGORIES) == 12
    text = LLMJudge(lm=None).prompt("What is a river?", "I can't help.")
    assert "L. nonsensical output" in text and "What is a river?" in text
    assert "expected" not in text.lower()


def test_every_answer_gets_a_verdict_distribution_even_from_a_random_model(tiny):
    verdicts = LLMJudge(tiny).judge(
        [("What is a river?", "A river is a stream."), ("Hi?", "No."), ("Q", "")]
    )
    assert len(verdicts) == 3
    for v in verdicts:
        assert 0.0 <= v.p_refusal <= 1.0 and 0.0 < v.mass <= 1.0
        assert len(v.category_probs) == 12 and sum(v.category_probs) == pytest.approx(1.0)
        assert v.refusal == (v.p_refusal > 0.5)
        assert v.category == (
            0 if not v.refusal else 1 + max(range(12), key=v.category_probs.__getitem__)
        )


def test_verdict_is_the_judges_own_probability(tiny):
    """p_refusal equals the renormalised probability of the label spellings, read directly."""
    import torch

    from workbench.generation import render_prompts
    from workbench.scoring.judge import _VERDICT_OPTIONS, VERDICT_PREFIX

    judge = LLMJudge(tiny, categories=False)
    [v] = judge.judge([("What is a lake?", "A lake is water.")])
    text = (
        render_prompts(tiny.tokenizer, [judge.prompt("What is a lake?", "A lake is water.")])[0]
        + VERDICT_PREFIX
    )
    tok = tiny.tokenizer
    base = tok(text, add_special_tokens=False)["input_ids"]

    def prob(s):
        cont = tok(s, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(tiny.model(torch.tensor([base + cont])).logits[0].float(), -1)
        return math.exp(sum(float(lp[len(base) - 1 + i, t]) for i, t in enumerate(cont)))

    refusal, compliance = (sum(prob(s) for s in opts) for opts in _VERDICT_OPTIONS)
    assert v.p_refusal == pytest.approx(refusal / (refusal + compliance), rel=1e-3)
    assert (v.category_probs == () and v.category == (1 if v.refusal else 0)) or v.category == 0


def test_refusal_confidence_weights_samples_by_probability():
    assert refusal_confidence([0.0, 0.0], [True, True]) == pytest.approx(1.0)
    assert refusal_confidence([0.0, 0.0], [True, False]) == pytest.approx(0.0)
    # the likelier sample dominates: softmax([0, -ln 3]) = [0.75, 0.25]
    assert refusal_confidence([0.0, -math.log(3)], [True, False]) == pytest.approx(0.5)
    assert refusal_confidence([], []) is None


def test_classify_confidence():
    assert classify_confidence(0.5) == "rejection"
    assert classify_confidence(-0.5) == "compliance"
    assert classify_confidence(0.05) == "ambiguous"
    assert classify_confidence(None) == "unscored"
