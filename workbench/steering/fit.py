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

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

import torch
from pydantic import model_validator

from workbench.errors import ConfigError
from workbench.settings import Number, Positive, Seq, Settings
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

Method = Literal["pc1", "mean_diff", "repe_pca"]
ThresholdRule = Literal["youden", "min_related", "select"]
RankBy = Literal["auroc", "gap", "min_gap"]
Decision = Literal["separate", "in_pass"]

#: the allowed values of the settings that are names
CHOICES: dict[str, tuple[str, ...]] = {
    "aggregate": get_args(Aggregate),
    "method": get_args(Method),
    "threshold_rule": get_args(ThresholdRule),
    "rank_by": get_args(RankBy),
    "decision": get_args(Decision),
    "pooling": get_args(Pooling),
}


def check_choices(data: Any, allowed: Mapping[str, tuple[str, ...]] = CHOICES) -> None:
    """A raw setting that is a name outside ``allowed`` is one line in these words (a
    ``mode="before"`` validator's check: before the types, as these settings always were)."""
    if isinstance(data, dict):
        for name, names in allowed.items():
            if name in data and data[name] not in names:
                raise ConfigError(f"{name} must be one of {', '.join(names)}, got {data[name]!r}")


class FitSettings(Settings):
    """What fitting a gate and a spec reads (the meanings: ``SteeringParams``)."""

    label: ClassVar[str] = "setting"

    n_layers: Positive = 3
    aggregate: Aggregate = "all"
    method: Method = "mean_diff"
    threshold_rule: ThresholdRule = "youden"
    threshold_adjust: Number = 0.5
    rank_by: RankBy = "auroc"
    decision: Decision = "separate"
    condition_before_behavior: bool = False
    behavior_layers: Seq[int] | None = None
    strength: Number = 0.6
    pooling: Pooling = "last"
    centered: bool = True
    read_final_norm: bool = False

    @model_validator(mode="before")
    @classmethod
    def _choices(cls, data: Any) -> Any:
        check_choices(data)
        return data


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
