"""Conditional activation steering as a technique (SELECT's CAST-style recipe).

Preparation, from training questions only:

1. Activations (last prompt token, every layer) of the related questions (target and
   descendants) and unrelated ones (outside the subtree, parent and siblings), in one batched pass.
2. Concept vectors per layer: first principal component of all related-minus-unrelated pairs.
3. On validation questions (one batched pass): per-layer similarities, gaps and thresholds; up
   to ``n_layers`` layers with the largest gaps become the condition.
4. The refusal vector (model-level, cached separately): abstaining minus complying activations.

At answer time a prompt is steered toward abstention only if its condition fires; the decision is
made inside the prompt's own forward pass (see ``workbench.steering.conditional``).

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
from workbench.steering import (Condition, ConditionalSteerer, SteeringPlan, choose_layers,
                                collect_activations, fit_concept_vectors, fit_refusal_vector,
                                layer_table)
from workbench.steering.concept import ConceptVectors, LayerStats
from workbench.techniques.artifacts import ArtifactStore
from workbench.techniques.base import ARTIFACT_VERSION, Abstainer, Params, Technique, register
from workbench.techniques.data import TargetData, _rng


@dataclass(frozen=True)
class SteeringParams(Params):
    """Parameters of conditional steering.

    Attributes:
        n_layers: condition layers kept (largest validation gaps).
        threshold_adjust: threshold = min related similarity moved this share toward the midpoint.
        aggregate: how condition layers vote (``all``, ``any``, ``majority``).
        behavior_layers: layers that receive the refusal vector; None: 47% and 53% of the depth.
        strength: multiple of the refusal vector added.
        refusal_questions: questions (from across the taxonomy) the refusal vector is fitted on.
        pooling: how a question's activations are pooled (``last`` token, as SELECT, or ``mean``).
        condition_before_behavior: choose condition layers only below the first behaviour layer,
            so the decision is known before steering starts and the prompt itself is steered in
            the same pass. With False (SELECT's unrestricted choice) the prompt is steered only
            at behaviour layers deeper than the deepest condition layer; on the embedded model
            that halved the abstention rate on target questions (0.25-0.5 against 0.75-0.88 on
            river, scientist and movie), so True is the default.
    """

    n_layers: int = 3
    threshold_adjust: float = 0.5
    aggregate: str = "majority"
    behavior_layers: tuple[int, ...] | None = None
    strength: float = 0.6
    refusal_questions: int = 48
    pooling: str = "last"
    condition_before_behavior: bool = True

    def __post_init__(self) -> None:
        from workbench.errors import ConfigError

        if self.aggregate not in ("all", "any", "majority"):
            raise ConfigError(f"aggregate must be all, any or majority, got {self.aggregate!r}")
        if self.n_layers < 1:
            raise ConfigError(f"n_layers must be >= 1, got {self.n_layers}")
        if self.pooling not in ("last", "mean"):
            raise ConfigError(f"pooling must be last or mean, got {self.pooling!r}")


def default_behavior_layers(num_layers: int) -> list[int]:
    return sorted({round(0.47 * num_layers), round(0.53 * num_layers)})


class SteeringAbstainer(Abstainer):
    """Generates with conditional steering; exposes the condition for inspection."""

    technique = "steering"

    def __init__(self, lm, target: str, steerer: ConditionalSteerer, table: list[LayerStats],
                 validation: dict[str, torch.Tensor], all_vectors: ConceptVectors):
        self.lm, self.target, self.steerer = lm, target, steerer
        self.table, self.validation, self.all_vectors = table, validation, all_vectors

    def generate(self, questions, config=None, progress=True, **kwargs):
        return self.steerer.generate(self.lm, list(questions), config or GenerationConfig(),
                                     progress=progress, desc=self.technique, **kwargs)

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

    def build(self, lm, bench, data: TargetData, directory: Path, *, seed, progress):
        p = self.params
        layers = list(range(lm.num_layers))
        groups = [data.related, data.unrelated, data.val_related, data.val_unrelated]
        questions = [q.question for g in groups for q in g]
        acts = collect_activations(lm, questions, layers, pooling=p.pooling, progress=progress)
        sizes = [len(g) for g in groups]
        r, u, vr, vu = torch.split(acts, sizes)
        vectors = fit_concept_vectors(r, u, layers)
        sim_vr, sim_vu = vectors.similarities(vr), vectors.similarities(vu)
        table = layer_table(sim_vr, sim_vu, layers, adjust=p.threshold_adjust)
        behavior = list(p.behavior_layers) if p.behavior_layers else default_behavior_layers(lm.num_layers)
        candidates = [r for r in table if not p.condition_before_behavior or r.layer < min(behavior)]
        chosen = choose_layers(candidates, k=p.n_layers)
        refusal = refusal_vector(lm, bench, p.refusal_questions, seed=0, store=self.store,
                                 progress=progress)
        torch.save({"vectors": vectors.vectors, "means": vectors.means, "sim_val_related": sim_vr,
                    "sim_val_unrelated": sim_vu, "refusal": refusal[behavior]}, directory / "steering.pt")
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
                                 table, validation, all_vectors)
