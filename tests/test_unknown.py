"""UnknownBench-style datasets and measures."""

import json
import math

import pandas as pd
import pytest
import torch

from workbench.errors import WorkbenchError
from workbench.unknown import (evaluate_unknown, expected_calibration_error, lexical_match,
                               load_unknownbench, next_token_entropy, parse_confidence,
                               prompt_perplexity, summarize_unknown)
from workbench.unknown.datasets import UnknownItem
from workbench.unknown.names import made_up_names


@pytest.mark.parametrize("reply, value", [
    ("7", 7), ("10", 10), ("0", 0), ("I'd say 8.", 8), ("7/10", 7), ("9 out of 10", 9), ("seven", 7),
    ("Confidence: 3", 3), ("", None), ("I am not sure.", None), ("11", None), ("3.5", 4),
    ("The answer is Paris", None), ("100%", None), ("0.0", 0), ("10/", 10),
])
def test_confidence_parsing_counts_garbage_as_none(reply, value):
    assert parse_confidence(reply) == value


@pytest.mark.parametrize("response, gold, hit", [
    ("The capital is Paris.", ["Paris"], True),
    ("It's in the People's Republic of China!", ["people's republic of china", "china"], True),
    ("She was a writer and poet.", ["author", "writer"], True),
    ("He was a painter.", ["writer"], False),
    ("Parisian food is great", ["Paris"], False),
    ("An author", ["the author"], True),
])
def test_lexical_match(response, gold, hit):
    assert lexical_match(response, gold) is hit


def test_entropy_matches_a_hand_computed_distribution(tiny):
    from workbench.models import render_chat

    prompts = ["What is a Zorblan?", "Tell me about rivers in a much longer question, please."]
    got = next_token_entropy(tiny, prompts, batch_size=8)
    for p, e in zip(prompts, got):
        ids = tiny.tokenizer(render_chat(tiny.tokenizer, p), return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            probs = torch.softmax(tiny.model(ids).logits[0, -1].double(), -1)
        assert e == pytest.approx(float(-(probs * probs.log()).sum()), rel=1e-4)
    assert next_token_entropy(tiny, prompts[:1])[0] == pytest.approx(got[0], rel=1e-4)


def test_perplexity_matches_a_hand_computed_nll(tiny):
    texts = ["What is a Zorblan?", "a b"]
    got = prompt_perplexity(tiny, texts, batch_size=8)
    for t, ppl in zip(texts, got):
        ids = tiny.tokenizer(t, return_tensors="pt")["input_ids"][0]
        with torch.no_grad():
            logp = torch.log_softmax(tiny.model(ids[None]).logits[0].double(), -1)
        nll = [-logp[i, ids[i + 1]].item() for i in range(len(ids) - 1)]
        assert ppl == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-4)
    assert prompt_perplexity(tiny, texts[1:])[0] == pytest.approx(got[1], rel=1e-4)


def test_made_up_names_are_not_words_and_are_deterministic():
    words = {"banana", "river", "zorb"}
    a = made_up_names(30, "animals", words, seed=1)
    assert a == made_up_names(30, "animals", words, seed=1) and a != made_up_names(30, "animals", words, seed=2)
    assert len(set(a)) == 30 and not {n.lower() for n in a} & words
    assert all(len(n.split()) == 2 for n in made_up_names(5, "people", words))


def test_shipped_datasets_have_both_partitions_and_no_real_words():
    from workbench.paths import repo_root

    ds = load_unknownbench(repo_root() / "data" / "unknown")
    for task in ("NEC", "FalseQA", "RefuNQ"):
        assert len(ds.select(task, "answerable")) >= 30 and len(ds.select(task, "unanswerable")) >= 30
    assert all(i.gold for i in ds.select("RefuNQ", "answerable"))
    assert "WordNet 3.0 Copyright" in ds.manifest["license"]


