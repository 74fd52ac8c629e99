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
decision for each question is kept (``gate_decisions``) and lands in the result rows.

Defaults for ``behavior_layers`` and ``strength`` were derived on the embedded SmolLM2-135M by a
sweep over single layers 6-18 and pairs (strengths 0.5-1.5) on 16 held-out questions: layers at
47% and 53% of the depth (14 and 16 of 30) at strength 0.6 made it abstain on all 16 with
readable text; earlier layers garbled the output, later ones did not induce refusals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from workbench.generation import GenerationConfig
from workbench.steering import (
    Condition,
    ConditionalSteerer,
    SteeringPlan,
    choose_gate,
    collect_activations,
    direction_agreement,
    fit_concept_vectors,
    fit_refusal_vector,
    layer_table,
)
from workbench.steering.concept import ConceptVectors
from workbench.steering.gate import LayerStats
from workbench.techniques.artifacts import ArtifactStore
from workbench.techniques.base import (
    ARTIFACT_VERSION,
    Abstainer,
    Params,
    Technique,
    register,
)
from workbench.techniques.data import TargetData, _rng, target_data


@dataclass(frozen=True)
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
    """

    n_layers: int = 3
    aggregate: str = "all"
    method: str = "mean_diff"
    threshold_rule: str = "youden"
    threshold_adjust: float = 0.5
    rank_by: str = "auroc"
    decision: str = "separate"
    condition_before_behavior: bool = False
    n_validation: int = 40
    behavior_layers: tuple[int, ...] | None = None
    strength: float = 0.6
    refusal_questions: int = 48
    pooling: str = "last"

    def __post_init__(self) -> None:
        from workbench.errors import ConfigError

        choices = {"aggregate": ("all", "any", "majority"), "method": ("pc1", "mean_diff"),
                   "threshold_rule": ("youden", "min_related"), "rank_by": ("auroc", "gap"),
                   "decision": ("separate", "in_pass"), "pooling": ("last", "mean")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.n_layers < 1:
            raise ConfigError(f"n_layers must be >= 1, got {self.n_layers}")
        if self.n_validation < 2:
            raise ConfigError(f"n_validation must be >= 2, got {self.n_validation}")


#: The gate as it was before measuring it (in-pass decision below the behaviour layers, layers
#: ranked by mean gap, majority vote, PC1, thresholds from the lowest related similarity, 5 + 5
#: validation questions): kept to compare against.
LEGACY_GATE = {"aggregate": "majority", "method": "pc1", "threshold_rule": "min_related",
               "rank_by": "gap", "decision": "in_pass", "condition_before_behavior": True,
               "n_validation": 10}


def default_behavior_layers(num_layers: int) -> list[int]:
    return sorted({round(0.47 * num_layers), round(0.53 * num_layers)})


class SteeringAbstainer(Abstainer):
    """Generates with conditional steering; exposes the condition for inspection."""

    technique = "steering"

    def __init__(self, lm, target: str, steerer: ConditionalSteerer, table: list[LayerStats],
                 validation: dict[str, torch.Tensor], all_vectors: ConceptVectors,
                 separate: bool = True):
        self.lm, self.target, self.steerer = lm, target, steerer
        self.table, self.validation, self.all_vectors = table, validation, all_vectors
        self.separate = separate
        #: the gate's decision for each question of the last ``generate`` call
        self.gate_decisions: torch.Tensor | None = None

    def generate(self, questions, config=None, progress=True, **kwargs):
        config = config or GenerationConfig()
        out = self.steerer.generate(self.lm, list(questions), config,
                                    mode="separate" if self.separate else "in_pass",
                                    progress=progress, desc=self.technique, **kwargs)
        self.gate_decisions = self.steerer.last_decisions
        return out

    def decide(self, questions) -> torch.Tensor:
        return self.steerer.decide(self.lm, list(questions))


def refusal_vector(lm, bench, n_questions: int, seed: int = 0, store: ArtifactStore | None = None,
                   progress: bool = False) -> torch.Tensor:
    """The model's refusal vector at every layer, fitted once per model and cached."""
    ids = sorted(c for c in bench.atomic.concepts
                 if c in bench.questions and bench.questions[c].train)
    rng = _rng(seed, "refusal-vector")
    questions = [bench.questions[c].train[0] for c in rng.sample(ids, min(n_questions, len(ids)))]
    meta = {"technique": "refusal_vector", "version": ARTIFACT_VERSION, "model_id": lm.model_id,
            "revision": lm.revision, "questions": questions}
    store = store or ArtifactStore()
    found = store.lookup(meta)
    if found is None:
        with store.create(meta) as d:
            vec = fit_refusal_vector(lm, questions, list(range(lm.num_layers)), progress=progress)
            torch.save(vec, d / "refusal.pt")
        found = store.path_for(meta)
    return torch.load(found / "refusal.pt")


