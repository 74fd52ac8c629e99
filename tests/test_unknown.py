"""UnknownBench-style datasets and measures."""

import json
import math

import pandas as pd
import pytest
import torch

from workbench.errors import WorkbenchError
from workbench.unknown import (
    by_confidence,
    evaluate_unknown,
    expected_calibration_error,
    lexical_match,
    load_unknownbench,
    next_token_entropy,
    parse_confidence,
    prompt_perplexity,
    summarize_unknown,
)
from workbench.unknown.datasets import UnknownItem
from workbench.unknown.names import made_up_names


@pytest.mark.parametrize(
    "reply, value",
    [
        ("7", 7),
        ("10", 10),
        ("0", 0),
        ("I'd say 8.", 8),
        ("7/10", 7),
        ("9 out of 10", 9),
        ("seven", 7),
        ("Confidence: 3", 3),
        ("", None),
        ("I am not sure.", None),
        ("11", None),
        ("3.5", 4),
        ("The answer is Paris", None),
        ("100%", None),
        ("0.0", 0),
        ("10/", 10),
    ],
)
def test_confidence_parsing_counts_garbage_as_none(reply, value):
    assert parse_confidence(reply) == value


@pytest.mark.parametrize(
    "response, gold, hit",
    [
        ("The capital is Paris.", ["Paris"], True),
        ("It's in the People's Republic of China!", ["people's republic of china", "china"], True),
        ("She was a writer and poet.", ["author", "writer"], True),
        ("He was a painter.", ["writer"], False),
        ("Parisian food is great", ["Paris"], False),
        ("An author", ["the author"], True),
    ],
)
def test_lexical_match(response, gold, hit):
    assert lexical_match(response, gold) is hit


def test_entropy_matches_a_hand_computed_distribution(tiny):
    from workbench.models import render_chat

    prompts = ["What is a Zorblan?", "Tell me about rivers in a much longer question, please."]
    got = next_token_entropy(tiny, prompts, batch_size=8)
    for p, e in zip(prompts, got):
        ids = tiny.tokenizer(
            render_chat(tiny.tokenizer, p), return_tensors="pt", add_special_tokens=False
        )["input_ids"]
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
    assert a == made_up_names(30, "animals", words, seed=1) and a != made_up_names(
        30, "animals", words, seed=2
    )
    assert len(set(a)) == 30 and not {n.lower() for n in a} & words
    assert all(len(n.split()) == 2 for n in made_up_names(5, "people", words))


def test_shipped_datasets_have_both_partitions_and_no_real_words():
    from workbench.paths import repo_root

    ds = load_unknownbench(repo_root() / "data" / "unknown")
    for task in ("NEC", "FalseQA", "RefuNQ"):
        assert (
            len(ds.select(task, "answerable")) >= 30 and len(ds.select(task, "unanswerable")) >= 30
        )
    assert all(i.gold for i in ds.select("RefuNQ", "answerable"))
    assert "WordNet 3.0 Copyright" in ds.manifest["license"]


def test_rebuild_is_deterministic_and_fake_names_absent_from_wordnet(tmp_path, wordnet):
    from workbench.taxonomy.wordnet import WordNet
    from workbench.unknown.datasets import build_unknown_dataset, save_unknown_dataset

    a = save_unknown_dataset(build_unknown_dataset(), tmp_path / "a")
    b = save_unknown_dataset(build_unknown_dataset(), tmp_path / "b")
    ma, mb = (json.loads((d / "manifest.json").read_text()) for d in (a, b))
    assert ma["content_hash"] == mb["content_hash"]
    from workbench.paths import repo_root

    shipped = json.loads((repo_root() / "data" / "unknown" / "manifest.json").read_text())
    assert ma["content_hash"] == shipped["content_hash"], (
        "data/unknown is stale: python -m workbench unknown build"
    )
    vocab = WordNet().vocabulary()
    fakes = [i.prompt for i in load_unknownbench(a).select("NEC", "unanswerable")]
    names = [w.strip("?.,'s") for p in fakes for w in p.split()[1:] if w[:1].isupper() and w != "I"]
    assert len(names) >= len(fakes) and not [n for n in names if n.lower() in vocab]


