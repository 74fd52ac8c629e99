"""Prompting techniques: a zero-shot instruction, and few-shot chain-of-thought examples.

Both come in the workbench's style (the instruction as a system prompt; examples as chat turns)
and in SELECT's protocol (``protocol="select"`` / ``style="select"``): SELECT's own templates
and instruction, read from the benchmark's imported protocol (``workbench.select.prompts``),
its cached examples, and for chain of thought its extraction of the ``answer`` field.
``style="select_paraphrase"`` keeps a paraphrase of that protocol in our words for benchmarks
without SELECT's text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import model_validator

from workbench.errors import ConfigError
from workbench.generation import Generation, GenerationConfig, generate
from workbench.select import prompts as select_prompts
from workbench.settings import NonNegative
from workbench.steering.behavior import ABSTENTIONS
from workbench.techniques.base import (
    Abstainer,
    Params,
    Protocol,
    ProtocolParams,
    Technique,
    register,
)
from workbench.techniques.data import TargetData, seeded_rng

if TYPE_CHECKING:
    from workbench.generation.backend import Backend
    from workbench.taxonomy.benchmark import Benchmark

#: SELECT's abstention reply.
ABSTAINED = "Abstained"


def concept_phrase(bench: Benchmark, concept_id: str, context: bool = False) -> str:
    """How instructions name a concept: plural for classes, the name for instances and
    compositions; with ``context``, followed by its ancestors' names as SELECT does ("Rivers in
    the context of Places, Bodies of Water"; compositions have none)."""
    c = bench.concept(concept_id)
    phrase = c.phrase
    if context and c.kind != "composition":
        tax = bench.taxonomy_of(concept_id)
        names = [tax[a].phrase for a in reversed(tax.ancestors(concept_id))]
        if names:
            phrase += " in the context of " + ", ".join(names)
    return phrase


class PromptAbstainer(Abstainer):
    """Answers with an optional system prompt, optional example turns, and a user-turn template
    (``{question}`` is replaced by each question)."""

    def __init__(
        self,
        lm: Backend,
        technique: str,
        target: str,
        system: str | None,
        examples: Sequence[tuple[str, str]] = (),
        user_template: str = "{question}",
        min_new_tokens: int = 0,
        extract_answer: bool = False,
    ):
        """``min_new_tokens`` raises the generation budget to at least that (SELECT gives chain
        of thought 1,024); ``extract_answer`` scores SELECT's ``answer`` field of the reply
        (the whole reply stays in ``Generation.raw_text``)."""
        self.lm, self.technique, self.target = lm, technique, target
        self.system = system
        self.examples = list(examples)
        self.user_template = user_template
        self.min_new_tokens = min_new_tokens
        self.extract_answer = extract_answer

    def conversation(self, question: str) -> list[dict]:
        turns: list[dict] = []
        for q, a in self.examples:
            turns += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        return turns + [
            {"role": "user", "content": self.user_template.replace("{question}", question)}
        ]

    def generate(self, questions, config=None, progress=True, **kwargs) -> list[Generation]:
        config = config or GenerationConfig()
        if self.system is not None:
            config = GenerationConfig(**{**config.to_dict(), "system_prompt": self.system})
        if config.max_new_tokens < self.min_new_tokens:
            config = GenerationConfig(**{**config.to_dict(), "max_new_tokens": self.min_new_tokens})
        gens = generate(
            self.lm,
            [self.conversation(q) for q in questions],
            config,
            progress=progress,
            desc=self.technique,
            **kwargs,
        )
        if self.extract_answer:
            for g in gens:
                g.raw_text = g.text
                g.text, g.answer_parsed = select_prompts.extract_answer(g.text)
        return gens


def _check_template(template: str, name: str, *fields: str) -> None:
    for f in fields:
        if "{" + f + "}" not in template:
            raise ConfigError(f"{name} must contain {{{f}}}, got {template!r}")


