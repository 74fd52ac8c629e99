"""Fine-tuning techniques: LoRA SFT, and SFT followed by DPO.

SFT data (training questions only): the target's and its descendants' questions paired with an
abstention; parent, sibling and unrelated questions paired with the model's own answers (so the
model keeps answering them: specificity). DPO continues from the SFT adapter (merged into a copy
of the weights, which is also DPO's reference) with preference pairs: abstain over comply for
related questions, the reverse for the others.

The base model is never modified: each abstainer holds its own copy with the adapters merged.

SELECT's own recipe (tuning/base.py, aft.py, apo.py; the ``select`` preset): ``mixture="select"``
(``workbench.techniques.data.select_tuning_data``: all of the target's training questions plus 20
descendant ones, each with 5 of SELECT's refusal templates; hard and far negatives with the
benchmark's reference answers; DPO re-samples with 2 / 3 templates per question),
``prompt_template="select"`` (the question inside SELECT's plain template, in training and at
generation, plus its system prompt at generation) and ``dpo_init="continue"`` (DPO trains the
SFT adapter further, a frozen copy of it as the reference).
"""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from pydantic import model_validator

from workbench.errors import ConfigError
from workbench.finetuning import FinetuneParams, train_dpo, train_sft
from workbench.finetuning.lora import omit_added_defaults
from workbench.finetuning.stack import stack_adapters
from workbench.generation import GenerationConfig, generate
from workbench.select import prompts as select_prompts
from workbench.settings import Settings
from workbench.steering.behavior import ABSTENTIONS
from workbench.techniques.base import Abstainer, Params, Technique, register
from workbench.techniques.data import (
    TargetData,
    select_answer_gaps,
    select_tuning_data,
    target_data,
)

if TYPE_CHECKING:
    from workbench.generation.backend import Backend
    from workbench.taxonomy.benchmark import Benchmark


class SFTParams(Params, FinetuneParams):
    """LoRA settings, plus what the model learns to say when it complies.

    Attributes:
        answer_tokens: length of the model's own answers used as targets.
        comply_answers: ``own`` (the model's own greedy answers, so it keeps its behaviour on
            unrelated questions) or ``reference`` (the benchmark's reference answers where it has
            them, SELECT's ``responses``; the model's own elsewhere, with a
            :class:`ReferenceFallbackWarning` saying for how many; a benchmark with no reference
            answers at all is a ConfigError before any model loads).
        mixture: ``workbench`` (``target_data``, ``ABSTENTIONS``) or ``select`` (SELECT's
            mixture, refusal templates and reference answers, every one required).
        prompt_template: ``select``: questions inside SELECT's plain template (training and
            generation) and its system prompt at generation (when the config sets none).
        dpo_init: ``merged`` (DPO trains a new adapter on the SFT-merged weights) or
            ``continue`` (SELECT: the SFT adapter itself, a frozen copy as the reference).
    """

    answer_tokens: int = 32
    comply_answers: Literal["own", "reference"] = "own"
    mixture: Literal["workbench", "select"] = "workbench"
    prompt_template: Literal["", "select"] = ""
    dpo_init: Literal["merged", "continue"] = "merged"

    @model_validator(mode="before")
    @classmethod
    def _choices(cls, data: Any) -> Any:
        """The names, in these words, before the types are checked (``loss``: FinetuneParams)."""
        if not isinstance(data, dict):
            return data
        for name, allowed in _CHOICES.items():
            if name in data and data[name] not in allowed:
                raise ConfigError(
                    f"{name} must be one of {', '.join(map(repr, allowed))}, got {data[name]!r}"
                )
        return data

    def finetune(self) -> FinetuneParams:
        return FinetuneParams(**{k: getattr(self, k) for k in FinetuneParams.field_names()})

    def to_dict(self) -> dict:
        return omit_added_defaults(omit_added_defaults(Settings.to_dict(self)), _ADDED)


_CHOICES = {
    "comply_answers": ("own", "reference"),
    "mixture": ("workbench", "select"),
    "prompt_template": ("", "select"),
    "dpo_init": ("merged", "continue"),
}

