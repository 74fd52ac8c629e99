"""Noun forms: plurals are never applied twice, in code or anywhere in the shipped data."""

import re

import pytest

from workbench.taxonomy import load_benchmark
from workbench.taxonomy.text import _IRREGULAR, looks_plural, pluralize, singularize

#: Every word ending in "-ses" that the shipped data and prompts use, each checked by hand to be
#: a real English plural. A new one fails the test until a person has looked at it.
REAL_SES_WORDS = {
    "phrases",
    "verses",
    "bosses",
    "canvases",
    "terminuses",
    "basses",
    "brasses",
    "actresses",
    "dresses",
    "poetesses",
    "uses",
}
#: Irregular plurals with a regular plural suffix added again ("peoples", "childrens").
DOUBLED_IRREGULAR = {v + "s" for v in _IRREGULAR.values() if not v.endswith("s")} - {
    "fishs",
    "sheeps",
}


@pytest.mark.parametrize(
    "name, plural",
    [
        ("river", "rivers"),
        ("work of art", "works of art"),
        ("bus", "buses"),
        ("glass", "glasses"),
        ("lens", "lenses"),
        ("fireman", "firemen"),
        ("person", "people"),
        ("city", "cities"),
        ("food", "food"),
        ("specimen", "specimens"),
    ],
)
def test_pluralize_and_singularize_round_trip(name, plural):
    assert pluralize(name) == plural
    assert pluralize(plural) == plural  # idempotent: never "riverses"
    assert singularize(plural) == name


@pytest.mark.parametrize(
    "name",
    [
        "products",
        "Rivers",
        "Works of Art",
        "troops",
        "paratroops",
        "creative works",
        "Organizations",
        "people",
        "firemen",
        "glyptics",
    ],
)
def test_names_already_plural_are_kept(name):
    assert looks_plural(name) and pluralize(name) == name


def _words(texts):
    for t in texts:
        yield from re.findall(r"[A-Za-z][A-Za-z'-]*", t)


def _prompts(bench):
    """Every instruction the prompting techniques write, in both presets, for every concept."""
    from workbench.techniques.presets import PRESETS
    from workbench.techniques.prompting import (
        FewShotParams,
        ZeroShotParams,
        concept_phrase,
    )

    for concept in list(bench.atomic) + list(bench.compositions):
        for preset in PRESETS.values():
            for name, cls in (("zero_shot", ZeroShotParams), ("few_shot_cot", FewShotParams)):
                p = cls(**preset.get(name, {}))
                yield p.instruction.format(
                    concept=concept_phrase(bench, concept.id, p.concept_context)
                )


def test_no_double_plural_in_shipped_questions_names_or_prompts():
    from workbench.paths import repo_root
    from workbench.taxonomy.questions import TemplateQuestionGenerator
    from workbench.unknown import load_unknownbench

    bench = load_benchmark()
    texts = [q for s in bench.questions for q in s.all()]
    assert len(texts) >= 28000
    texts += [c.phrase for c in list(bench.atomic) + list(bench.compositions)]
    texts += [c.name for c in bench.compositions]
    texts += list(_prompts(bench))
    gen = TemplateQuestionGenerator()
    for root in bench.atomic.roots:  # every template of every root type, roots included
        texts += gen.candidates(bench.atomic, bench.atomic[root])
    texts += [
        i.prompt
        for i in load_unknownbench(repo_root() / "data" / "unknown").items
        if i.partition == "answerable"
    ]  # the others hold made-up names
    words = {w.lower() for w in _words(texts)}
    ses = {w for w in words if w.endswith("ses")}
    assert ses <= REAL_SES_WORDS, f"double plurals: {sorted(ses - REAL_SES_WORDS)}"
    assert not words & DOUBLED_IRREGULAR
    for c in bench.atomic:
        if c.kind == "class":
            assert pluralize(c.phrase) == c.phrase, c.id


@pytest.mark.parametrize(
    "plural, singular",
    [
        ("Zombies", "Zombie"),
        ("Horror Movies", "Horror Movie"),
        ("cookies", "cookie"),
        ("Franchises", "Franchise"),
        ("business premises", "business premise"),
        ("irises", "iris"),
        ("Laptop OSes", "Laptop OS"),
        ("Laptop OSs", "Laptop OS"),
        ("Gaming PCs", "Gaming PC"),
        ("Workers in Mines", "Worker in Mines"),
        ("People in Politics", "Person in Politics"),
        ("Plugins or Extensions", "Plugin or Extension"),
        ("Bed and Breakfasts", "Bed and Breakfast"),
        ("Hypotheses", "Hypothesis"),
        ("Small Cities", "Small City"),
    ],
)
def test_singularize_irregular_plural_names(plural, singular):
    assert looks_plural(plural)
    assert singularize(plural) == singular


@pytest.mark.parametrize(
    "name",
    [
        "Vocational School",
        "Drinking Water",
        "Street Food",
        "Mobile OS",
        "GPS",
        "Tennis",
        "Glass",
        "Chemical Substance",
    ],
)
def test_singular_names_stay_singular(name):
    assert not looks_plural(name) and singularize(name) == name


def test_a_plural_class_name_gives_its_singular():
    from workbench.taxonomy.model import Concept

    assert Concept("m", "Silent Movies").singular == "Silent Movie"
    assert Concept("m", "Silent Movies", kind="instance").singular == "Silent Movies"
    assert pluralize("Mobile OS") == "Mobile OSes" and pluralize("Laptop OSs") == "Laptop OSs"