@register
class Steering(Technique):
    """Conditional activation steering toward abstention (white-box, inference-time)."""

    name = "steering"
    nature = "inference-time"
    access = "white-box"
    Params = SteeringParams
    needs = ("train", "validation")

    def data(self, bench, target: str, seed: int = 0) -> TargetData:
        return target_data(bench, target, seed=seed, n_val=self.params.n_validation)

    def build(self, lm, bench, data: TargetData, directory: Path, *, seed, progress):
        p = self.params
        layers = list(range(lm.num_layers))
        groups = [data.related, data.unrelated, data.val_related, data.val_unrelated]
        questions = [q.question for g in groups for q in g]
        acts = collect_activations(lm, questions, layers, pooling=p.pooling, progress=progress)
        r, u, vr, vu = torch.split(acts, [len(g) for g in groups])
        vectors = fit_concept_vectors(r, u, layers, method=p.method)
        sim_vr, sim_vu = vectors.similarities(vr), vectors.similarities(vu)
        near = torch.tensor([q.relation != "unrelated" for q in data.val_unrelated], dtype=torch.bool)
        table = layer_table(sim_vr, sim_vu, layers, adjust=p.threshold_adjust, rule=p.threshold_rule,
                            near=near, cos_pc1_mean=direction_agreement(r, u))
        behavior = list(p.behavior_layers) if p.behavior_layers else default_behavior_layers(lm.num_layers)
        restrict = p.decision == "in_pass" and p.condition_before_behavior
        cols = [i for i, row in enumerate(table) if not restrict or row.layer < min(behavior)]
        chosen = choose_gate([table[i] for i in cols], sim_vr[:, cols], sim_vu[:, cols], k=p.n_layers,
                             aggregate=p.aggregate, rank_by=p.rank_by)
        refusal = refusal_vector(lm, bench, p.refusal_questions, seed=0, store=self.store,
                                 progress=progress)
        torch.save({"vectors": vectors.vectors, "means": vectors.means, "sim_val_related": sim_vr,
                    "sim_val_unrelated": sim_vu, "val_near": near, "refusal": refusal[behavior]},
                   directory / "steering.pt")
        (directory / "condition.json").write_text(json.dumps({
            "layers": chosen, "thresholds": [table[l].threshold for l in chosen],
            "behavior_layers": behavior, "table": [row.__dict__ for row in table]}, indent=1))

    def load(self, lm, bench, data, directory: Path) -> SteeringAbstainer:
        saved = torch.load(directory / "steering.pt")
        cond = json.loads((directory / "condition.json").read_text())
        layers = list(range(len(saved["vectors"])))
        all_vectors = ConceptVectors(layers, saved["vectors"], saved["means"])
        chosen = cond["layers"]
        condition = Condition(all_vectors.select(chosen), cond["thresholds"], self.params.aggregate)
        plan = SteeringPlan(cond["behavior_layers"], saved["refusal"], self.params.strength)
        table = [LayerStats(**row) for row in cond["table"]]
        validation = {"related": saved["sim_val_related"], "unrelated": saved["sim_val_unrelated"]}
        return SteeringAbstainer(lm, data.target, ConditionalSteerer(condition, plan, meta=cond),
                                 table, validation, all_vectors,
                                 separate=self.params.decision == "separate")