#: SFTParams fields added after artifacts were first saved, with their defaults.
_ADDED = {"mixture": "workbench", "prompt_template": "", "dpo_init": "merged"}


class _ServedAdapter:
    """A back end (vLLM) answering through a LoRA adapter directory over its base weights."""

    def __init__(self, lm: Backend, adapter: Path):
        self.lm, self.adapter = lm, str(adapter)
        self.backend, self.tokenizer = lm.backend, lm.tokenizer
        self.capabilities, self.name = lm.capabilities, lm.name
        self.model_id, self.revision, self.dtype_name = lm.model_id, lm.revision, lm.dtype_name

    def generate_prompts(self, prompts, config, **kwargs):
        return self.lm.generate_prompts(prompts, config, adapter=self.adapter, **kwargs)

    def unavailable(self, capability: str, what: str):
        return self.lm.unavailable(capability, what)


class FineTunedAbstainer(Abstainer):
    """The adapted copy (or, on a back end that serves adapters, the adapter directory);
    ``template`` (with ``{question}``) wraps each question and ``system`` is the system prompt
    when the config sets none (SELECT's plain prompt)."""

    def __init__(
        self,
        lm: Backend,
        technique: str,
        target: str,
        model,
        template: str | None = None,
        system: str | None = None,
    ):
        self.technique, self.target = technique, target
        self.adapted: _ServedAdapter | Backend | None = (
            _ServedAdapter(lm, model) if isinstance(model, Path) else lm.with_model(model)
        )
        self.template, self.system = template, system

    def generate(self, questions, config=None, progress=True, **kwargs):
        if self.adapted is None:
            raise RuntimeError(f"{self.technique} abstainer for {self.target!r} was closed")
        config = config or GenerationConfig()
        if self.system is not None and config.system_prompt is None:
            config = config.replace(system_prompt=self.system)
        prompts = [_wrap(self.template, q) for q in questions]
        return generate(
            self.adapted, prompts, config, progress=progress, desc=self.technique, **kwargs
        )

    def close(self) -> None:
        self.adapted = None
        gc.collect()


def _wrap(template: str | None, question: str) -> str:
    return question if template is None else template.replace(select_prompts.QUESTION, question)


def _protocol(technique: Technique[SFTParams], bench: Benchmark):
    """SELECT's protocol when the technique's parameters need its text (else None)."""
    p = technique.params
    if p.mixture != "select" and not p.prompt_template:
        return None
    what = f"{technique.name} with " + " and ".join(
        x
        for x in (
            ("mixture='select'" if p.mixture == "select" else ""),
            ("prompt_template='select'" if p.prompt_template else ""),
        )
        if x
    )
    protocol = select_prompts.require_protocol(bench, what)
    if p.mixture == "select" and len(protocol.refusal_templates) < 3:  # DPO draws 3 per question
        raise ConfigError(
            f"{what}: SELECT's refusal templates number "
            f"{len(protocol.refusal_templates)}, fewer than SELECT draws"
        )
    if p.prompt_template and "no_instruction" not in protocol.prompts:
        raise ConfigError(f"{what}: SELECT's prompts lack the no_instruction template")
    return protocol


def _template(technique: Technique[SFTParams], bench: Benchmark) -> str | None:
    protocol = _protocol(technique, bench)
    return select_prompts.plain_prompt(protocol) if technique.params.prompt_template else None


def _select_data(
    technique: Technique[SFTParams], bench: Benchmark, target: str, seed: int, dpo: bool
) -> TargetData:
    """SELECT's mixture, with the protocol text it used recorded for the artifact's hash."""
    protocol = _protocol(technique, bench)
    data = select_tuning_data(
        bench,
        target,
        seed,
        protocol.refusal_templates,
        select_prompts.concept_description(bench, target),
        dpo=dpo,
    )
    assert data.select is not None  # select_tuning_data records its draw in ``select``
    if technique.params.prompt_template:
        data = replace(
            data, select={**data.select, "prompt": select_prompts.plain_prompt(protocol)}
        )
    return data