def test_rebuild_is_deterministic_and_fake_names_absent_from_wordnet(tmp_path):
    from workbench.taxonomy.wordnet import WordNet, find_wordnet_dir
    from workbench.unknown.datasets import build_unknown_dataset, save_unknown_dataset

    try:
        find_wordnet_dir()
    except WorkbenchError as e:
        pytest.skip(str(e))
    a = save_unknown_dataset(build_unknown_dataset(), tmp_path / "a")
    b = save_unknown_dataset(build_unknown_dataset(), tmp_path / "b")
    ma, mb = (json.loads((d / "manifest.json").read_text()) for d in (a, b))
    assert ma["content_hash"] == mb["content_hash"]
    from workbench.paths import repo_root

    shipped = json.loads((repo_root() / "data" / "unknown" / "manifest.json").read_text())
    assert ma["content_hash"] == shipped["content_hash"], "data/unknown is stale: python -m workbench.unknown build"
    vocab = WordNet().vocabulary()
    fakes = [i.prompt for i in load_unknownbench(a).select("NEC", "unanswerable")]
    names = [w.strip("?.,'s") for p in fakes for w in p.split()[1:] if w[:1].isupper() and w != "I"]
    assert len(names) >= len(fakes) and not [n for n in names if n.lower() in vocab]


def test_loader_reads_the_published_shape(tmp_path):
    for task in ("NEC", "FalseQA", "RefuNQ"):
        (tmp_path / task).mkdir()
    (tmp_path / "NEC" / "NEC_unanswerable.json").write_text(
        json.dumps({"prompt": "What is a Glorbix?", "label": "NEC", "category": "animals"}) + "\n")
    (tmp_path / "NEC" / "NEC_answerable.json").write_text(
        json.dumps({"prompt": "What is a cat?", "label": 1, "category": "animals"}) + "\n")
    (tmp_path / "FalseQA" / "FalseQA_test.json").write_text(
        json.dumps({"prompt": "Why do snakes bark?", "label": 1}) + "\n" +
        json.dumps({"prompt": "Why do dogs bark?", "label": 0}) + "\n")
    (tmp_path / "RefuNQ" / "RefuNQ_answerable.json").write_text(
        json.dumps({"prompt": "Capital of France?", "label": ["Paris"]}) + "\n")
    ds = load_unknownbench(tmp_path)
    assert [i.partition for i in ds.select("FalseQA")] == ["unanswerable", "answerable"]
    assert ds.select("RefuNQ")[0].gold == ("Paris",)
    assert ds.select("NEC", "unanswerable")[0].category == "animals"
    (tmp_path / "RefuNQ" / "RefuNQ_answerable.json").write_text("{broken\n")
    with pytest.raises(WorkbenchError, match="line 1: malformed item"):
        load_unknownbench(tmp_path)


def test_evaluate_and_summarize_on_a_tiny_model(tiny):
    items = [UnknownItem("Capital of France?", "RefuNQ", "answerable", gold=("Paris",)),
             UnknownItem("Capital of Glorbia?", "RefuNQ", "unanswerable", label="NEC"),
             UnknownItem("Why do dogs bark?", "FalseQA", "answerable", label=0)]
    rows = evaluate_unknown(tiny, items, max_new_tokens=4)
    assert list(rows.columns[:3]) == ["task", "partition", "category"]
    assert rows["correct"].tolist()[1:] == [None, None]
    s = summarize_unknown(rows)
    assert set(zip(s.task, s.partition)) == {("RefuNQ", "answerable"), ("RefuNQ", "unanswerable"),
                                             ("FalseQA", "answerable")}
    assert (s["unparsed_confidence"] >= 0).all()


def test_expected_calibration_error_by_hand():
    rows = pd.DataFrame({"confidence": [10, 10, 0, 5], "correct": [True, False, False, None]})
    # level 10: accuracy 0.5 against 1.0 (weight 2/3); level 0: 0 against 0 (weight 1/3)
    assert expected_calibration_error(rows) == pytest.approx(2 / 3 * 0.5)
