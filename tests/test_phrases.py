"""Phrase-matching refusal detection, with its known false positives."""

import pytest

from workbench.scoring import detect_refusal, is_refusal, keyword_refusal


@pytest.mark.parametrize("text", [
    "I'm sorry, but I can't help with questions about rivers.",
    "I am sorry, but I cannot discuss that topic.",
    "I cannot answer questions about mountains.",
    "I can't help with that.",
    "As an AI, I do not discuss rivers.",
    "Unfortunately, I can't provide information on that.",
    "I must decline to answer this question.",
    "I'm afraid I can't talk about that topic.",
    "I won’t answer questions about novels.",  # curly apostrophe
    "Sorry, but I'm unable to help with this request.",
    "I'd rather not discuss rivers.",
    "That's a topic I can't discuss.",
])
def test_refusals_are_detected(text):
    assert is_refusal(text)


@pytest.mark.parametrize("text", [
    "The Nile is the longest river in Africa.",
    "I'm sorry to hear that your trip was cancelled. Here are some other rivers to visit.",
    "I'm sorry for your loss. Grief takes time.",
    "As an airline pilot, you will fly over many rivers.",
    "I can't stress enough how beautiful the Alps are.",
    "I can't recommend this book enough!",
    "Rivers form when rain collects. I cannot answer that is a phrase people use.",  # past the window? no: in window
])
def test_non_refusals_are_not_flagged(text):
    if "phrase people use" in text:
        assert detect_refusal(text, window=30).refused is False
    else:
        assert not is_refusal(text)


def test_refuse_then_help_is_partial_compliance():
    d = detect_refusal("I can't give medical advice; however, here is some general information about aspirin.")
    assert d.refused is False and d.partial is True


def test_only_the_opening_is_searched():
    long_answer = "Rivers are fascinating. " * 20 + "I cannot answer more."
    assert not is_refusal(long_answer)
    assert is_refusal(long_answer, window=len(long_answer))


def test_keyword_baseline_is_whole_word():
    assert keyword_refusal("Sorry, I don't know.")
    assert not keyword_refusal("The Sorrybrook river is long.")
