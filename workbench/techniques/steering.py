"""Conditional activation steering as a technique (SELECT's CAST-style recipe).

Preparation, from training questions only:

1. Activations (last prompt token, every layer) of the related questions (target and
   descendants) and unrelated ones (ancestors and siblings, and concepts elsewhere), in one
   batched pass.
2. Concept vectors per layer: the difference of the two groups' means (default) or SELECT's first
   principal component of all related-minus-unrelated pairs.
3. On validation questions with near and far negatives (one batched pass): per-layer AUROC and
   thresholds (``workbench.steering.gate``); the best 1..``n_layers`` layers by AUROC, combined
   with AND, become the condition; layers at chance are flagged and never chosen.
4. The refusal vector (model-level, cached separately): abstaining minus complying activations.

At answer time one pass over the prompts decides which are about the concept (reading any layer,
as SELECT does); the generation then adds the refusal vector to those prompts only, from their
first token (``decision="in_pass"`` decides inside the prompt's own pass instead). The gate's
decision for each question is kept (``gate_decisions``, and each layer's vote in ``gate_votes``)
and lands in the result rows.

On vLLM (a back end with ``steering`` and ``capture`` but no ``activations``) the vectors, means
and thresholds are fitted from activations vLLM reads in its own forward pass
(:meth:`workbench.backends.VLLMModel.capture_activations`: one copy of the weights), and the
abstainer answers inside vLLM: its :class:`~workbench.steering.spec.SteerSpec` is registered
with vLLM's workers, which read the gate and steer per request
(:meth:`workbench.backends.VLLMModel.generate_steered`). The artifact records where its
activations were read (``activations_from``), so vectors read on one engine are never reused
for the other.

SELECT's own recipe (steering/repe.py, utils.py; the ``select`` preset) is: its contrast sampling
(``mixture="select"``), the reading template with the concept description, RepE's PCA of
randomly flipped pair differences averaged over 3 vectors (``method="repe_pca"``), raw cosine
similarity (``centered=False``), layer -1 read after the final norm, the top 3 layers by the
smallest validation gap (``rank_by="min_gap"``) with thresholds at the lowest related
similarity minus 0.04 (``threshold_rule="select"``), and the question wrapped in SELECT's plain
template with its system prompt at generation (``prompt_template="select"``). The refusal
vector stays the workbench's (SELECT's is fitted on a harmful/harmless dataset the release
lacks).

Defaults for ``behavior_layers`` and ``strength`` were derived on the embedded SmolLM2-135M by a
sweep over single layers 6-18 and pairs (strengths 0.5-1.5) on 16 held-out questions: layers at
47% and 53% of the depth (14 and 16 of 30) at strength 0.6 made it abstain on all 16 with
readable text; earlier layers garbled the output, later ones did not induce refusals.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

import torch
from pydantic import Field, model_validator

from workbench.errors import ConfigError
from workbench.generation import GenerationConfig
from workbench.select import prompts as select_prompts
from workbench.settings import Number, Positive, Seq
from workbench.steering import (
    Condition,
    ConditionalSteerer,
    SteeringPlan,
    collect_activations,
    fit_refusal_vector,
)
from workbench.steering.activations import Pooling
from workbench.steering.concept import Aggregate, ConceptVectors
from workbench.steering.fit import (
    CHOICES,
    Decision,
    Method,
    RankBy,
    ThresholdRule,
    check_choices,
    fit_gate,
)
from workbench.steering.gate import LayerStats
from workbench.techniques.artifacts import ArtifactStore
from workbench.techniques.base import (
    ARTIFACT_VERSION,
    Abstainer,
    Params,
    Technique,
    register,
)
from workbench.techniques.data import TargetData, seeded_rng, select_contrast_data, target_data

if TYPE_CHECKING:
    from workbench.generation.backend import Backend
    from workbench.taxonomy.benchmark import Benchmark


class SteeringParams(Params):
    """Parameters of conditional steering.

    Attributes:
        n_layers: most condition layers (the best 1..n by validation AUROC, whichever count
            votes most balanced-accurately on validation).
        aggregate: how condition layers vote (``all``, SELECT's; ``any``; ``majority``).
        method: concept direction: ``pc1`` (SELECT's first principal component of all pairs)
            or ``mean_diff`` (the difference of the group means).
        threshold_rule: ``youden`` (maximise TPR - FPR on validation) or ``min_related`` (the
            lowest related similarity moved ``threshold_adjust`` toward the midpoint).
        rank_by: rank layers by validation ``auroc`` or mean ``gap``.
        decision: ``separate`` (SELECT: one pass decides, reading any layer; generation then
            steers the prompts that fired from the first token) or ``in_pass`` (the decision is
            made inside the prompt's own forward pass).
        condition_before_behavior: with ``in_pass``, condition layers only below the first
            behaviour layer, so the prompt itself can be steered in the same pass.
        n_validation: validation questions per group (related; unrelated, half of them near:
            siblings, parent, ancestors), drawn from the benchmark's validation split.
        behavior_layers: layers that receive the refusal vector; None: 47% and 53% of the depth.
        strength: multiple of the refusal vector added.
        refusal_questions: questions (from across the taxonomy) the refusal vector is fitted on.
        pooling: how a question's activations are pooled (``last`` token, as SELECT, or ``mean``).
        mixture: ``workbench`` (``target_data``) or ``select`` (SELECT's contrast sampling and
            5 + 5 hard validation questions, ``select_contrast_data``).
        n_vectors: with ``method="repe_pca"`` (SELECT's: RepE PCA of randomly flipped pair
            differences), how many vectors are averaged.
        centered: compare activations minus the training mean (True) or raw (SELECT).
        reading_template: read the concept from SELECT's reading template holding the concept
            description and the question (training and deciding), not the bare question.
        prompt_template: ``select``: generate from SELECT's plain template ("answer the
            following question") with its system prompt (when the config sets none).
        read_final_norm: read the last layer after the final norm (SELECT's layer -1).
    Fields added after the first release are left out of ``to_dict`` at their defaults, so
    earlier artifacts keep their hashes.
    """

    n_layers: Positive = 3
    aggregate: Aggregate = "all"
    method: Method = "mean_diff"
    threshold_rule: ThresholdRule = "youden"
    threshold_adjust: Number = 0.5
    rank_by: RankBy = "auroc"
    decision: Decision = "separate"
    condition_before_behavior: bool = False
    n_validation: Annotated[int, Field(ge=2)] = 40
    behavior_layers: Seq[int] | None = None
    strength: Number = 0.6
    refusal_questions: int = 48
    pooling: Pooling = "last"
    mixture: Literal["workbench", "select"] = "workbench"
    n_vectors: Positive = 3
    centered: bool = True
    reading_template: bool = False
    prompt_template: Literal["", "select"] = ""
    read_final_norm: bool = False

    @model_validator(mode="before")
    @classmethod
    def _choices(cls, data: Any) -> Any:
        check_choices(data, _CHOICES)
        return data

    @model_validator(mode="after")
    def _decision(self) -> Self:
        if self.decision == "in_pass" and self.separate_read:
            raise ConfigError(
                "reading_template, prompt_template and read_final_norm need "
                "decision='separate' (the decision reads its own prompt)"
            )
        return self

    @property
    def separate_read(self) -> bool:
        """Whether the decision needs a pass of its own (another prompt or read site)."""
        return self.reading_template or bool(self.prompt_template) or self.read_final_norm

    def to_dict(self) -> dict:
        d = super().to_dict()
        return {k: v for k, v in d.items() if k not in _ADDED or v != _ADDED[k]}


#: The settings that are names, with what each allows.
_CHOICES = {**CHOICES, "mixture": ("workbench", "select"), "prompt_template": ("", "select")}

#: Fields added after artifacts were first saved, with their defaults (omitted from hashes there).
_ADDED = {
    "mixture": "workbench",
    "n_vectors": 3,
    "centered": True,
    "reading_template": False,
    "prompt_template": "",
    "read_final_norm": False,
}


#: The gate as it was before measuring it (in-pass decision below the behaviour layers, layers
#: ranked by mean gap, majority vote, PC1, thresholds from the lowest related similarity, 5 + 5
#: validation questions): kept to compare against.
LEGACY_GATE = {
    "aggregate": "majority",
    "method": "pc1",
    "threshold_rule": "min_related",
    "rank_by": "gap",
    "decision": "in_pass",
    "condition_before_behavior": True,
    "n_validation": 10,
}


def _activations_lm(lm: Backend):
    """The model the vectors are read from: ``lm`` when it exposes its layers or reads them
    itself (vLLM's capture), else the same weights on the Hugging Face engine."""
    return lm if lm.capabilities.activations or lm.capabilities.capture else lm.hf()


def activations_from(lm: Backend) -> dict[str, str]:
    """The artifact field naming the engine that read the activations, for an engine other
    than the Hugging Face one (whose artifacts carry none, as before it had company)."""
    caps = lm.capabilities  # the engine itself reads them, unless it has hooks or no capture
    return {} if caps.activations or not caps.capture else {"activations_from": lm.backend}


def _votes_text(votes) -> list[str] | None:
    """Each prompt's condition-layer votes as a string of 0/1 (the rows' ``gate_votes``)."""
    if votes is None:
        return None
    return ["".join("1" if bool(v) else "0" for v in row) for row in votes]


class SteeringAbstainer(Abstainer):
    """Generates with conditional steering; exposes the condition for inspection."""

    technique = "steering"

    def __init__(
        self,
        lm: Backend,
        target: str,
        steerer: ConditionalSteerer,
        table: list[LayerStats],
        validation: dict[str, torch.Tensor],
        all_vectors: ConceptVectors,
        separate: bool = True,
    ):
        self.lm, self.target, self.steerer = lm, target, steerer
        self.table, self.validation, self.all_vectors = table, validation, all_vectors
        self.separate = separate
        #: the gate's decision for each question of the last ``generate`` call
        self.gate_decisions: torch.Tensor | None = None
        #: each condition layer's vote per question of the last call ("101"), when known
        self.gate_votes: list[str] | None = None
        self._specs: dict = {}  # (mode, final_norm) -> SteerSpec

    @property
    def in_engine(self) -> bool:
        """Whether the model steers inside its own engine (vLLM) rather than through hooks."""
        return not self.lm.capabilities.activations

    def spec(self, final_norm: bool = False):
        """This abstainer as a :class:`~workbench.steering.spec.SteerSpec` (built once per mode:
        ``separate`` may be switched between calls)."""
        from workbench.steering.spec import spec_of

        mode = "separate" if self.separate else "in_pass"
        key = (mode, final_norm)
        if key not in self._specs:
            self._specs[key] = spec_of(self.target, self.steerer, mode=mode, final_norm=final_norm)
        return self._specs[key]

    def _generate_in_engine(self, prompts, config, progress, **kwargs):
        gens, records = self.lm.generate_steered(
            prompts,
            config,
            [self.spec()] * len(prompts),
            progress=progress,
            stop_when=kwargs.get("stop_when"),
        )
        self.gate_decisions = torch.tensor([bool(r["fired"]) for r in records], dtype=torch.bool)
        votes = [r.get("votes") for r in records]
        self.gate_votes = None if any(v is None for v in votes) else _votes_text(votes)
        return gens

    def generate(self, questions, config=None, progress=True, **kwargs):
        config = config or GenerationConfig()
        if self.in_engine:
            return self._generate_in_engine(list(questions), config, progress, **kwargs)
        out = self.steerer.generate(
            self.lm,
            list(questions),
            config,
            mode="separate" if self.separate else "in_pass",
            progress=progress,
            desc=self.technique,
            **kwargs,
        )
        self.gate_decisions = self.steerer.last_decisions
        self.gate_votes = _votes_text(self.steerer.last_votes)
        return out

    def decide(self, questions) -> torch.Tensor:
        if self.in_engine:
            records = self.lm.gate(list(questions), [self.spec()] * len(questions))
            return torch.tensor([bool(r["fired"]) for r in records], dtype=torch.bool)
        return self.steerer.decide(self.lm, list(questions))


class SelectSteeringAbstainer(SteeringAbstainer):
    """Decides in a pass of its own (SELECT's predict_concept), then steers the prompts that
    fired from their first token: the decision may read the reading template (``reading``:
    question -> prompt) and the final norm; the generation prompt may be SELECT's plain template
    (``wrap``, with ``{question}``) and system prompt."""

    def __init__(
        self,
        *args,
        reading=None,
        wrap: str | None = None,
        system: str | None = None,
        final_norm: bool = False,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.reading, self.wrap, self.system, self.final_norm = reading, wrap, system, final_norm

    def prompts(self, questions) -> list[str]:
        if self.wrap is None:
            return list(questions)
        return [self.wrap.replace(select_prompts.QUESTION, q) for q in questions]

    def _gate_prompts(self, questions, system: str | None) -> tuple[list, str | None]:
        """What the decision reads, and with which system prompt."""
        if self.reading is not None:  # SELECT: the reading prompt, no system turn
            return [self.reading(q) for q in questions], None
        return self.prompts(questions), system

    def decide(self, questions, system: str | None = None) -> torch.Tensor:
        questions = list(questions)
        cond = self.steerer.condition
        assert cond is not None  # Steering.load always gives the steerer a condition
        prompts, system = self._gate_prompts(questions, system)
        if self.in_engine:
            spec = self.spec(final_norm=self.final_norm)
            records = self.lm.gate(prompts, [spec] * len(prompts), system)
            self.gate_votes = _votes_text([r["votes"] for r in records])
            return torch.tensor([bool(r["fired"]) for r in records], dtype=torch.bool)
        acts = collect_activations(
            self.lm, prompts, cond.layers, system=system, final_norm=self.final_norm
        )
        self.gate_votes = _votes_text(cond.votes(acts))
        return cond.decide(acts)

    def generate(self, questions, config=None, progress=True, **kwargs):
        config = config or GenerationConfig()
        if self.system is not None and config.system_prompt is None:
            config = config.replace(system_prompt=self.system)
        questions = list(questions)
        if self.in_engine:  # the gate's pass inside vLLM (decide), then the steered answers
            decisions = self.decide(questions, system=config.system_prompt)
            votes = self.gate_votes
            gens, _ = self.lm.generate_steered(
                self.prompts(questions),
                config,
                [self.spec(final_norm=self.final_norm)] * len(questions),
                decisions=decisions.tolist(),
                progress=progress,
                stop_when=kwargs.get("stop_when"),
            )
            self.gate_decisions, self.gate_votes = decisions, votes
            return gens
        decisions = self.decide(questions, system=config.system_prompt)
        votes = self.gate_votes
        out = self.steerer.generate(
            self.lm,
            self.prompts(questions),
            config,
            decisions=decisions,
            progress=progress,
            desc=self.technique,
            **kwargs,
        )
        self.gate_decisions, self.gate_votes = self.steerer.last_decisions, votes
        return out


def _reading_prompt(template: str, description: str, question: str) -> str:
    return template.format(concept=description, stimulus=question)


def _protocol(bench: Benchmark, params: SteeringParams):
    """SELECT's protocol when the parameters need its text (else None)."""
    if not (params.reading_template or params.prompt_template):
        return None
    protocol = select_prompts.require_protocol(
        bench, "steering with reading_template/prompt_template='select'"
    )
    if params.reading_template and not all(
        f in protocol.reading_template for f in ("{concept}", "{stimulus}")
    ):
        raise ConfigError("SELECT's reading template lacks {concept} or {stimulus}")
    if params.prompt_template and "no_instruction" not in protocol.prompts:
        raise ConfigError("SELECT's prompts lack the no_instruction template")
    return protocol


def refusal_vector(
    lm: Backend,
    bench: Benchmark,
    n_questions: int,
    seed: int = 0,
    store: ArtifactStore | None = None,
    progress: bool = False,
) -> torch.Tensor:
    """The model's refusal vector at every layer, fitted once per model and cached."""
    ids = sorted(
        c for c in bench.atomic.concepts if c in bench.questions and bench.questions[c].train
    )
    rng = seeded_rng(seed, "refusal-vector")
    questions = [bench.questions[c].train[0] for c in rng.sample(ids, min(n_questions, len(ids)))]
    meta = {
        "technique": "refusal_vector",
        "version": ARTIFACT_VERSION,
        "model_id": lm.model_id,
        "revision": lm.revision,
        "questions": questions,
        **activations_from(lm),
    }
    store = store or ArtifactStore()
    found = store.lookup(meta)
    if found is None:
        with store.create(meta) as d:
            vec = fit_refusal_vector(lm, questions, list(range(lm.num_layers)), progress=progress)
            torch.save(vec, d / "refusal.pt")
        found = store.path_for(meta)
    return torch.load(found / "refusal.pt")


@register
class Steering(Technique[SteeringParams]):
    """Conditional activation steering toward abstention (white-box, inference-time)."""

    name = "steering"
    nature = "inference-time"
    access = "white-box"
    requires = frozenset({"steering"})
    Params = SteeringParams
    needs = ("train", "validation")

    def check_data(self, bench: Benchmark, target: str) -> None:
        super().check_data(bench, target)
        _protocol(bench, self.params)

    def meta(self, lm: Backend, data: TargetData, seed: int) -> dict:
        return {**super().meta(lm, data, seed), **activations_from(lm)}

    def data(self, bench: Benchmark, target: str, seed: int = 0) -> TargetData:
        p = self.params
        if p.mixture == "select":
            data = select_contrast_data(bench, target, seed, n_vectors=p.n_vectors)
        else:
            data = target_data(bench, target, seed=seed, n_val=p.n_validation)
        protocol = _protocol(bench, p)
        if protocol is not None and p.reading_template:  # the text the vectors are read from
            text = [protocol.reading_template, select_prompts.concept_description(bench, target)]
            digest = hashlib.sha256(json.dumps(text).encode()).hexdigest()[:16]
            data = replace(data, select={**(data.select or {}), "reading": digest})
        return data

    def _reading(self, bench: Benchmark, target: str):
        """question -> SELECT's reading prompt about ``target`` (None without the option)."""
        protocol = _protocol(bench, self.params)
        if protocol is None or not self.params.reading_template:
            return None
        desc = select_prompts.concept_description(bench, target)
        return partial(_reading_prompt, protocol.reading_template, desc)

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
        assert directory is not None  # vectors are saved: prepare passes a directory
        p = self.params
        lm = _activations_lm(lm)
        groups = [data.related, data.unrelated, data.val_related, data.val_unrelated]
        questions = [[q.question for q in g] for g in groups]
        reading = self._reading(bench, data.target)
        if reading is not None:
            questions = [[reading(q) for q in g] for g in questions]
        near = torch.tensor(
            [q.relation != "unrelated" for q in data.val_unrelated], dtype=torch.bool
        )
        flips = None
        if p.method == "repe_pca":
            flips = (data.select or {}).get("flips") or _flips(
                seed, data.target, len(data.related) * len(data.unrelated), p.n_vectors
            )
        vectors, sim_vr, sim_vu, table, chosen, behavior = fit_gate(
            lm, questions, p, near, flips=flips, progress=progress
        )
        refusal = refusal_vector(
            lm, bench, p.refusal_questions, seed=0, store=self.store, progress=progress
        )
        torch.save(
            {
                "vectors": vectors.vectors,
                "means": vectors.means,
                "sim_val_related": sim_vr,
                "sim_val_unrelated": sim_vu,
                "val_near": near,
                "refusal": refusal[behavior],
            },
            directory / "steering.pt",
        )
        (directory / "condition.json").write_text(
            json.dumps(
                {
                    "layers": chosen,
                    "thresholds": [table[l].threshold for l in chosen],
                    "behavior_layers": behavior,
                    "table": [row.__dict__ for row in table],
                },
                indent=1,
            )
        )

    def load(self, lm: Backend, bench: Benchmark, data, directory: Path) -> SteeringAbstainer:
        saved = torch.load(directory / "steering.pt")
        cond = json.loads((directory / "condition.json").read_text())
        layers = list(range(len(saved["vectors"])))
        all_vectors = ConceptVectors(layers, saved["vectors"], saved["means"])
        chosen = cond["layers"]
        p = self.params
        condition = Condition(
            all_vectors.select(chosen),
            cond["thresholds"],
            p.aggregate,
            inclusive=p.threshold_rule == "select",
        )
        plan = SteeringPlan(cond["behavior_layers"], saved["refusal"], p.strength)
        table = [LayerStats(**row) for row in cond["table"]]
        validation = {"related": saved["sim_val_related"], "unrelated": saved["sim_val_unrelated"]}
        args = (
            lm,
            data.target,
            ConditionalSteerer(condition, plan, meta=cond),
            table,
            validation,
            all_vectors,
        )
        if not p.separate_read:
            return SteeringAbstainer(*args, separate=p.decision == "separate")
        protocol = _protocol(bench, p)
        wrap = select_prompts.plain_prompt(protocol) if p.prompt_template else None
        return SelectSteeringAbstainer(
            *args,
            reading=self._reading(bench, data.target),
            wrap=wrap,
            system=protocol.system_prompt if wrap else None,
            final_norm=p.read_final_norm,
        )


def _flips(seed: int, target: str, n_pairs: int, n_vectors: int) -> list[str]:
    """Cumulative random pair flips (as SELECT's shuffle_data) when the data carries none."""
    rng, state, out = seeded_rng(seed, "repe-flips:" + target), [False] * n_pairs, []
    for _ in range(n_vectors):
        state = [s != (rng.random() >= 0.5) for s in state]
        out.append("".join("1" if s else "0" for s in state))
    return out