def _check_select(
    technique: Technique[SFTParams], bench: Benchmark, target: str, dpo: bool
) -> None:
    """The protocol, and a reference answer for every question SELECT's mixture may use."""
    _protocol(technique, bench)
    if technique.params.mixture != "select":
        return
    missing, total, example = select_answer_gaps(bench, target, dpo=dpo)
    if missing:
        raise ConfigError(
            f"technique {technique.name!r} with mixture='select' pairs questions with the "
            f"benchmark's reference answers (SELECT's data.train.json 'responses'), but {missing} "
            f"of the {total} training questions it may sample for {target!r} have none "
            f"(e.g. {example!r}); import a release with them, or use mixture='workbench'"
        )


def _answer(data: TargetData, question: str) -> str:
    if question not in data.answers:
        raise ConfigError(
            f"no reference answer for the training question {question!r} "
            "(mixture='select' needs one for every negative)"
        )
    return data.answers[question].comply


def _own_answers(lm: Backend, questions: list[str], tokens: int) -> list[str]:
    gens = generate(lm, questions, GenerationConfig(max_new_tokens=tokens), progress=False)
    return [g.text for g in gens]


class ReferenceFallbackWarning(UserWarning):
    """``comply_answers="reference"``, but some questions have no reference answer."""


def comply_answers(
    lm: Backend,
    data: TargetData,
    questions: list[str],
    params: SFTParams,
    technique: str = "fine-tuning",
) -> list[str]:
    """Compliant answers to ``questions``: the benchmark's reference answers (``reference``,
    where it has them; a :class:`ReferenceFallbackWarning` counts the others) or the model's
    own."""
    ref = data.answers if params.comply_answers == "reference" else {}
    missing = [q for q in questions if q not in ref]
    if params.comply_answers == "reference" and missing:
        warnings.warn(
            f"{technique} for {data.target!r}: {len(missing)} of {len(questions)} "
            "questions have no reference answer in the benchmark and are paired with the "
            "model's own answers instead (comply_answers='reference')",
            ReferenceFallbackWarning,
            stacklevel=2,
        )
    own = dict(zip(missing, _own_answers(lm, missing, params.answer_tokens))) if missing else {}
    return [ref[q].comply if q in ref else own[q] for q in questions]


def _check_reference(technique: Technique[SFTParams], bench: Benchmark) -> None:
    """``comply_answers="reference"`` on a benchmark without reference answers: an error."""
    if technique.params.comply_answers == "reference" and not bench.answers:
        raise ConfigError(
            f"technique {technique.name!r} has comply_answers='reference', but the benchmark has "
            "no reference answers (SELECT's data.train.json 'responses'); import a release that "
            "has them, or set comply_answers='own'"
        )


def _apply_adapter(model, directory: Path):
    from peft import PeftModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers renames inside peft
        return PeftModel.from_pretrained(model, str(directory)).merge_and_unload()


def _fresh_copy(lm: Backend):
    return copy.deepcopy(lm.model)


@contextlib.contextmanager
def _training(lm: Backend):
    """(model to train, tokenizer), for the ``with`` block: a copy of ``lm``'s weights, or on an
    engine that serves adapters (vLLM) the copy it lends for the block only
    (:meth:`~workbench.generation.backend.Backend.training_copy`). On CPU the copy trains in
    fp32 whatever ``lm`` runs in."""
    if lm.capabilities.activations:
        yield _fp32_on_cpu(_fresh_copy(lm)), lm.tokenizer
        return
    with lm.training_copy() as lent:
        yield _fp32_on_cpu(lent.model), lent.tokenizer


def _fp32_on_cpu(model):
    p = next(model.parameters())
    return model.float() if p.device.type == "cpu" and p.dtype != torch.float32 else model


def _serves_adapters(lm: Backend) -> bool:
    """Whether ``lm`` answers through adapter directories (an engine without the torch module
    in hand, e.g. vLLM) rather than through an adapted copy of its weights."""
    return not lm.capabilities.activations