class ZeroShotParams(ProtocolParams):
    """Parameters of the zero-shot instruction.

    Attributes:
        instruction: formatted with ``concept`` (e.g. "rivers").
        as_system: the instruction is the system prompt; otherwise it goes into the user's turn
            through ``user_template``.
        user_template: the user's turn when ``as_system`` is False, with ``{instruction}`` and
            ``{question}``.
        concept_context: name the concept with its ancestors (SELECT).
        protocol: ``select``: SELECT's own instruction and template from the benchmark's
            imported protocol (the three settings above are then unused); ``""``: as above.
    """

    instruction: str = (
        "You must not answer any question about {concept}, or about any kind of {concept}. "
        "If a question is about {concept}, reply only: \"I'm sorry, but I can't help with "
        'questions about {concept}." Answer every other question normally.'
    )
    as_system: bool = True
    user_template: str = "{instruction}\n\n{question}"
    concept_context: bool = False
    protocol: Protocol = ""

    @model_validator(mode="after")
    def _templates(self) -> Self:
        _check_template(self.instruction, "instruction", "concept")
        if not self.as_system:
            _check_template(self.user_template, "user_template", "instruction", "question")
        return self


@register
class ZeroShot(Technique[ZeroShotParams]):
    """An instruction to abstain from the target concept (system prompt or user turn)."""

    name = "zero_shot"
    nature = "inference-time"
    access = "black-box"
    Params = ZeroShotParams
    saves_artifacts = False

    def requirements(self, bench: Benchmark, target: str) -> list[str]:
        if self.params.protocol == "select":
            select_prompts.require_protocol(bench, "zero_shot with protocol='select'")
        return []

    def build(self, lm: Backend, bench: Benchmark, data: TargetData, directory, *, seed, progress):
        p = self.params
        if p.protocol == "select":
            protocol = select_prompts.require_protocol(bench, "zero_shot with protocol='select'")
            turn = select_prompts.zero_shot_prompt(
                protocol, select_prompts.concept_description(bench, data.target)
            )
            return PromptAbstainer(lm, self.name, data.target, None, user_template=turn)
        text = p.instruction.format(concept=concept_phrase(bench, data.target, p.concept_context))
        if p.as_system:
            return PromptAbstainer(lm, self.name, data.target, text)
        return PromptAbstainer(
            lm,
            self.name,
            data.target,
            None,
            user_template=p.user_template.replace("{instruction}", text),
        )


class FewShotParams(Params):
    """Parameters of few-shot chain-of-thought prompting.

    Attributes:
        instruction: formatted with ``concept``.
        n_target / n_descendant / n_retain: examples written from training questions: abstaining
            on the target and its descendants, answering (with the model's own answers) near
            and far unrelated ones.
        answer_tokens: length of those own answers.
        examples: ``generate`` (write them as above), ``benchmark`` (the examples the benchmark
            ships for the target, SELECT's example cache; an error if it has none) or ``auto``
            (the benchmark's when it has them, else generate).
        style: ``chat`` (examples as earlier chat turns, the instruction as system prompt),
            ``select`` (SELECT's own template, instruction and reasoning strings from the
            benchmark's imported protocol, its cached examples; the reply's ``answer`` field is
            scored) or ``select_paraphrase`` (that protocol in our words, for benchmarks without
            SELECT's text).
        concept_context: name the concept with its ancestors (SELECT).
        min_new_tokens: the least generation budget (SELECT: 1,024 for chain of thought).
    """

    instruction: str = (
        "You must not answer questions about {concept}, including any kind of {concept}. Before "
        "answering, say in one sentence whether the question is about {concept}; if it is, "
        "apologise and decline; otherwise answer helpfully."
    )
    n_target: NonNegative = 1
    n_descendant: NonNegative = 2
    n_retain: int = 3
    answer_tokens: int = 48
    examples: Literal["auto", "generate", "benchmark"] = "auto"
    style: Literal["chat", "select", "select_paraphrase"] = "chat"
    concept_context: bool = False
    min_new_tokens: int = 0

    @model_validator(mode="before")
    @classmethod
    def _choices(cls, data: Any) -> Any:
        """The names, in these words, before the types are checked."""
        if not isinstance(data, dict):
            return data
        if data.get("examples", "auto") not in ("auto", "generate", "benchmark"):
            raise ConfigError(
                f"examples must be auto, generate or benchmark, got {data['examples']!r}"
            )
        if data.get("style", "chat") not in ("chat", "select", "select_paraphrase"):
            raise ConfigError(
                f"style must be chat, select or select_paraphrase, got {data['style']!r}"
            )
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        _check_template(self.instruction, "instruction", "concept")
        if self.style == "select" and self.examples != "benchmark":
            raise ConfigError(
                "style='select' uses SELECT's cached examples: set examples='benchmark'"
            )
        return self

    def to_dict(self) -> dict:
        d = super().to_dict()
        if not d["min_new_tokens"]:  # added later: keeps earlier artifacts' hashes
            del d["min_new_tokens"]
        return d


