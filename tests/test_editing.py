"""Categorical editing: data, the taxi loader, choice scoring, metrics, exact restoration."""

import json

import pandas as pd
import pytest
import torch

from taxi_release import taxi_rows, write_taxi_release
from workbench.editing import (
    FT,
    IKE,
    ROME,
    build_edit_queries,
    choice_logprobs,
    edit_metrics,
    edits_from_categories,
    evaluate_editor,
    get_editor,
    load_categories,
    load_taxi,
    parse_edit,
)
from workbench.errors import ConfigError, WorkbenchError


def test_shipped_categories_make_edits_with_changed_and_unchanged_properties():
    data = load_categories()
    assert set(data["groups"]) == {
        "animals",
        "plants",
        "foods",
        "drinks",
        "vehicles",
        "instruments",
    }
    edits = edits_from_categories(data)
    # 18 categories x 4 subjects x 2 other categories of the group
    assert len(edits) == 18 * 4 * 2
    assert {e.token_type for e in edits} == {"typical", "rare"}
    q = build_edit_queries(data, [e for e in edits if e.label == "Labrador -> cat"])
    rows = q.set_index("property")
    assert (
        rows.loc["category", "answer_fwd"] == "cat"
        and rows.loc["category", "orig_answer_fwd"] == "dog"
    )
    assert rows.loc["sound", "answer_changed"] and rows.loc["sound", "answer_fwd"] == "meow"
    assert not rows.loc["legs", "answer_changed"] and rows.loc["legs", "answer_fwd"] == "four"
    assert all(a in c for a, c in zip(q["answer_fwd"], q["fwd_choices"]))


def test_taxi_loader_reads_column_oriented_json(tmp_path):
    q = build_edit_queries(load_categories(), edits_from_categories(load_categories())[:2])
    p = tmp_path / "edits-evaluation.json"
    q.to_json(p, orient="columns")
    back = load_taxi(p, allow_partial=True)  # two edits of ours, not taxi's release
    assert (
        back["release_load"].str.startswith("partial: edits-evaluation.json has 10 of 5,560").all()
    )
    back = back.drop(columns="release_load")
    assert back.shape == q.shape and list(back["edit"]) == list(q["edit"])
    assert back["fwd_choices"][0] == q["fwd_choices"][0]
    p.write_text(json.dumps({"entity": {"0": "x"}}))
    with pytest.raises(WorkbenchError, match="missing columns"):
        load_taxi(p)
    assert parse_edit("Siamese -> dog") == ("Siamese", "dog")
    with pytest.raises(WorkbenchError):
        parse_edit("Siamese is a dog")