class _LoRATechnique(Technique[SFTParams]):
    """What SFT and SFT+DPO share: white-box LoRA training on the model's weights, from the
    target's training questions; ``dpo`` says whether a DPO stage follows."""

    nature = "fine-tuning"
    access = "white-box"
    requires = frozenset({"weights"})
    Params = SFTParams
    needs = ("train",)
    dpo = False

    def check_data(self, bench: Benchmark, target: str) -> None:
        super().check_data(bench, target)
        if self.params.mixture != "select":
            _check_reference(self, bench)
        # with DPO this covers the SFT mixture's questions too
        _check_select(self, bench, target, dpo=self.dpo)


@register
class SFT(_LoRATechnique):
    """LoRA supervised fine-tuning toward abstention on the target and its descendants."""

    name = "sft"

    def data(self, bench: Benchmark, target: str, seed: int = 0) -> TargetData:
        if self.params.mixture == "select":
            return _select_data(self, bench, target, seed, dpo=False)
        return _with_prompt(self, bench, target_data(bench, target, seed=seed))

    def pairs(self, lm: Backend, data: TargetData) -> list[tuple[str, str]]:
        """(question, reply) training pairs, questions unwrapped; SELECT's mixture: each
        positive with each of its refusal templates, then each negative with its reference
        answer, in the shuffled order."""
        if self.params.mixture == "select":
            assert data.select is not None  # the select mixture's data (_select_data) carries it
            entries = [
                (q.question, t) for q, ts in zip(data.related, data.select["templates"]) for t in ts
            ]
            entries += [(q.question, _answer(data, q.question)) for q in data.unrelated]
            return [entries[i] for i in data.select["order"]]
        related = [
            (q.question, ABSTENTIONS[i % len(ABSTENTIONS)]) for i, q in enumerate(data.related)
        ]
        keep_q = [q.question for q in data.unrelated]
        keep = list(zip(keep_q, comply_answers(lm, data, keep_q, self.params, self.name)))
        return related + keep

    def build(self, lm: Backend, bench: Benchmark, data, directory: Path | None, *, seed, progress):
        assert directory is not None  # the adapter is saved: prepare passes a directory
        pairs = self.pairs(lm, data)
        template = _template(self, bench)
        with _training(lm) as (copy_, tokenizer):
            model = train_sft(
                copy_,
                tokenizer,
                [(_wrap(template, q), a) for q, a in pairs],
                self.params.finetune(),
                seed=seed,
                progress=progress,
            )
            model.save_pretrained(str(directory / "adapter"))
            del model, copy_
            gc.collect()
        (directory / "pairs.json").write_text(json.dumps(pairs, indent=1))

    def load(self, lm: Backend, bench: Benchmark, data, directory: Path) -> Abstainer:
        if _serves_adapters(lm):
            return _abstainer(self, lm, bench, data, directory / "adapter")
        model = _apply_adapter(_fresh_copy(lm), directory / "adapter").eval()
        return _abstainer(self, lm, bench, data, model)


