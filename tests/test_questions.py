"""Question generation, splits, the LLM generator's parsing, and relation probes."""

import pytest

from taxonomy_fixtures import hand_taxonomy
from workbench.errors import WorkbenchError
from workbench.taxonomy.model import Concept
from workbench.taxonomy.questions import (
    LLMQuestionGenerator,
    QuestionBank,
    TemplateQuestionGenerator,
    build_question_bank,
    mentions,
    parse_question_lines,
    relation_probes,
)


def test_template_questions_differ_by_root_type_and_mention_the_concept():
    t = hand_taxonomy()
    gen = TemplateQuestionGenerator(seed=0)
    river = gen.generate(t, t["river"], 50)
    physicist = gen.generate(t, t["physicist"], 50)
    assert len(set(river)) == 50 and len(set(physicist)) == 50
    assert all(mentions(q, t["river"]) for q in river)
    assert all(mentions(q, t["physicist"]) for q in physicist)
    assert any("climate" in q for q in river) and not any("climate" in q for q in physicist)
    assert "How do I become a physicist?" in gen.candidates(t, t["physicist"])
    nile = gen.generate(t, t["nile"], 30)
    assert any(q == "Where is Nile located?" for q in gen.candidates(t, t["nile"]))
    assert all("Nile" in q for q in nile)


def test_splits_are_deterministic_by_seed_and_disjoint():
    t = hand_taxonomy()
    a = build_question_bank(t, TemplateQuestionGenerator(seed=1))
    b = build_question_bank(t, TemplateQuestionGenerator(seed=1))
    c = build_question_bank(t, TemplateQuestionGenerator(seed=2))
    assert a.rows() == b.rows()
    assert a.rows() != c.rows()
    s = a["river"]
    assert (len(s.train), len(s.validation), len(s.eval)) == (15, 5, 30)
    assert not set(s.train) & set(s.eval)
    assert a.duplicates() == 0


def test_question_bank_roundtrip_and_bad_rows(tmp_path):
    t = hand_taxonomy()
    bank = build_question_bank(t, TemplateQuestionGenerator(), concept_ids=["river", "lake"])
    path = bank.save(tmp_path / "q.jsonl")
    back = QuestionBank.load(path)
    assert back.rows() == bank.rows()
    path.write_text('{"concept_id": "x", "split": "train"}\n')
    with pytest.raises(WorkbenchError, match="line 1: question row lacks 'question'"):
        QuestionBank.load(path)
    for row, problem in [
        ('{"concept_id": "x", "split": "eval", "question": null}', "'question' must be non-empty"),
        ('{"concept_id": "x", "split": "bogus", "question": "Q?"}', "split 'bogus' is not one"),
        ('{"concept_id": 7, "split": "eval", "question": "Q?"}', "'concept_id' must be non-empty"),
        ("[1, 2]", "malformed question row"),
    ]:
        path.write_text('{"concept_id": "x", "split": "train", "question": "Q?"}\n' + row + "\n")
        with pytest.raises(WorkbenchError, match=f"q.jsonl, line 2: .*{problem}"):
            QuestionBank.load(path)


def test_duplicates_are_counted():
    from workbench.taxonomy.questions import QuestionSet

    bank = QuestionBank(
        [QuestionSet("a", train=["Why rivers?"]), QuestionSet("b", eval=["why rivers"])]
    )
    assert bank.duplicates() == 1


def test_parse_question_lines_strips_numbering_and_junk():
    reply = "Sure! Here are some:\n1. What is a river?\n2) How long is the Nile?\n- Why do rivers flood?\nok\n"
    assert parse_question_lines(reply) == [
        "What is a river?",
        "How long is the Nile?",
        "Why do rivers flood?",
    ]


def test_mentions_matches_singular_and_plural_as_whole_words():
    river = Concept("r", "river")
    assert mentions("Why do rivers flood?", river)
    assert mentions("Is the River long?", river)
    assert not mentions("What is a riverbank?", river)


def test_llm_generator_runs_on_a_real_model_and_reports_shortfall(tiny):
    t = hand_taxonomy()
    gen = LLMQuestionGenerator(tiny, per_round=3, max_rounds=2, max_new_tokens=16)
    assert "river" in gen.prompt(t["river"])
    with pytest.raises(
        WorkbenchError, match=r"usable questions about 'river' in 2 rounds; 5 needed"
    ):
        gen.generate(t, t["river"], 5)  # a random tiny model writes no usable questions


def test_relation_probes_cover_ancestors_with_negatives():
    t = hand_taxonomy()
    probes = relation_probes(t, "nile", negatives=1)
    positives = [p for p in probes if p.expected]
    assert [p.other_id for p in positives] == ["river", "water"]  # the root is skipped
    assert (
        positives[0].statement
        == "Nile can be classified as a member, a subtype or a subcategory of rivers."
    )
    negatives = [p for p in probes if not p.expected]
    assert negatives and all(n.other_id not in t.ancestors("nile") for n in negatives)
    assert "True or False" in probes[0].prompt
    assert relation_probes(t, "river")[0].statement == (
        "Rivers can be classified as a member, a subtype or a subcategory of bodies of water."
    )
