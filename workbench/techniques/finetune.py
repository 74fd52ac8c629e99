"""Fine-tuning techniques: LoRA SFT, and SFT followed by DPO.

SFT data (training questions only): the target's and its descendants' questions paired with an
abstention; parent, sibling and unrelated questions paired with the model's own answers (so the
model keeps answering them: specificity). DPO continues from the SFT adapter (merged into a copy
of the weights, which is also DPO's reference) with preference pairs: abstain over comply for
related questions, the reverse for the others.

The base model is never modified: each abstainer holds its own copy with the adapters merged.
"""

from __future__ import annotations

import copy
import gc
import json
from dataclasses import dataclass, fields
from pathlib import Path

from workbench.finetuning import FinetuneParams, train_dpo, train_sft
from workbench.generation import GenerationConfig, generate
from workbench.steering.behavior import ABSTENTIONS
from workbench.techniques.base import Abstainer, Params, Technique, register
from workbench.techniques.data import TargetData


@dataclass(frozen=True)
class SFTParams(Params, FinetuneParams):
    """LoRA settings, plus what the model learns to say when it complies.

    Attributes:
        answer_tokens: length of the model's own answers used as targets.
        comply_answers: ``own`` (the model's own greedy answers, so it keeps its behaviour on
            unrelated questions) or ``reference`` (the benchmark's reference answers where it has
            them, SELECT's ``responses``; the model's own elsewhere).
    """

    answer_tokens: int = 32
    comply_answers: str = "own"

    def __post_init__(self) -> None:
        from workbench.errors import ConfigError

        if self.comply_answers not in ("own", "reference"):
            raise ConfigError(f"comply_answers must be own or reference, got {self.comply_answers!r}")

    def finetune(self) -> FinetuneParams:
        return FinetuneParams(**{f.name: getattr(self, f.name) for f in fields(FinetuneParams)})

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class _AdaptedModel:
    """A LoadedModel-like view: the adapted copy with the base model's tokenizer and ids."""

    def __init__(self, lm, model):
        self.model, self.tokenizer = model, lm.tokenizer
        self.model_id, self.revision = lm.model_id, lm.revision


class FineTunedAbstainer(Abstainer):
    def __init__(self, lm, technique: str, target: str, model):
        self.technique, self.target = technique, target
        self.adapted = _AdaptedModel(lm, model)

    def generate(self, questions, config=None, progress=True, **kwargs):
        if self.adapted is None:
            raise RuntimeError(f"{self.technique} abstainer for {self.target!r} was closed")
        return generate(self.adapted, list(questions), config or GenerationConfig(),
                        progress=progress, desc=self.technique, **kwargs)

    def close(self) -> None:
        self.adapted = None
        gc.collect()


def _own_answers(lm, questions: list[str], tokens: int) -> list[str]:
    gens = generate(lm, questions, GenerationConfig(max_new_tokens=tokens), progress=False)
    return [g.text for g in gens]


def comply_answers(lm, data: TargetData, questions: list[str], params: SFTParams) -> list[str]:
    """Compliant answers to ``questions``: the benchmark's reference answers (``reference``,
    where it has them) or the model's own."""
    ref = data.answers if params.comply_answers == "reference" else {}
    missing = [q for q in questions if q not in ref]
    own = dict(zip(missing, _own_answers(lm, missing, params.answer_tokens))) if missing else {}
    return [ref[q].comply if q in ref else own[q] for q in questions]


def _apply_adapter(model, directory: Path):
    import warnings

    from peft import PeftModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers renames inside peft
        return PeftModel.from_pretrained(model, str(directory)).merge_and_unload()


def _fresh_copy(lm):
    return copy.deepcopy(lm.model)


@register
class SFT(Technique):
    """LoRA supervised fine-tuning toward abstention on the target and its descendants."""

    name = "sft"
    nature = "fine-tuning"
    access = "white-box"
    Params = SFTParams
    needs = ("train",)

    def pairs(self, lm, data: TargetData) -> list[tuple[str, str]]:
        related = [(q.question, ABSTENTIONS[i % len(ABSTENTIONS)]) for i, q in enumerate(data.related)]
        keep_q = [q.question for q in data.unrelated]
        keep = list(zip(keep_q, comply_answers(lm, data, keep_q, self.params)))
        return related + keep

    def build(self, lm, bench, data, directory: Path, *, seed, progress):
        pairs = self.pairs(lm, data)
        model = train_sft(_fresh_copy(lm), lm.tokenizer, pairs, self.params.finetune(), seed=seed,
                          progress=progress)
        model.save_pretrained(str(directory / "adapter"))
        (directory / "pairs.json").write_text(json.dumps(pairs, indent=1))
        del model
        gc.collect()

    def load(self, lm, bench, data, directory: Path) -> Abstainer:
        model = _apply_adapter(_fresh_copy(lm), directory / "adapter").eval()
        return FineTunedAbstainer(lm, self.name, data.target, model)


@register
class SFTDPO(Technique):
    """SFT, then DPO on abstain-vs-comply preferences (reversed for retained concepts)."""

    name = "sft_dpo"
    nature = "fine-tuning"
    access = "white-box"
    Params = SFTParams
    needs = ("train",)

    def _sft(self):
        sft = SFT(self.params)
        sft.store = self.store
        return sft

    def _sft_dir(self, lm, bench, data, seed) -> Path:
        sft = self._sft()
        sft.prepare(lm, bench, data.target, seed=seed, store=self.store).close()
        return sft.store.path_for(sft.meta(lm, data, seed))

    def build(self, lm, bench, data, directory: Path, *, seed, progress):
        sft_dir = self._sft_dir(lm, bench, data, seed)
        pairs = json.loads((sft_dir / "pairs.json").read_text())
        n_related = len(data.related)
        related_q = [q for q, _ in pairs[:n_related]]
        comply = comply_answers(lm, data, related_q, self.params)
        triples = [(q, a, c) for (q, a), c in zip(pairs[:n_related], comply)]
        triples += [(q, a, ABSTENTIONS[i % len(ABSTENTIONS)]) for i, (q, a) in enumerate(pairs[n_related:])]
        base = _apply_adapter(_fresh_copy(lm), sft_dir / "adapter")
        model = train_dpo(base, lm.tokenizer, triples, self.params.finetune(), seed=seed, progress=progress)
        model.save_pretrained(str(directory / "adapter"))
        (directory / "triples.json").write_text(json.dumps(triples, indent=1))
        (directory / "sft.json").write_text(json.dumps({"sft_artifact": sft_dir.name}))
        del model, base
        gc.collect()

    def load(self, lm, bench, data, directory: Path) -> Abstainer:
        sft_name = json.loads((directory / "sft.json").read_text())["sft_artifact"]
        sft_dir = self.store.root / "sft" / sft_name
        model = _apply_adapter(_apply_adapter(_fresh_copy(lm), sft_dir / "adapter"), directory / "adapter")
        return FineTunedAbstainer(lm, self.name, data.target, model.eval())