@register
class SFTDPO(_LoRATechnique):
    """SFT, then DPO on abstain-vs-comply preferences (reversed for retained concepts)."""

    name = "sft_dpo"
    dpo = True

    def data(self, bench: Benchmark, target: str, seed: int = 0) -> TargetData:
        if self.params.mixture == "select":
            return _select_data(self, bench, target, seed, dpo=True)
        return _with_prompt(self, bench, target_data(bench, target, seed=seed))

    def _sft(self):
        sft = SFT(self.params)
        sft.store = self.store
        return sft

    def _sft_dir(self, lm: Backend, bench: Benchmark, data, seed) -> Path:
        sft = self._sft()
        sft.prepare(lm, bench, data.target, seed=seed, store=self.store).close()
        return sft.store.path_for(sft.meta(lm, sft.data(bench, data.target, seed=seed), seed))

    def triples(self, lm: Backend, data: TargetData, sft_pairs: list) -> list[tuple[str, str, str]]:
        """(question, chosen, rejected), questions unwrapped. SELECT's mixture: each positive
        with 2 templates (chosen: the refusal, rejected: its reference answer), each negative
        with 3 (the reverse), in the shuffled order; else from the SFT pairs."""
        if self.params.mixture == "select":
            sel = data.select
            assert sel is not None  # the select mixture's data (_select_data) carries it
            rows = [
                (q.question, t, _answer(data, q.question))
                for q, ts in zip(data.related, sel["templates"])
                for t in ts
            ]
            rows += [
                (q.question, _answer(data, q.question), t)
                for q, ts in zip(data.unrelated, sel["negative_templates"])
                for t in ts
            ]
            return [rows[i] for i in sel["order"]]
        n_related = len(data.related)
        related_q = [q for q, _ in sft_pairs[:n_related]]
        comply = comply_answers(lm, data, related_q, self.params, self.name)
        triples = [(q, a, c) for (q, a), c in zip(sft_pairs[:n_related], comply)]
        triples += [
            (q, a, ABSTENTIONS[i % len(ABSTENTIONS)])
            for i, (q, a) in enumerate(sft_pairs[n_related:])
        ]
        return triples

    def build(self, lm: Backend, bench: Benchmark, data, directory: Path | None, *, seed, progress):
        assert directory is not None  # the adapter is saved: prepare passes a directory
        sft_dir = self._sft_dir(lm, bench, data, seed)
        triples = self.triples(lm, data, json.loads((sft_dir / "pairs.json").read_text()))
        template = _template(self, bench)
        with _training(lm) as (copy_, tokenizer):
            if self.params.dpo_init == "continue":
                from peft import PeftModel

                base = PeftModel.from_pretrained(copy_, str(sft_dir / "adapter"), is_trainable=True)
            else:
                base = _apply_adapter(copy_, sft_dir / "adapter")
            model = train_dpo(
                base,
                tokenizer,
                [(_wrap(template, q), c, r) for q, c, r in triples],
                self.params.finetune(),
                seed=seed,
                progress=progress,
            )
            model.save_pretrained(str(directory / "adapter"), selected_adapters=["default"])
            del model, base, copy_
            gc.collect()
        (directory / "triples.json").write_text(json.dumps(triples, indent=1))
        (directory / "sft.json").write_text(
            json.dumps({"sft_artifact": sft_dir.name, "dpo_init": self.params.dpo_init})
        )

    def load(self, lm: Backend, bench: Benchmark, data, directory: Path) -> Abstainer:
        info = json.loads((directory / "sft.json").read_text())
        continued = info.get("dpo_init", "merged") == "continue"
        sft_dir = self.store.root / "sft" / info.get("sft_artifact", "")
        if _serves_adapters(lm):  # one adapter over the base weights: SFT's and DPO's stacked
            if continued:  # the DPO adapter is the continued SFT one
                return _abstainer(self, lm, bench, data, directory / "adapter")
            served = stack_adapters(
                [sft_dir / "adapter", directory / "adapter"], directory / "served_adapter"
            )
            return _abstainer(self, lm, bench, data, served)
        if continued:
            model = _apply_adapter(_fresh_copy(lm), directory / "adapter")
        else:
            model = _apply_adapter(
                _apply_adapter(_fresh_copy(lm), sft_dir / "adapter"), directory / "adapter"
            )
        return _abstainer(self, lm, bench, data, model.eval())


def _with_prompt(technique: Technique, bench: Benchmark, data: TargetData) -> TargetData:
    """``data`` recording SELECT's plain template when questions are trained inside it."""
    template = _template(technique, bench)
    return data if template is None else replace(data, select={"prompt": template})


def _abstainer(
    technique: Technique, lm: Backend, bench: Benchmark, data: TargetData, model
) -> FineTunedAbstainer:
    template = _template(technique, bench)
    system = _protocol(technique, bench).system_prompt if template is not None else None
    return FineTunedAbstainer(lm, technique.name, data.target, model, template, system)
