"""Fitting an abstainer's gate and its whole spec from question lists.

:func:`fit_gate` is what the steering technique (:mod:`workbench.techniques.steering`) runs on
a benchmark's questions; :func:`fit_from_questions` fits a whole
:class:`~workbench.steering.spec.SteerSpec` from lists alone, what a served model's
``POST /v1/abstainers/fit`` runs. Both read activations through
:func:`~workbench.steering.collect_activations`, so on ``vllm:`` (or a served model) inside the
engine. :class:`FitSettings` holds the settings they read; the technique's ``SteeringParams``
carries the same fields with the same defaults (a test keeps them equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from workbench.errors import ConfigError
from workbench.fieldtypes import check_fields
from workbench.steering.activations import Pooling, collect_activations
from workbench.steering.behavior import fit_refusal_vector
from workbench.steering.concept import (
    Aggregate,
    Condition,
    direction_agreement,
    fit_concept_vectors,
    fit_repe_vectors,
)
from workbench.steering.conditional import ConditionalSteerer, SteeringPlan
from workbench.steering.gate import choose_gate, layer_table, select_layers

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

#: the allowed values of the settings that are names
CHOICES = {
    "aggregate": ("all", "any", "majority"),
    "method": ("pc1", "mean_diff", "repe_pca"),
    "threshold_rule": ("youden", "min_related", "select"),
    "rank_by": ("auroc", "gap", "min_gap"),
    "decision": ("separate", "in_pass"),
    "pooling": ("last", "mean"),
}


@dataclass(frozen=True)
class FitSettings:
    """What fitting a gate and a spec reads (the meanings: ``SteeringParams``)."""

    n_layers: int = 3
    aggregate: Aggregate = "all"
    method: str = "mean_diff"
    threshold_rule: str = "youden"
    threshold_adjust: float = 0.5
    rank_by: str = "auroc"
    decision: str = "separate"
    condition_before_behavior: bool = False
    behavior_layers: tuple[int, ...] | None = None
    strength: float = 0.6
    pooling: Pooling = "last"
    centered: bool = True
    read_final_norm: bool = False

    def __post_init__(self) -> None:
        check_fields(self, label="setting")
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(
                    f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        if self.n_layers < 1:
            raise ConfigError(f"n_layers must be >= 1, got {self.n_layers}")


def default_behavior_layers(num_layers: int) -> list[int]:
    return sorted({round(0.47 * num_layers), round(0.53 * num_layers)})


def fit_gate(
    lm: Backend,
    questions: list[list[str]],
    p: Any,
    near: torch.Tensor,
    *,
    flips: list[str] | None = None,
    progress: bool = False,
    system: str | None = None,
):
    """``p``: :class:`FitSettings` or the technique's SteeringParams (the same fields).

    The gate of an abstainer from four question lists (related, unrelated and their
    validation halves): the concept vectors at every layer, the validation similarities, the
    layer table, the chosen gate layers and the behaviour layers. ``near`` marks validation
    unrelated questions that are close to the concept (for the threshold rules that use it);
    ``flips``: RepE's pair flips for ``method="repe_pca"``."""
    layers = list(range(lm.num_layers))
    acts = collect_activations(
        lm,
        [q for g in questions for q in g],
        layers,
        pooling=p.pooling,
        progress=progress,
        final_norm=p.read_final_norm,
        system=system,
    )
    r, u, vr, vu = torch.split(acts, [len(g) for g in questions])
    if p.method == "repe_pca":
        assert flips is not None  # the caller draws them (the technique from its data)
        vectors = fit_repe_vectors(r, u, layers, flips, centered=p.centered)
    else:
        vectors = fit_concept_vectors(r, u, layers, method=p.method)
        if not p.centered:
            vectors.means = torch.zeros_like(vectors.means)
    sim_vr, sim_vu = vectors.similarities(vr), vectors.similarities(vu)
    table = layer_table(
        sim_vr,
        sim_vu,
        layers,
        adjust=p.threshold_adjust,
        rule=p.threshold_rule,
        near=near,
        cos_pc1_mean=direction_agreement(r, u),
    )
    behavior = (
        list(p.behavior_layers) if p.behavior_layers else default_behavior_layers(lm.num_layers)
    )
    restrict = p.decision == "in_pass" and p.condition_before_behavior
    cols = [i for i, row in enumerate(table) if not restrict or row.layer < min(behavior)]
    if p.rank_by == "min_gap":  # SELECT: top k by the smallest validation gap
        chosen = sorted(select_layers([table[i] for i in cols], k=p.n_layers))
    else:
        chosen = choose_gate(
            [table[i] for i in cols],
            sim_vr[:, cols],
            sim_vu[:, cols],
            k=p.n_layers,
            aggregate=p.aggregate,
            rank_by=p.rank_by,
        )
    return vectors, sim_vr, sim_vu, table, chosen, behavior


def fit_from_questions(
    lm: Backend,
    name: str,
    related: list[str],
    unrelated: list[str],
    val_related: list[str],
    val_unrelated: list[str],
    refusal_questions: list[str],
    params: FitSettings | None = None,
    *,
    system: str | None = None,
    progress: bool = False,
):
    """An abstainer (:class:`~workbench.steering.spec.SteerSpec`) from question lists alone, as
    the steering technique fits one from a benchmark: the gate from related and unrelated
    questions (thresholds from the validation lists), the refusal vector from
    ``refusal_questions``. What a served model's ``POST /v1/abstainers/fit`` runs; on
    ``vllm:`` the activations are read inside vLLM."""
    from workbench.steering.spec import spec_of

    p = params or FitSettings()
    if (
        p.method == "repe_pca"
        or getattr(p, "reading_template", False)
        or getattr(p, "prompt_template", "")
    ):
        raise ConfigError(
            "a fit from question lists takes the workbench's methods (pc1, mean_diff), without "
            "SELECT's reading or prompt templates (they need a benchmark: run the technique)"
        )
    groups = [list(related), list(unrelated), list(val_related), list(val_unrelated)]
    for label, g in zip(
        ("related", "unrelated", "validation related", "validation unrelated"), groups
    ):
        if len(g) < 2:
            raise ConfigError(f"{label} needs at least 2 questions, got {len(g)}")
    if not refusal_questions:
        raise ConfigError("refusal_questions is empty: the refusal vector is fitted on them")
    near = torch.zeros(len(groups[3]), dtype=torch.bool)
    vectors, _, _, table, chosen, behavior = fit_gate(
        lm, groups, p, near, progress=progress, system=system
    )
    refusal = fit_refusal_vector(
        lm, list(refusal_questions), list(range(lm.num_layers)), progress=progress
    )
    condition = Condition(
        vectors.select(chosen),
        [table[l].threshold for l in chosen],
        p.aggregate,
        inclusive=p.threshold_rule == "select",
    )
    plan = SteeringPlan(behavior, refusal[behavior], p.strength)
    mode = "separate" if p.decision == "separate" else "in_pass"
    return spec_of(name, ConditionalSteerer(condition, plan), mode=mode)