@pytest.mark.parametrize("norm", ["none", "token", "byte"])
def test_choice_scores_match_a_full_forward_and_do_not_depend_on_the_batch(tiny, norm):
    prompts = ["A Labrador is a kind of", "The sound a cat makes is a"]
    choices = [["dog", "cat", "cow"], ["meow", "bark"]]
    got = choice_logprobs(tiny, prompts, choices, norm, batch_size=16)
    tok = tiny.tokenizer
    for p, cs, scores in zip(prompts, choices, got):
        for c, s in zip(cs, scores):
            pi = tok(p)["input_ids"]
            ci = tok(" " + c, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                logp = torch.log_softmax(tiny.model(torch.tensor([pi + ci])).logits[0].float(), -1)
            total = sum(logp[len(pi) - 1 + j, t].item() for j, t in enumerate(ci))
            expected = total / {"none": 1, "token": len(ci), "byte": len(c.encode())}[norm]
            assert s == pytest.approx(expected, abs=1e-4)
    assert choice_logprobs(tiny, prompts[1:], choices[1:], norm)[0] == pytest.approx(
        got[1], abs=1e-4
    )
    with pytest.raises(ValueError):
        choice_logprobs(tiny, prompts, choices, "word")


# layer 0 of the 2-layer tiny model: a later layer must read the edited position
@pytest.mark.parametrize(
    "editor", [FT(layer=0, steps=3), ROME(layer=0, corpus=["a b c", "the dog"], steps=3)]
)
def test_weight_editors_restore_the_original_weights_exactly(tiny, editor):
    before = {k: v.clone() for k, v in tiny.model.state_dict().items()}
    edited = editor.edit(tiny, "Labrador", "cat")
    changed = [k for k, v in tiny.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed == ["model.layers.0.mlp.down_proj.weight"]
    edited.restore()
    assert all(torch.equal(v, before[k]) for k, v in tiny.model.state_dict().items())


def test_ike_is_a_prefix_and_unknown_editors_are_named(tiny):
    e = IKE().edit(tiny, "Labrador", "cat")
    assert e.prefix == "Imagine that a Labrador is a kind of cat. "
    with pytest.raises(ConfigError, match="unknown editor 'memit'"):
        get_editor("memit")


def test_metrics_on_a_hand_made_example():
    def r(prop, changed, direction, correct, tt="typical"):
        return {
            "editor": "x",
            "edit": "a -> b",
            "property": prop,
            "answer_changed": changed,
            "direction": direction,
            "token_type": tt,
            "group": "g",
            "correct": correct,
            "chance": 0.5,
        }

    scored = pd.DataFrame(
        [
            r("category", True, "forward", True),
            r("category", True, "reverse", False),
            r("sound", True, "forward", True),
            r("food", True, "forward", False),
            r("legs", False, "forward", True),
            r("legs", False, "reverse", True, "rare"),
        ]
    )
    m = edit_metrics(scored).set_index(["metric", "subset"])["value"]
    assert m[("edit_success", "overall")] == 0.5
    assert m[("edit_success", "direction=forward")] == 1.0
    assert m[("consistency", "overall")] == 0.5
    assert m[("invariance", "overall")] == 1.0
    assert m[("property_success", "overall")] == 0.75
    assert m[("invariance", "token_type=rare")] == 1.0


def test_evaluate_editor_scores_every_query_and_restores(tiny):
    data = load_categories()
    q = build_edit_queries(data, edits_from_categories(data)[:2])
    before = {k: v.clone() for k, v in tiny.model.state_dict().items()}
    scored = evaluate_editor(tiny, FT(layer=0, steps=2), q)
    assert len(scored) == 2 * len(q) and set(scored["direction"]) == {"forward", "reverse"}
    assert all(torch.equal(v, before[k]) for k, v in tiny.model.state_dict().items())


def test_taxi_release_shape_loads_and_is_scored_as_taxi_defines(tiny, tmp_path):
    p = write_taxi_release(tmp_path)  # with the manifest that says this small release is whole
    q = load_taxi(p)
    assert set(q["release_load"]) == {f"whole (as {tmp_path / 'release_manifest.json'} lists)"}
    assert len(q) == 3 and q["fwd_choices"][0] == ["dog", "cat", "cow"]
    from workbench.editing import split_query

    assert split_query("a <subj> is a kind of <answer>", "<answer>", subj="Siamese") == (
        "a Siamese is a kind of",
        "",
    )
    assert split_query("a <subj> is a kind of <answer>", "<subj>", answer="dog") == (
        "a",
        " is a kind of dog",
    )
    assert split_query("<answer> is a sound made by a <subj>", "<subj>", answer="bark") == (
        "bark is a sound made by a",
        "",
    )
    scored = evaluate_editor(tiny, IKE(), q)
    assert set(scored["release_load"]) == set(
        q["release_load"]
    )  # every scored row records the load
    rev = scored[scored["direction"] == "reverse"]
    assert set(rev["answer"]) == {"Siamese", "Holstein"}  # '<subj>' resolved to the subject
    m = edit_metrics(scored).set_index(["metric", "subset"])["n"]
    assert m[("edit_success", "overall")] == 2  # category_membership counts as the edit itself
    assert m[("consistency", "overall")] == 2 and m[("invariance", "overall")] == 2
    assert m[("invariance", "token_type=rare")] == 2


def test_mid_sentence_slots_are_scored_in_place(tiny):
    # the choice goes into the slot and the rest of the sentence is scored after it
    got = choice_logprobs(
        tiny, ["a"], [["Siamese", "Beagle"]], "none", suffixes=[" is a kind of dog"]
    )
    full = choice_logprobs(
        tiny, ["a"], [["Siamese is a kind of dog", "Beagle is a kind of dog"]], "none"
    )
    assert got[0] == pytest.approx(full[0], abs=1e-5)


def test_sample_edits_draws_per_superordinate_category():
    from workbench.editing import sample_edits

    q = pd.DataFrame(
        taxi_rows() + [{**taxi_rows()[0], "edit": "Tuna -> bird", "superordinate_category": "fish"}]
    )
    picked = sample_edits(q, 1, seed=0)
    assert picked.groupby("superordinate_category")["edit"].nunique().to_dict() == {
        "animal": 1,
        "fish": 1,
    }
    assert len(sample_edits(q, 0)) == len(q)