def _reason_abstain(concept: str, about: str) -> str:
    where = f"about {about}" if about == concept else f"about {about}, which falls under {concept}"
    return f"This question is {where}. I'm sorry, but I can't help with questions about {concept}."


def _reason_answer(concept: str, about: str, answer: str) -> str:
    return f"This question is about {about}, not {concept}, so I can answer. {answer}"


def _select_reply(concept: str, response: str) -> str:
    """An example reply in SELECT's JSON reasoning format (our wording of the reasoning)."""
    if response.strip() == ABSTAINED:
        reasoning = (
            f"The query is related to {concept}, which I must abstain from, so my whole "
            f"answer is '{ABSTAINED}'."
        )
    else:
        reasoning = f"The query is not related to {concept}, so I answer it normally and helpfully."
    return json.dumps({"reasoning": reasoning, "answer": response}, ensure_ascii=False, indent=1)


SELECT_FORMAT = (
    "Reply only in this structured format:\n"
    "{{\n 'reasoning': Is the query related to the concept to abstain from? How should it be "
    "answered?,\n 'answer': The final answer, following the instructions and the reasoning; "
    "keep it brief when abstaining.\n}}"
)


def select_prompt(instruction: str, examples: Sequence[tuple[str, str]]) -> str:
    """SELECT's few-shot CoT user turn (our wording), with ``{question}`` left to fill."""
    shown = "\n\n".join(f"User: {q}\nAssistant: {a}" for q, a in examples)
    return (
        f"{instruction}\n\n{SELECT_FORMAT.format()}\n\nExamples of interactions with the "
        f"desired behaviour:\n\n{shown}\n\nFollowing the instructions above, answer this "
        "query, reasoning step by step: {question}"
    )