def test_loader_reads_the_published_shape(tmp_path):
    for task in ("NEC", "FalseQA", "RefuNQ"):
        (tmp_path / task).mkdir()
    (tmp_path / "NEC" / "NEC_unanswerable.json").write_text(
        json.dumps({"prompt": "What is a Glorbix?", "label": "NEC", "category": "animals"}) + "\n"
    )
    (tmp_path / "NEC" / "NEC_answerable.json").write_text(
        json.dumps({"prompt": "What is a cat?", "label": 1, "category": "animals"}) + "\n"
    )
    (tmp_path / "FalseQA" / "FalseQA_test.json").write_text(
        json.dumps({"prompt": "Why do snakes bark?", "label": 1})
        + "\n"
        + json.dumps({"prompt": "Why do dogs bark?", "label": 0})
        + "\n"
    )
    (tmp_path / "RefuNQ" / "RefuNQ_answerable.json").write_text(
        json.dumps({"prompt": "Capital of France?", "label": ["Paris"]}) + "\n"
    )
    ds = load_unknownbench(tmp_path, allow_partial=True)  # a few items, not the release
    assert [i.partition for i in ds.select("FalseQA")] == ["unanswerable", "answerable"]
    assert ds.select("RefuNQ")[0].gold == ("Paris",)
    assert ds.select("NEC", "unanswerable")[0].category == "animals"
    (tmp_path / "RefuNQ" / "RefuNQ_answerable.json").write_text("{broken\n")
    with pytest.raises(WorkbenchError, match="line 1: malformed item"):
        load_unknownbench(tmp_path, allow_partial=True)


def test_evaluate_and_summarize_on_a_tiny_model(tiny):
    items = [
        UnknownItem("Capital of France?", "RefuNQ", "answerable", gold=("Paris",)),
        UnknownItem("Capital of Glorbia?", "RefuNQ", "unanswerable", label="NEC"),
        UnknownItem("Why do dogs bark?", "FalseQA", "answerable", label=0),
    ]
    rows = evaluate_unknown(tiny, items, max_new_tokens=4)
    assert list(rows.columns[:3]) == ["task", "partition", "category"]
    assert rows["correct"].tolist()[1:] == [None, None]
    s = summarize_unknown(rows)
    assert set(zip(s.task, s.partition)) == {
        ("RefuNQ", "answerable"),
        ("RefuNQ", "unanswerable"),
        ("FalseQA", "answerable"),
    }
    assert (s["unparsed_confidence"] >= 0).all()
    # the workbench's prompts: its phrase detector; the paper's prompts: the paper's rule, the
    # phrase detector beside it
    assert set(rows["prompt_preset"]) == {"workbench"} and set(s["detector"]) == {"refused_phrase"}
    rows = rows.assign(
        refused_unknownbench=[True, False, False],
        refused_phrase=[False, True, True],
        prompt_preset="paper",
    )
    s = summarize_unknown(rows).set_index(["task", "partition"])
    assert set(s["detector"]) == {"refused_unknownbench"}
    assert s.loc[("RefuNQ", "answerable"), "refusal_rate"] == 1.0
    assert s.loc[("RefuNQ", "answerable"), "phrase_refusal_rate"] == 0.0
    ours = summarize_unknown(rows.assign(prompt_preset="workbench")).set_index(
        ["task", "partition"]
    )
    assert ours.loc[("RefuNQ", "answerable"), "refusal_rate"] == 0.0
    assert set(summarize_unknown(rows, "refused_phrase")["detector"]) == {"refused_phrase"}
    levels = by_confidence(rows.assign(confidence=[3, 3, 3], correct=[True, None, None]))
    assert levels["refusal_rate"].tolist() == [pytest.approx(1 / 3)]


def test_expected_calibration_error_by_hand():
    rows = pd.DataFrame({"confidence": [10, 10, 0, 5], "correct": [True, False, False, None]})
    # level 10: accuracy 0.5 against 1.0 (weight 2/3); level 0: 0 against 0 (weight 1/3)
    assert expected_calibration_error(rows) == pytest.approx(2 / 3 * 0.5)


def test_unknownbench_keyword_rule_is_the_papers():
    from workbench.scoring import (
        UNKNOWNBENCH_KEYWORDS,
        unknownbench_correct,
        unknownbench_refusal,
    )

    assert len(UNKNOWNBENCH_KEYWORDS) == 13
    assert unknownbench_refusal("No, that is not a real animal.")
    assert unknownbench_refusal("The origin is UNCLEAR.")
    assert unknownbench_refusal("I don't know.")
    assert not unknownbench_refusal(
        "I don’t know."
    )  # a typographic apostrophe: no match, as theirs
    assert not unknownbench_refusal("Nothing is known about the noon knots.")  # whole words only
    assert not unknownbench_refusal("") and not unknownbench_refusal(None)
    assert unknownbench_correct("It was Real Madrid.", ["Real Madrid"])
    assert not unknownbench_correct("It was real madrid.", ["Real Madrid"])  # case-sensitive


