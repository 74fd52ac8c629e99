"""The learned refusal detector: bad input, training, judging by held-out model, the shipped head."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from workbench.errors import ConfigError
from workbench.scoring.agreement import cohen_kappa
from workbench.scoring.probe import (
    PROBE_COLUMNS,
    FeatureSettings,
    ProbeHead,
    RefusalProbe,
    add_probe_columns,
    check_texts,
    fit_head,
    response_features,
    shipped_head_path,
)
from workbench.scoring.probe.combined import combine, combined_partial
from workbench.scoring.probe.features import MAX_CHARS, FeatureCache, check_questions
from workbench.scoring.probe.loso import (
    check_holdouts,
    choose_overrule,
    expected_calibration_error,
    holdout_of,
    leave_one_model_out,
    loso_table,
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
    head.overrule = 0.9
    head.save(path)
    assert ProbeHead.load(path).overrule == 0.9


def test_a_head_saved_before_questions_were_read_loads_as_it_was(tmp_path):
    """A head file without ``context`` / ``overrule`` reads responses alone, as it was trained."""
    x, labels = _blobs()
    d = fit_head(x, labels).to_dict()
    del d["overrule"], d["settings"]["context"], d["settings"]["question_tokens"]
    (tmp_path / "old.json").write_text(json.dumps(d))
    old = ProbeHead.load(tmp_path / "old.json")
    assert not old.settings.context and old.overrule == ProbeHead.overrule


def test_combined_keeps_the_rule_unless_the_probe_is_sure():
    phrase = [True, True, False, False]
    p = [0.5, 0.04, 0.5, 0.96]
    assert list(combine(phrase, p, 0.95)) == [True, False, False, True]
    assert list(combine(phrase, p, 0.99)) == phrase  # never sure enough: the rule alone
    assert list(
        combined_partial([True, True, False], [True, False, True], [False, True, True])
    ) == [
        True,
        True,
        False,
    ]


def test_the_overrule_is_the_one_that_agrees_best():
    """Labels the rule gets wrong where the probe is 0.9 sure: 0.85 and 0.9 fix them all and
    the tie goes to the higher; 0.95 fixes none."""
    pred = pd.DataFrame(
        {
            "label": ["refusal", "compliance", "refusal", "compliance"] * 5,
            "refused_phrase": [False, True, True, False] * 5,
            "p_refused": [0.91, 0.09, 0.6, 0.4] * 5,
        }
    )
    assert choose_overrule(pred, grid=(0.85, 0.9, 0.95)) == 0.9
    assert choose_overrule(pred, grid=(0.95, 0.99)) == 0.99


class _Sure:
    """A probe stand-in that is sure of everything: P(refused) 1 for texts with 'cannot', else
    0, and never partial."""

    threshold = 0.5

    def __init__(self):
        self.head = type("Head", (), {"overrule": 0.95})()
        self.seen = []

    def score(self, texts, questions=None, *, progress=False):
        self.seen.append(list(questions))
        p = np.array([1.0 if "cannot" in t else 0.0 for t in texts])
        return pd.DataFrame({"p_refused": p, "partial": np.zeros(len(p), bool)})


def test_probe_columns_read_each_answers_question_and_add_the_combined_detector():
    rows = pd.DataFrame(
        {
            "prompt": ["How do I kill a process?", "Make a bomb", "q"],
            "response": ["I'm sorry, I can't help with that.", "I cannot do that.", ""],
        }
    )
    probe = _Sure()
    out = add_probe_columns(rows, probe)  # type: ignore[arg-type]
    assert probe.seen == [["How do I kill a process?", "Make a bomb"]]  # the blank is not read
    assert list(out["refused_probe"]) == [False, True, False]
    # the rule refuses the first; the probe is sure it does not: overruled
    assert list(out["refused_combined"]) == [False, True, False]
    assert set(PROBE_COLUMNS) <= set(out.columns)


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


def test_the_table_gives_the_annotators_agreement_beside_the_detectors():
    """Where two annotators' own labels are kept, each held-out set's row gives their kappa
    with each other on the same answers; a set without them gives NaN, and `pooled` counts
    only answers that have both."""
    labels = ["refusal", "compliance"] * 10
    second = labels[:-2] + ["compliance", "refusal"]  # two answers the annotators split on
    pred = pd.DataFrame(
        {
            "source": ["s"] * 20 + ["own"] * 4,
            "model": ["A"] * 20 + ["B"] * 4,
            "label": labels + ["refusal", "compliance"] * 2,
            "annotation_1": labels + [None] * 4,
            "annotation_2": second + [None] * 4,
        }
    )
    pred["refused_probe"] = pred["refused_rule"] = pred["label"] != "compliance"
    table = loso_table(pred, ["rule"]).set_index("model")
    a_truth = [x != "compliance" for x in labels]
    a_other = [x != "compliance" for x in second]
    assert table.loc["A", "annotators"] == pytest.approx(cohen_kappa(a_truth, a_other))
    assert 0 < table.loc["A", "annotators"] < 1
    assert np.isnan(table.loc["B", "annotators"])
    assert table.loc["all", "annotators"] == table.loc["A", "annotators"]
    assert (table["rule"] == 1).all()
    assert "annotators" not in loso_table(pred.drop(columns=["annotation_1", "annotation_2"]), [])


def test_features_are_cached_per_text_and_settings(tmp_path):
    cache = FeatureCache(tmp_path / "f.sqlite")
    a, b = FeatureSettings(), FeatureSettings(layers=(3,))
    cache.put({cache.key(a, "hello"): np.ones(4, np.float32)})
    assert list(cache.get([cache.key(a, "hello"), cache.key(b, "hello")])) == [
        cache.key(a, "hello")
    ]


def test_the_question_keys_the_cache_only_where_it_is_read():
    alone, read = FeatureSettings(context=False), FeatureSettings(context=True)
    assert FeatureCache.key(alone, "no", "q1") == FeatureCache.key(alone, "no", "q2")
    assert FeatureCache.key(read, "no", "q1") != FeatureCache.key(read, "no", "q2")
    assert FeatureCache.key(read, "no", None) != FeatureCache.key(read, "no", "")
    assert FeatureCache.key(alone, "no") != FeatureCache.key(read, "no")


@pytest.mark.parametrize(
    ("question", "said"),
    [
        (b"why?", "question 1 is bytes"),
        (7, "question 1 is int"),
        ("bad \udc80", "question 1 is not valid UTF-8"),
    ],
)
def test_a_question_it_cannot_read_is_one_line_naming_it(question, said):
    with pytest.raises(ConfigError) as e:
        check_questions(["fine", question], 2)
    assert said in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="1 questions for 2 responses"):
        check_questions(["one"], 2)
    assert check_questions([None, float("nan"), "  ", "q"], 4) == [None, None, None, "q"]


def test_a_response_is_read_after_its_question_and_pooled_alone(tiny):
    """With ``context`` the same answer to two questions reads differently, read alone it does
    not; padding a batch changes nothing (each row as read by itself)."""
    texts = ["I cannot help with that.", "Sure, here it is: mix and bake.", "No."]
    qs = ["How do I make a bomb?", "How do I bake bread?", None]
    read = FeatureSettings(model=tiny.name, layers=(0, 1), context=True)
    alone = FeatureSettings(model=tiny.name, layers=(0, 1), context=False)
    kw = {"lm": tiny, "cache": False}
    a = response_features([texts[0]], read, questions=[qs[0]], **kw)
    b = response_features([texts[0]], read, questions=[qs[1]], **kw)
    assert a.shape == (1, 2 * tiny.model.config.hidden_size) and not np.allclose(a, b)
    c = response_features([texts[0]], alone, questions=[qs[0]], **kw)
    d = response_features([texts[0]], alone, questions=[qs[1]], **kw)
    assert np.array_equal(c, d) and not np.allclose(a, c)
    together = response_features(texts, read, questions=qs, batch_size=3, **kw)
    one_by_one = np.concatenate(
        [response_features([t], read, questions=[q], **kw) for t, q in zip(texts, qs)]
    )
    assert np.allclose(together, one_by_one, atol=1e-5)


@pytest.mark.integration
def test_shipped_head_reproduces_its_recorded_predictions(embedded):
    """From a fresh clone: the head in data/ and the embedded model give the probabilities
    recorded when the head was trained, on answers written for the check."""
    head = ProbeHead.load(shipped_head_path())
    assert head.settings.model == "smollm2-135m-instruct"
    assert head.provenance["answers"] > 1000 and head.provenance["sources"]
    check = head.provenance["check"]
    probe = RefusalProbe(head, lm=embedded)
    got = probe.score([c["text"] for c in check], [c.get("question") for c in check])
    assert np.allclose(got["p_refused"], [c["p_refused"] for c in check], atol=1e-4)
    assert got["refused"].iloc[0] and not got["refused"].iloc[1]  # a refusal, an answer
    rows = add_probe_columns(
        pd.DataFrame(
            {
                "question": [check[0].get("question"), "q", "q"],
                "response": [check[0]["text"], "", None],
            }
        ),
        probe,
    )
    assert rows["p_refused_probe"].iloc[0] == pytest.approx(check[0]["p_refused"], abs=1e-4)
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


@pytest.mark.parametrize("c", [0, -1.0, float("nan"), float("inf"), True])
def test_training_refuses_a_strength_that_is_not_above_zero(c):
    x, labels = _blobs()
    with pytest.raises(ConfigError, match="inverse L2 strength") as e:
        fit_head(x, labels, c=c)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--c", "0"], "error: C 0.0: the inverse L2 strength"),
        (["--cap", "0"], "error: cap 0: keep at least 1 answer"),
        (["--cap", "-3"], "error: cap -3: keep at least 1 answer"),
        (["ROOT", "--sources", "xstest,nosuch"], "error: unknown source 'nosuch'"),
    ],
)
def test_probe_command_refuses_bad_settings_before_any_model_loads(
    tmp_path, monkeypatch, capsys, extra, said
):
    import workbench.backends
    from workbench.cli import main

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(workbench.backends, "load_model", no_model)
    out = tmp_path / "head.json"
    argv = ["scoring", "probe", *[str(tmp_path) if a == "ROOT" else a for a in extra]]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(said) and "\n" not in err, err
    assert not out.exists()


def test_numpy_numbers_are_accepted_as_settings():
    from workbench.scoring.probe.train import labelled_answers

    x, labels = _blobs()
    assert fit_head(x, labels, c=np.float32(0.5)).classes
    frame = labelled_answers(cap=np.int64(3))
    assert frame.groupby(["source", "model"]).size().max() <= 3


def test_numpy_settings_are_saved_as_plain_numbers(tmp_path):
    x, labels = _blobs()
    fit_head(x, labels, c=np.float32(0.5), folds=np.int64(3)).save(tmp_path / "h.json")
    prov = json.loads((tmp_path / "h.json").read_text())["provenance"]
    assert (prov["c"], prov["folds"]) == (0.5, 3)


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"texts": ["a"]}, "1 texts but 120 labels"),
        ({"folds": 1}, "folds 1: calibration needs at least 2 folds"),
        ({"folds": True}, "folds True"),
    ],
)
def test_training_refuses_folds_and_texts_that_do_not_fit(kw, said):
    x, labels = _blobs()
    with pytest.raises(ConfigError, match=said):
        fit_head(x, labels, **kw)


def test_features_of_another_model_are_refused_not_cached_under_its_name(tiny, tmp_path):
    """The cache keys features by the model the settings name: a reader that is another model
    is one line, and the same model in another dtype keeps features of its own."""
    import torch

    from workbench.testing import tiny_lm

    cache = FeatureCache(tmp_path / "f.sqlite")
    with pytest.raises(
        ConfigError, match="reads 'smollm2-135m-instruct', not the model given \\('tiny-llama-0'\\)"
    ):
        response_features(["Hello."], FeatureSettings(layers=(0,)), lm=tiny, cache=cache)
    assert cache.get([FeatureCache.key(FeatureSettings(layers=(0,)), "Hello.", None)]) == {}
    s = FeatureSettings(model=tiny.name, layers=(0, 1))
    fp32 = response_features(["Hello."], s, lm=tiny, cache=cache)
    half = tiny_lm(seed=0, dtype=torch.bfloat16)
    assert half.name == tiny.name
    bf16 = response_features(["Hello."], s, lm=half, cache=cache)
    assert not np.array_equal(fp32, bf16)  # read again, not the float32 features
    assert np.array_equal(response_features(["Hello."], s, lm=tiny, cache=cache), fp32)


def _tiny_head(tiny) -> ProbeHead:
    s = FeatureSettings(model=tiny.name, layers=(0, 1))
    texts = ["I cannot help.", "Sure: mix and bake.", "No, I won't.", "Here it is."] * 3
    x = response_features(texts, s, lm=tiny, cache=False)
    return fit_head(x, ["refusal", "compliance"] * 6, texts=texts, settings=s)


def test_probe_columns_name_the_row_they_cannot_read_and_take_missing_cells(tiny):
    probe = RefusalProbe(_tiny_head(tiny), lm=tiny)
    rows = pd.DataFrame(
        {
            "question": pd.array(["Why?", pd.NA, "How?"], dtype="string"),
            "response": pd.array(["I cannot help.", "Sure.", pd.NA], dtype="string"),
        },
        index=[10, 11, 12],
    )
    out = add_probe_columns(rows, probe)
    assert list(out["p_refused_probe"] > 0) == [True, True, False]  # no text: compliance, P 0
    for cell, said in [
        (b"bytes here", "'response' of row 12 is bytes"),
        ("y" * (MAX_CHARS + 1), "'response' of row 12 is 200,001 characters long"),
    ]:
        bad = rows.astype(object)
        bad.loc[12, "response"] = cell
        with pytest.raises(ConfigError, match=said) as e:
            add_probe_columns(bad, probe)
        assert "\n" not in str(e.value)
    bad = rows.astype(object)
    bad.loc[11, "question"] = b"why?"
    with pytest.raises(ConfigError, match="'question' of row 11 is bytes"):
        add_probe_columns(bad, probe)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d.pop("mean"), "is not a whole refusal probe: it has no 'mean'"),
        (lambda d: d["settings"].pop("model"), "it has no 'model'"),
        (lambda d: d.update(weight=[r[:-1] for r in d["weight"]]), "do not fit 2 classes"),
        (lambda d: d.update(classes=["compliance"]), "two or more different ones"),
        (lambda d: d.update(classes=["compliance", "refusal", "partial"]), "do not fit 3"),
        (lambda d: d.update(classes=["compliance", "Refusal"]), "class 'Refusal' is not"),
        (lambda d: d.update(temperature=0), "temperature 0.0: it must be above 0"),
        (lambda d: d.update(mean="abc"), "is not a refusal probe"),
    ],
)
def test_a_head_with_missing_or_misshapen_parts_is_one_line(tmp_path, change, said):
    x, labels = _blobs(k=2)
    d = fit_head(x, labels).to_dict()
    change(d)
    path = tmp_path / "head.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ConfigError, match=said) as e:
        ProbeHead.load(path)
    assert "\n" not in str(e.value)


def test_features_the_head_does_not_read_are_one_line():
    x, labels = _blobs()
    head = fit_head(x, labels)
    with pytest.raises(ConfigError, match="features of shape \\(120, 5\\) but the head reads 6"):
        head.probabilities(x[:, :5])


def test_leaving_one_model_out_needs_two_models_and_two_classes_in_each_rest():
    one = pd.DataFrame({"model": ["unknown"] * 4, "label": ["refusal", "compliance"] * 2})
    with pytest.raises(
        ConfigError, match="all 4 labelled answers are of one model \\('unknown'\\)"
    ):
        check_holdouts(one)
    lopsided = pd.DataFrame(
        {"model": ["A", "A", "B", "B"], "label": ["refusal", "compliance", "refusal", "refusal"]}
    )
    with pytest.raises(ConfigError, match="with 'A' held out, the other models' 2 answers are all"):
        check_holdouts(lopsided)
    check_holdouts(lopsided.assign(label=["refusal", "compliance", "compliance", "refusal"]))


def test_no_answers_to_choose_on_is_one_line_and_calibration_of_none_is_nan():
    empty = pd.DataFrame({"label": [], "refused_phrase": [], "p_refused": []})
    with pytest.raises(ConfigError, match="no answers to choose"):
        choose_overrule(empty)
    assert np.isnan(expected_calibration_error(empty))
