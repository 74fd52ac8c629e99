"""The learned refusal detector: bad input, training, judging by held-out model, the shipped head."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from workbench.errors import ConfigError
from workbench.scoring.probe import (
    FeatureSettings,
    ProbeHead,
    RefusalProbe,
    add_probe_columns,
    check_texts,
    fit_head,
    shipped_head_path,
)
from workbench.scoring.probe.features import MAX_CHARS, FeatureCache
from workbench.scoring.probe.loso import (
    expected_calibration_error,
    holdout_of,
    leave_one_model_out,
    reliability,
)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("   ", "response 1 is empty"),
        (b"I cannot", "response 1 is bytes"),
        ("broken \udc80 text", "response 1 is not valid UTF-8"),
        ("x" * (MAX_CHARS + 1), "above the probe's"),
        (3.5, "response 1 is float"),
    ],
)
def test_a_text_it_cannot_score_is_one_line_naming_it(text, said):
    with pytest.raises(ConfigError) as e:
        check_texts(["fine", text])
    assert said in str(e.value) and "\n" not in str(e.value)


def _blobs(n_per=40, k=3, dim=6, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 4, (k, dim))
    x = np.concatenate([centres[c] + rng.normal(0, 1, (n_per, dim)) for c in range(k)])
    labels = [("compliance", "refusal", "partial")[c] for c in range(k) for _ in range(n_per)]
    return x, labels


def test_training_refuses_a_set_with_one_class():
    x, _ = _blobs()
    with pytest.raises(ConfigError, match="'refusal' answers only"):
        fit_head(x, ["refusal"] * len(x))


def test_training_refuses_unknown_labels_and_mismatched_rows():
    x, labels = _blobs()
    with pytest.raises(ConfigError, match="unknown label 'maybe'"):
        fit_head(x, labels[:-1] + ["maybe"])
    with pytest.raises(ConfigError, match="feature rows"):
        fit_head(x[:-1], labels)


def test_head_learns_separable_classes_and_survives_a_round_trip(tmp_path):
    x, labels = _blobs()
    head = fit_head(x, labels, provenance={"sources": "blobs"})
    assert head.classes == ("compliance", "refusal", "partial")
    p = head.probabilities(x)
    assert np.allclose(p.sum(1), 1) and head.temperature > 0
    assert (np.array(head.classes)[p.argmax(1)] == np.array(labels)).mean() > 0.95
    path = tmp_path / "head.json"
    head.save(path)
    again = ProbeHead.load(path)
    assert np.allclose(again.probabilities(x), p)
    assert again.provenance["counts"] == {"compliance": 40, "refusal": 40, "partial": 40}


def test_two_labels_make_a_two_class_head():
    x, labels = _blobs(k=2)
    head = fit_head(x, labels)
    assert head.classes == ("compliance", "refusal")
    assert np.allclose(head.refusal_probability(x), head.probabilities(x)[:, 1])


def test_a_file_that_is_not_a_head_is_one_line(tmp_path):
    bad = tmp_path / "head.json"
    bad.write_text('{"weights": []}')
    with pytest.raises(ConfigError, match="is not a refusal probe"):
        ProbeHead.load(bad)
    with pytest.raises(ConfigError, match="no refusal probe at"):
        ProbeHead.load(tmp_path / "absent.json")


def test_prompt_variants_of_one_model_are_held_out_together():
    assert holdout_of("Llama-2-70b-chat (system prompt)") == holdout_of("Llama-2-70b-chat")
    assert holdout_of("Mistral-7B-Instruct (guardrail prompt)") == "Mistral-7B-Instruct"


def test_no_model_is_in_training_and_test(monkeypatch):
    """Each held-out model's answers are predicted by a head whose training rows hold none of
    its answers (with its prompt variants)."""
    import workbench.scoring.probe.loso as loso

    x, labels = _blobs(n_per=40)
    models = ["A", "A (variant)", "B", "C"] * (len(labels) // 4)
    frame = pd.DataFrame(
        {"model": models, "label": labels, "response": [f"r{i}" for i in range(len(labels))]}
    )
    seen = []
    real = loso.fit_head

    def spy(features, labels, *, texts, **kw):
        seen.append({holdout_of(frame.loc[frame["response"] == t, "model"].iloc[0]) for t in texts})
        return real(features, labels, texts=texts, **kw)

    monkeypatch.setattr(loso, "fit_head", spy)
    pred = leave_one_model_out(frame, x)
    assert sorted(map(sorted, seen)) == [["A", "B"], ["A", "C"], ["B", "C"]]
    assert set(pred["holdout"]) == {"A", "B", "C"}
    assert pred[["p_compliance", "p_refusal", "p_partial"]].sum(1).round(6).eq(1).all()
    rel = reliability(pred)
    assert rel["n"].sum() == len(pred) and 0 <= expected_calibration_error(pred) <= 1


def test_features_are_cached_per_text_and_settings(tmp_path):
    cache = FeatureCache(tmp_path / "f.sqlite")
    a, b = FeatureSettings(), FeatureSettings(layers=(3,))
    cache.put({cache.key(a, "hello"): np.ones(4, np.float32)})
    assert list(cache.get([cache.key(a, "hello"), cache.key(b, "hello")])) == [
        cache.key(a, "hello")
    ]


@pytest.mark.integration
def test_shipped_head_reproduces_its_recorded_predictions(embedded):
    """From a fresh clone: the head in data/ and the embedded model give the probabilities
    recorded when the head was trained, on answers written for the check."""
    head = ProbeHead.load(shipped_head_path())
    assert head.settings.model == "smollm2-135m-instruct"
    assert head.provenance["answers"] > 1000 and head.provenance["sources"]
    check = head.provenance["check"]
    probe = RefusalProbe(head, lm=embedded)
    got = probe.score([c["text"] for c in check])
    assert np.allclose(got["p_refused"], [c["p_refused"] for c in check], atol=1e-4)
    assert got["refused"].iloc[0] and not got["refused"].iloc[1]  # a refusal, an answer
    rows = add_probe_columns(pd.DataFrame({"response": [check[0]["text"], "", None]}), probe)
    assert list(rows["refused_probe"]) == [True, False, False]
    assert rows["confidence_probe"].between(-1, 1).all()
    json.dumps(head.to_dict())  # what ships is plain JSON


def test_a_prior_head_is_adjusted_not_replaced():
    """Retraining from a prior on a handful of labels keeps its classes and standardisation and
    stays near it; labels outside its classes are refused."""
    x, labels = _blobs(n_per=60)
    prior = fit_head(x, labels)
    few = [0, 1, 60, 61, 120, 121]
    head = fit_head(x[few], [labels[i] for i in few], prior=prior)
    assert head.classes == prior.classes and np.allclose(head.mean, prior.mean)
    agree = (head.probabilities(x).argmax(1) == prior.probabilities(x).argmax(1)).mean()
    assert agree > 0.9
    two = fit_head(x[:120], labels[:120])  # compliance and refusal only
    with pytest.raises(ConfigError, match="not one of the prior head's classes"):
        fit_head(x, labels, prior=two)
