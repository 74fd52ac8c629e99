"""How well a steering gate discriminates, measured on held-out evaluation questions.

For a target concept the questions are grouped as the metrics group them: the target's own and
its descendants' (the gate should fire), SELECT's specificity set's (near: siblings, parent,
ancestors) and concepts' elsewhere (far) (it should not). For a gate (chosen layers, thresholds,
vote) we report its true-positive rate on the first two groups, its false-positive rates on the
other two, and AUROCs of a continuous gate score against near and far negatives: the margin by
which the prompt clears its thresholds (the smallest margin over the layers for an AND vote, the
largest for OR, the median for a majority), so that AUROC describes the whole trade-off curve,
not one operating point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from workbench.steering.activations import collect_activations
from workbench.steering.concept import Condition
from workbench.steering.gate import auroc

if TYPE_CHECKING:
    from workbench.generation.backend import Backend
    from workbench.taxonomy.benchmark import Benchmark

GROUPS = ("target", "descendant", "near", "far")


@dataclass(frozen=True)
class GateQuestions:
    """Evaluation questions of one target by group (never seen when the gate was chosen)."""

    target: str
    questions: dict[str, list[str]]


def gate_questions(bench: Benchmark, target: str, n: int = 20, seed: int = 0) -> GateQuestions:
    """Up to ``n`` evaluation questions per group, spread over concepts."""
    from workbench.experiments.runner import evaluation_questions

    qs = evaluation_questions(bench, target, n, n, n, seed=seed, n_unrelated=n)
    near = {"parent", "ancestor", "sibling", "other_relation"}
    groups: dict[str, list[str]] = {g: [] for g in GROUPS}
    for q in qs:
        key = "near" if q.relation in near else ("far" if q.relation == "unrelated" else q.relation)
        if key in groups:
            groups[key].append(q.question)
    return GateQuestions(target, groups)


def gate_margin(condition: Condition, acts: torch.Tensor) -> torch.Tensor:
    """Per prompt, how far it clears the condition's thresholds (``acts``: the condition's layers).
    Positive exactly when the gate fires (for ``all`` and ``any``; for ``majority`` with an odd
    number of layers)."""
    margins = condition.vectors.similarities(acts) - torch.tensor(condition.thresholds)[None]
    if condition.aggregate == "all":
        return margins.min(-1).values
    if condition.aggregate == "any":
        return margins.max(-1).values
    return margins.median(-1).values


def evaluate_gate(
    lm: Backend,
    condition: Condition,
    questions: GateQuestions,
    acts: dict[str, torch.Tensor] | None = None,
    offset: float = 0.0,
) -> dict:
    """TPR on target and descendant questions, FPR on near and far ones, and the margin's AUROC
    (target + descendants against near, and against far). ``acts`` may hold each group's
    activations at the condition's layers (computed here otherwise); ``offset`` raises every
    threshold (for trade-off curves)."""
    if acts is None:
        acts = {
            g: collect_activations(lm, q, condition.layers) for g, q in questions.questions.items()
        }
    margin = {g: gate_margin(condition, a) - offset for g, a in acts.items() if len(a)}
    rate = {g: float((m > 0).float().mean()) for g, m in margin.items()}
    pos = torch.cat([margin[g] for g in ("target", "descendant") if g in margin])
    return {
        "target": questions.target,
        "tpr_target": rate.get("target", float("nan")),
        "tpr_descendant": rate.get("descendant", float("nan")),
        "fpr_near": rate.get("near", float("nan")),
        "fpr_far": rate.get("far", float("nan")),
        "auroc_near": auroc(pos, margin["near"]) if "near" in margin else float("nan"),
        "auroc_far": auroc(pos, margin["far"]) if "far" in margin else float("nan"),
        "layers": list(condition.layers),
        "aggregate": condition.aggregate,
    }


def gate_sweep(
    lm: Backend,
    bench: Benchmark,
    targets,
    settings: dict[str, dict],
    n: int = 20,
    seed: int = 0,
    offsets=(-0.2, -0.1, -0.05, 0.0, 0.05, 0.1, 0.2),
    store=None,
    progress: bool = False,
):
    """Prepare the steering technique with each of ``settings`` (name -> parameters) for every
    target and evaluate its gate on held-out questions.

    Returns ``(per_target, curve)``: one row per (setting, target) with :func:`evaluate_gate`'s
    numbers, and per (setting, offset) the mean TPR and FPRs with every threshold raised by
    ``offset`` (the trade-off curve).
    """
    import pandas as pd

    from workbench.progress import tqdm
    from workbench.techniques import get_technique
    from workbench.techniques.steering import SteeringAbstainer

    rows, curve = [], []
    layers = list(range(lm.num_layers))
    for target in tqdm(list(targets), desc="gate sweep", disable=not progress):
        qs = gate_questions(bench, target, n, seed)
        all_acts = {g: collect_activations(lm, q, layers) for g, q in qs.questions.items() if q}
        for name, params in settings.items():
            ab = get_technique("steering", **params).prepare(
                lm, bench, target, seed=seed, store=store
            )
            assert isinstance(ab, SteeringAbstainer)  # what the steering technique prepares
            cond = ab.steerer.condition
            assert cond is not None  # Steering.load always sets one
            acts = {g: a[:, cond.layers] for g, a in all_acts.items()}
            chosen = [r for r in ab.table if r.layer in cond.layers]
            rows.append(
                {
                    "setting": name,
                    **evaluate_gate(lm, cond, qs, acts),
                    "val_auroc": sum(r.auroc for r in chosen) / len(chosen),
                    "all_layers_at_chance": all(r.at_chance for r in ab.table),
                }
            )
            for off in offsets:
                curve.append(
                    {
                        "setting": name,
                        "target": target,
                        "offset": off,
                        **{
                            k: v
                            for k, v in evaluate_gate(lm, cond, qs, acts, off).items()
                            if k.startswith(("tpr", "fpr"))
                        },
                    }
                )
    per_target = pd.DataFrame(rows)
    curve = (
        pd.DataFrame(curve)
        .groupby(["setting", "offset"], as_index=False)[
            ["tpr_target", "tpr_descendant", "fpr_near", "fpr_far"]
        ]
        .mean()
    )
    return per_target, curve