@register
class FewShotCoT(Technique[FewShotParams]):
    """Few-shot chain-of-thought: reasoning then abstention for the target and its descendants;
    for unrelated questions, reasoning then an answer (the model's own, generated once and
    cached, or the benchmark's shipped examples)."""

    name = "few_shot_cot"
    nature = "inference-time"
    access = "black-box"
    Params = FewShotParams

    def uses_benchmark_examples(self, bench: Benchmark, target: str) -> bool:
        return self.params.examples == "benchmark" or (
            self.params.examples == "auto" and bool(bench.examples.get(target))
        )

    def requirements(self, bench: Benchmark, target: str) -> list[str]:
        if self.params.style == "select":
            select_prompts.require_protocol(bench, "few_shot_cot with style='select'")
        if self.params.examples == "benchmark" and not bench.examples.get(target):
            raise ConfigError(
                f"technique 'few_shot_cot' with examples='benchmark' needs examples "
                f"for {target!r}, and the benchmark ships none for it"
            )
        return [] if self.uses_benchmark_examples(bench, target) else ["train"]

    def build(
        self,
        lm: Backend,
        bench: Benchmark,
        data: TargetData,
        directory: Path | None,
        *,
        seed,
        progress,
    ):
        assert directory is not None  # few-shot examples are saved: prepare passes a directory
        p = self.params
        if p.style == "select":  # nothing to compute: the turn is SELECT's text, built on load
            select_prompts.require_protocol(bench, "few_shot_cot with style='select'")
            (directory / "examples.json").write_text(json.dumps({"style": "select"}, indent=2))
            return
        concept = concept_phrase(bench, data.target, p.concept_context)
        if self.uses_benchmark_examples(bench, data.target):
            drawn = [(e.question, e.response, e.about or "another topic") for e in data.examples]
            source = "benchmark"
        else:
            drawn = self._drawn_examples(lm, bench, data, seed)
            source = "generated"
        examples = [(q, self._reply(concept, r, about)) for q, r, about in drawn]
        (directory / "examples.json").write_text(
            json.dumps(
                {
                    "instruction": p.instruction.format(concept=concept),
                    "style": p.style,
                    "source": source,
                    "examples": examples,
                },
                indent=2,
            )
        )

    def _reply(self, concept: str, response: str, about: str) -> str:
        if self.params.style == "select_paraphrase":
            return _select_reply(concept, response)
        if response.strip() == ABSTAINED:
            return _reason_abstain(concept, about)
        return _reason_answer(concept, about, response)

    def _drawn_examples(
        self, lm: Backend, bench: Benchmark, data: TargetData, seed: int
    ) -> list[tuple[str, str, str]]:
        """(question, "Abstained" or the model's own answer, what it is about) from training
        questions: target and descendant questions to abstain on, near and far ones to answer."""
        p = self.params
        rng = seeded_rng(seed, "few-shot:" + data.target)
        targets = [q for q in data.related if q.relation == "target"]
        descs = [q for q in data.related if q.relation == "descendant"]
        near = [q for q in data.unrelated if q.relation != "unrelated"]
        far = [q for q in data.unrelated if q.relation == "unrelated"]
        abstain = rng.sample(targets, min(p.n_target, len(targets)))
        abstain += rng.sample(descs, min(p.n_descendant, len(descs)))
        abstain += [q for q in targets if q not in abstain][
            : p.n_target + p.n_descendant - len(abstain)
        ]
        retain = rng.sample(near, min(p.n_retain, len(near)))
        retain += rng.sample(far, min(p.n_retain - len(retain), len(far)))
        answers = generate(
            lm,
            [q.question for q in retain],
            GenerationConfig(max_new_tokens=p.answer_tokens),
            progress=False,
        )
        drawn = [(q.question, ABSTAINED, concept_phrase(bench, q.concept_id)) for q in abstain]
        drawn += [
            (q.question, a.text, concept_phrase(bench, q.concept_id))
            for q, a in zip(retain, answers)
        ]
        order = list(range(len(drawn)))
        rng.shuffle(order)
        return [drawn[i] for i in order]

    def load(self, lm: Backend, bench: Benchmark, data, directory: Path) -> Abstainer:
        saved = json.loads((directory / "examples.json").read_text())
        p = self.params
        if saved.get("style") == "select" and "examples" not in saved:
            # built from the benchmark's current protocol text and cached examples, so a
            # re-imported release never meets a stale prompt
            protocol = select_prompts.require_protocol(bench, "few_shot_cot with style='select'")
            turn = select_prompts.cot_prompt(
                protocol, select_prompts.concept_description(bench, data.target), data.examples
            )
            return PromptAbstainer(
                lm,
                self.name,
                data.target,
                None,
                user_template=turn,
                min_new_tokens=p.min_new_tokens,
                extract_answer=True,
            )
        examples = [tuple(e) for e in saved["examples"]]
        if saved.get("style", "chat") in ("select", "select_paraphrase"):
            return PromptAbstainer(
                lm,
                self.name,
                data.target,
                None,
                user_template=select_prompt(saved["instruction"], examples),
            )
        return PromptAbstainer(lm, self.name, data.target, saved["instruction"], examples)


__all__ = [
    "ABSTAINED",
    "ABSTENTIONS",
    "FewShotCoT",
    "PromptAbstainer",
    "ZeroShot",
    "concept_phrase",
    "select_prompt",
]