def test_paper_prompts_and_logprob_confidence_are_recorded(tiny):
    from workbench.unknown import PROMPTS, number_confidence
    from workbench.unknown.measures import PAPER_ANSWER_PROMPT

    items = [UnknownItem("Capital of France?", "RefuNQ", "answerable", gold=("Paris",))]
    rows = evaluate_unknown(tiny, items, max_new_tokens=3, prompts="paper")
    assert rows["prompt_preset"].tolist() == ["paper"]
    assert PROMPTS["paper"].answer_prompt("Q?") == PAPER_ANSWER_PROMPT.replace("{question}", "Q?")
    assert (
        PROMPTS["paper"]
        .answer_prompt("Q?")
        .startswith("Answer the given question in no more than one sentence.")
    )
    assert 0 <= rows["confidence_logprob"][0] <= 10 and 0 < rows["confidence_mass"][0] <= 1
    with pytest.raises(WorkbenchError, match="unknown prompt preset 'papers'"):
        evaluate_unknown(tiny, items, prompts="papers")
    [c] = number_confidence(tiny, ["Rate it: "])
    assert abs(sum(c.probs) - 1) < 1e-6 and c.mean == pytest.approx(
        sum(k * p for k, p in enumerate(c.probs))
    )


def test_number_confidence_matches_a_full_forward_pass(tiny):
    """Each number's probability is its token sequence's, minus the sequences it starts."""
    import math

    import torch

    from workbench.unknown import number_confidence

    text = "<|im_start|>user\nHow sure?<|im_end|>\n<|im_start|>assistant\n"
    [c] = number_confidence(tiny, [text])
    tok = tiny.tokenizer

    def seq_prob(s):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        cont = tok(s, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(tiny.model(torch.tensor([ids + cont])).logits[0].float(), -1)
        return math.exp(sum(float(logp[len(ids) - 1 + i, t]) for i, t in enumerate(cont)))

    raw = {k: seq_prob(str(k)) + seq_prob(f" {k}") for k in range(11)}
    raw[1] -= raw[10]  # the byte-level tiny tokenizer spells "10" as "1", "0"
    total = sum(raw.values())
    assert c.mass == pytest.approx(total, rel=1e-4)
    assert c.probs == pytest.approx(tuple(raw[k] / total for k in range(11)), rel=1e-4)
    # batch invariance
    assert number_confidence(tiny, [text, "x" * 40, text])[2].probs == pytest.approx(
        c.probs, rel=1e-5
    )


def test_run_unknown_resumes_by_chunk_without_losing_or_repeating_rows(tiny, tmp_path, monkeypatch):
    import workbench.unknown.measures as m
    from workbench.unknown import run_unknown

    items = [UnknownItem(f"What is thing number {i}?", "NEC", "answerable") for i in range(7)]
    calls, kill = [], [True]
    real = m.evaluate_unknown

    def counting(lm, part, *a, **k):
        calls.append(len(part))
        if len(calls) == 2 and kill[0]:
            kill[0] = False
            raise KeyboardInterrupt  # killed while the second chunk runs
        return real(lm, part, *a, **k)

    monkeypatch.setattr(m, "evaluate_unknown", counting)
    with pytest.raises(KeyboardInterrupt):
        run_unknown(tiny, items, tmp_path, chunk_size=3, key="k", max_new_tokens=2)
    assert len(list((tmp_path / "chunks").glob("*.parquet"))) == 1
    calls.clear()
    rows = run_unknown(tiny, items, tmp_path, chunk_size=3, key="k", max_new_tokens=3)
    assert calls == [3, 3, 1]  # other settings: nothing reused
    calls.clear()
    again = run_unknown(tiny, items, tmp_path, chunk_size=3, key="k", max_new_tokens=3)
    assert calls == [] and again.equals(rows)
    assert rows["prompt"].tolist() == [i.prompt for i in items]
    calls.clear()
    run_unknown(tiny, items, tmp_path, chunk_size=3, key="k", max_new_tokens=2)
    assert calls == [3, 1]  # resumed: the chunk finished before the kill is kept


def test_run_unknown_sets_a_damaged_chunk_aside_and_measures_it_again(tiny, tmp_path, capsys):
    from workbench.unknown import run_unknown

    items = [UnknownItem(f"What is thing number {i}?", "NEC", "answerable") for i in range(5)]
    rows = run_unknown(tiny, items, tmp_path, chunk_size=3, key="k", max_new_tokens=2)
    chunk = next(p for p in (tmp_path / "chunks").glob("*.parquet") if len(pd.read_parquet(p)) == 3)
    chunk.write_bytes(chunk.read_bytes()[: len(chunk.read_bytes()) // 2])  # cut by a crash
    again = run_unknown(tiny, items, tmp_path, chunk_size=3, key="k", max_new_tokens=2)
    err = capsys.readouterr().err
    assert f"warning: {chunk} is damaged" in err and "that chunk is measured again" in err
    assert (chunk.parent / (chunk.name + ".damaged")).is_file()
    cols = ["prompt", "response"]
    assert again[cols].equals(rows[cols])


def test_loader_records_source_and_content_hash(tmp_path):
    (tmp_path / "NEC").mkdir()
    f = tmp_path / "NEC" / "NEC_answerable.json"
    f.write_text(json.dumps({"prompt": "What is a cat?", "label": 0, "category": "animals"}) + "\n")
    a = load_unknownbench(tmp_path, allow_partial=True)
    assert a.source == str(tmp_path.resolve()) and len(a.content_hash) == 64
    f.write_text(json.dumps({"prompt": "What is a dog?", "label": 0, "category": "animals"}) + "\n")
    assert load_unknownbench(tmp_path, allow_partial=True).content_hash != a.content_hash


# -- loads that never shrink silently (the published release's size, workbench.releases) ------


def test_the_shipped_set_loads_whole_against_its_own_manifest():
    from workbench.paths import repo_root

    shipped = load_unknownbench(
        repo_root() / "data" / "unknown"
    )  # ours: checked against its manifest
    assert shipped.release_load.startswith("whole") and len(shipped.items) == 446


def test_a_release_of_the_published_size_loads_whole_and_each_shrinking_is_an_error(tmp_path):
    import shutil

    from unknown_release import write_unknownbench_release
    from workbench.releases import ReleaseError

    root = write_unknownbench_release(tmp_path / "ub")
    ds = load_unknownbench(root)
    assert len(ds.items) == 13319 and ds.release_load == "whole"
    assert {i.release_load for i in ds.items} == {"whole"}

    def fails(match):
        with pytest.raises(ReleaseError, match=match) as e:
            load_unknownbench(root)
        assert "\n" not in str(e.value) and "allow_partial=True" in str(e.value)

    # one file deleted: 11,247 items
    nec = (root / "NEC" / "NEC_answerable.json").read_text()
    (root / "NEC" / "NEC_answerable.json").unlink()
    fails(r"incomplete .*: 11,247 of 13,319 items; missing NEC/NEC_answerable\.json;")
    (root / "NEC" / "NEC_answerable.json").write_text(nec)
    # a file cut at a line boundary: 1,000 of its 2,078 items
    full = (root / "NEC" / "NEC_unanswerable.json").read_text()
    (root / "NEC" / "NEC_unanswerable.json").write_text("".join(full.splitlines(True)[:1000]))
    fails(r"12,241 of 13,319 items; NEC/NEC_unanswerable\.json has 1,000 of 2,078 items;")
    (root / "NEC" / "NEC_unanswerable.json").write_text(full)
    # RefuNQ/ deleted: 8,880 items, both files named; allowed, every item (and row) says so
    shutil.rmtree(root / "RefuNQ")
    fails(
        r"8,880 of 13,319 items; missing RefuNQ/RefuNQ_answerable\.json, RefuNQ/RefuNQ_unanswerable\.json;"
    )
    part = load_unknownbench(root, allow_partial=True)
    assert len(part.items) == 8880
    assert part.release_load == (
        "partial: 8,880 of 13,319 items; missing RefuNQ/RefuNQ_answerable.json, "
        "RefuNQ/RefuNQ_unanswerable.json"
    )
    assert {i.release_load for i in part.items} == {part.release_load}


def test_a_malformed_gold_answer_is_an_error_naming_file_and_line(tmp_path):
    from unknown_release import write_unknownbench_release

    root = write_unknownbench_release(tmp_path / "ub")
    path = root / "RefuNQ" / "RefuNQ_answerable.json"
    lines = path.read_text().splitlines(True)
    lines[4] = json.dumps({"prompt": "Capital of France?", "label": "Paris"}) + "\n"  # not a list
    path.write_text("".join(lines))
    with pytest.raises(
        WorkbenchError,
        match=r"RefuNQ_answerable\.json, line 5: malformed item: gold "
        r"answers must be a list of strings, got str 'Paris'",
    ):
        load_unknownbench(root)
    lines[4] = json.dumps({"prompt": "Capital of France?", "label": []}) + "\n"
    path.write_text("".join(lines))
    with pytest.raises(
        WorkbenchError, match=r"line 5: malformed item: gold answers must be a non-empty"
    ):
        load_unknownbench(root, allow_partial=True)  # malformed is never allowed
    nec = root / "NEC" / "NEC_answerable.json"
    nec.write_text(nec.read_text().replace('"label": 0', '"label": "maybe"', 1))
    lines[4] = json.dumps({"prompt": "Capital of France?", "label": ["Paris"]}) + "\n"
    path.write_text("".join(lines))
    with pytest.raises(
        WorkbenchError, match=r"NEC_answerable\.json, line 1: malformed item: label must be"
    ):
        load_unknownbench(root)


def test_a_newer_release_is_an_error_saying_how_to_allow_it(tmp_path, capsys):
    from unknown_release import write_unknownbench_release
    from workbench.cli import main as releases_main
    from workbench.releases import ReleaseError, published

    counts = {rel: f["items"] for rel, f in published("unknownbench").files.items()}
    root = write_unknownbench_release(tmp_path / "ub", {**counts, "NEC/NEC_answerable.json": 2100})
    with pytest.raises(
        ReleaseError,
        match=r"differs from the published release .*NEC/NEC_answerable\.json "
        r"has 2,100 where the manifest lists 2,072 items; if this is a "
        r"newer release, describe it with `python -m workbench releases "
        r"describe unknownbench ",
    ):
        load_unknownbench(root)
    assert releases_main(["releases", "check", "unknownbench", str(root)]) == 2
    assert "differs from the published release" in capsys.readouterr().err
    assert releases_main(["releases", "describe", "unknownbench", str(root)]) == 0
    ds = load_unknownbench(root)
    assert (
        len(ds.items) == 13347
        and ds.release_load == f"whole (as {root / 'release_manifest.json'} lists)"
    )
    (root / "FalseQA" / "FalseQA_answerable.json").unlink()  # against its own description now
    with pytest.raises(
        ReleaseError,
        match=r"incomplete against .*release_manifest\.json: 10,982 of "
        r"13,347 items; missing FalseQA/FalseQA_answerable\.json",
    ):
        load_unknownbench(root)


def test_rows_record_how_the_release_loaded(tiny, tmp_path):
    from unknown_release import write_unknownbench_release

    root = write_unknownbench_release(tmp_path / "ub", {"RefuNQ/RefuNQ_answerable.json": 2})
    (root / "release_manifest.json").unlink(missing_ok=True)
    ds = load_unknownbench(root, allow_partial=True)
    rows = evaluate_unknown(tiny, ds.items[:1], max_new_tokens=2)
    assert rows["release_load"].tolist() == [ds.release_load] and ds.release_load.startswith(
        "partial: 2 of"
    )


def test_a_data_file_not_utf8_or_a_damaged_manifest_is_one_line(tmp_path):
    """Both were tracebacks (UnicodeDecodeError, JSONDecodeError) before."""
    from unknown_release import write_unknownbench_release

    root = write_unknownbench_release(tmp_path / "ub")
    path = root / "NEC" / "NEC_answerable.json"
    raw = path.read_bytes()
    path.write_bytes(
        raw.replace(b"Question", b"Qu\xe9stion", 1) if b"Question" in raw else b"\xe9" + raw
    )
    with pytest.raises(
        WorkbenchError, match=r"NEC_answerable.json: not UTF-8 text \(byte 0xe9"
    ) as e:
        load_unknownbench(root)
    assert "\n" not in str(e.value)
    path.write_bytes(raw)
    (root / "manifest.json").write_text('{"counts": {"NEC/answerable": 3,')
    with pytest.raises(WorkbenchError, match=r"manifest.json: not a manifest the workbench wrote"):
        load_unknownbench(root)
    (root / "manifest.json").write_text('{"counts": {"NEC/answerable": "three"}}')
    with pytest.raises(WorkbenchError, match=r"count of 'NEC/answerable' is 'three'"):
        load_unknownbench(root)
