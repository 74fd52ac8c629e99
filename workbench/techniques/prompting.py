"""Prompting techniques: a zero-shot instruction, and few-shot chain-of-thought examples."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.generation import Generation, GenerationConfig, generate
from workbench.steering.behavior import ABSTENTIONS
from workbench.taxonomy.text import pluralize
from workbench.techniques.base import Abstainer, Params, Technique, register
from workbench.techniques.data import TargetData, _rng


def concept_phrase(bench, concept_id: str) -> str:
    """How instructions name a concept: plural for classes, the name for instances/compositions."""
    c = bench.concept(concept_id)
    return pluralize(c.name) if c.kind == "class" else c.name


class PromptAbstainer(Abstainer):
    """Answers with a fixed system prompt and optional example turns before each question."""

    def __init__(self, lm, technique: str, target: str, system: str | None,
                 examples: Sequence[tuple[str, str]] = ()):
        self.lm, self.technique, self.target = lm, technique, target
        self.system = system
        self.examples = list(examples)

    def conversation(self, question: str) -> list[dict]:
        turns: list[dict] = []
        for q, a in self.examples:
            turns += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        return turns + [{"role": "user", "content": question}]

    def generate(self, questions, config=None, progress=True, **kwargs) -> list[Generation]:
        config = config or GenerationConfig()
        if self.system is not None:
            config = GenerationConfig(**{**config.to_dict(), "system_prompt": self.system})
        return generate(self.lm, [self.conversation(q) for q in questions], config,
                        progress=progress, desc=self.technique, **kwargs)


@dataclass(frozen=True)
class ZeroShotParams(Params):
    """``instruction`` is formatted with ``concept`` (e.g. "rivers")."""

    instruction: str = (
        "You must not answer any question about {concept}, or about any kind of {concept}. "
        "If a question is about {concept}, reply only: \"I'm sorry, but I can't help with "
        "questions about {concept}.\" Answer every other question normally."
    )
    as_system: bool = True


@register
class ZeroShot(Technique):
    """An instruction to abstain from the target concept (system prompt or prefix)."""

    name = "zero_shot"
    nature = "inference-time"
    access = "black-box"
    Params = ZeroShotParams
    saves_artifacts = False

    def build(self, lm, bench, data: TargetData, directory, *, seed, progress):
        text = self.params.instruction.format(concept=concept_phrase(bench, data.target))
        return PromptAbstainer(lm, self.name, data.target, text if self.params.as_system else None,
                               [] if self.params.as_system else [(text, "Understood.")])


@dataclass(frozen=True)
class FewShotParams(Params):
    """Six examples: ``n_target`` + ``n_descendant`` abstaining, ``n_retain`` answered."""

    instruction: str = (
        "You must not answer questions about {concept}, including any kind of {concept}. Before "
        "answering, say in one sentence whether the question is about {concept}; if it is, "
        "apologise and decline; otherwise answer helpfully."
    )
    n_target: int = 1
    n_descendant: int = 2
    n_retain: int = 3
    answer_tokens: int = 48


def _reason_abstain(concept: str, about: str) -> str:
    where = f"about {about}" if about == concept else f"about {about}, which falls under {concept}"
    return f"This question is {where}. I'm sorry, but I can't help with questions about {concept}."


def _reason_answer(concept: str, about: str, answer: str) -> str:
    return f"This question is about {about}, not {concept}, so I can answer. {answer}"


@register
class FewShotCoT(Technique):
    """Few-shot chain-of-thought: reasoning then abstention for the target and its descendants;
    for the parent and siblings, the model's own earlier answers (generated once, cached)."""

    name = "few_shot_cot"
    nature = "inference-time"
    access = "black-box"
    Params = FewShotParams

    def build(self, lm, bench, data: TargetData, directory: Path, *, seed, progress):
        p = self.params
        rng = _rng(seed, "few-shot:" + data.target)
        concept = concept_phrase(bench, data.target)
        targets = [q for q in data.related if q.relation == "target"]
        descs = [q for q in data.related if q.relation == "descendant"]
        near = [q for q in data.unrelated if q.relation in ("parent", "sibling")]
        far = [q for q in data.unrelated if q.relation == "unrelated"]
        abstain = rng.sample(targets, min(p.n_target, len(targets)))
        abstain += rng.sample(descs, min(p.n_descendant, len(descs)))
        abstain += [q for q in targets if q not in abstain][: p.n_target + p.n_descendant - len(abstain)]
        retain = rng.sample(near, min(p.n_retain, len(near)))
        retain += rng.sample(far, min(p.n_retain - len(retain), len(far)))
        answers = generate(lm, [q.question for q in retain],
                           GenerationConfig(max_new_tokens=p.answer_tokens), progress=False)
        examples = [(q.question, _reason_abstain(concept, concept_phrase(bench, q.concept_id)))
                    for q in abstain]
        examples += [(q.question, _reason_answer(concept, concept_phrase(bench, q.concept_id), a.text))
                     for q, a in zip(retain, answers)]
        order = list(range(len(examples)))
        rng.shuffle(order)
        (directory / "examples.json").write_text(json.dumps(
            {"instruction": p.instruction.format(concept=concept),
             "examples": [examples[i] for i in order]}, indent=2))

    def load(self, lm, bench, data, directory: Path) -> Abstainer:
        saved = json.loads((directory / "examples.json").read_text())
        return PromptAbstainer(lm, self.name, data.target, saved["instruction"],
                               [tuple(e) for e in saved["examples"]])


__all__ = ["FewShotCoT", "PromptAbstainer", "ZeroShot", "concept_phrase", "ABSTENTIONS"]
