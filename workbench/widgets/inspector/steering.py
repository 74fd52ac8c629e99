"""The steering inspector's model work: a question's vote at each condition layer, a steerer
from the controls' values, and the unsteered and conditionally steered answers to compare."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from workbench.generation import GenerationConfig, generate
from workbench.steering import (
    Condition,
    ConditionalSteerer,
    SteeringPlan,
    collect_activations,
)
from workbench.steering.concept import Aggregate
from workbench.widgets.inspector.state import LayerVote

if TYPE_CHECKING:
    from workbench.generation.backend import Backend


def condition_votes(
    lm: Backend, abstainer, question: str, layers: list[int], thresholds: dict[int, float]
) -> list[LayerVote]:
    """The question's similarity and vote at each chosen layer."""
    if not layers:
        return []
    acts = collect_activations(lm, [question], layers)
    sims = abstainer.all_vectors.select(layers).similarities(acts)[0]
    return [LayerVote(l, float(s), thresholds[l]) for l, s in zip(layers, sims)]


def build_steerer(
    abstainer,
    layers: list[int],
    thresholds: dict[int, float],
    strength: float,
    aggregate: Aggregate,
) -> ConditionalSteerer:
    """A steerer from the inspector's current control values."""
    cond = Condition(
        abstainer.all_vectors.select(layers), [thresholds[l] for l in layers], aggregate
    )
    base = abstainer.steerer.plan
    return ConditionalSteerer(cond, SteeringPlan(base.layers, base.vectors, strength))


def compare_answers(
    lm: Backend,
    steerer: ConditionalSteerer,
    question: str,
    max_new_tokens: int = 48,
    step: Callable[[str], None] | None = None,
) -> tuple[str, str, bool]:
    """(unsteered answer, conditionally steered answer, whether the condition fired)."""
    cfg = GenerationConfig(max_new_tokens=max_new_tokens)
    step and step("deciding")
    fired = bool(steerer.decide(lm, [question])[0])
    step and step("generating the unsteered answer")
    plain = generate(lm, [question], cfg, progress=False)[0].text
    step and step("generating the steered answer")
    steered = steerer.generate(
        lm, [question], cfg, decisions=torch.tensor([fired]), progress=False
    )[0].text
    return plain, steered, fired
