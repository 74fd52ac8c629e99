"""Conditional activation steering: decide per prompt, then steer only the rows that fired.

The decision is made once per prompt from its own activations (a forward pass over the prompt
that stops after the deepest condition layer), and held for the whole generation. Rows whose
condition fired get ``strength * vector[l]`` added to the residual stream at every behaviour
layer ``l``, at every position, in the prompt pass and in every KV-cached decoding step; other
rows are untouched. Decisions are indexed by prompt, through the engine's ``StepState``, so
batch composition, row removal and sampling do not change who is steered. No state outlives a
call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from workbench.generation import ForwardHook, Generation, GenerationConfig, generate, layer_module_name
from workbench.models.chat import Prompt
from workbench.steering.activations import collect_activations, hidden_of
from workbench.steering.concept import Condition


@dataclass
class SteeringPlan:
    """What to add where: ``strength * vectors[i]`` at ``layers[i]``'s output."""

    layers: list[int]
    vectors: torch.Tensor  # (len(layers), hidden)
    strength: float = 1.0

    def hooks(self, model, steer_prompt: torch.Tensor) -> list[ForwardHook]:
        """Hooks that steer the rows whose prompt index is True in ``steer_prompt``."""
        hooks = []
        for i, layer in enumerate(self.layers):
            delta = self.strength * self.vectors[i]

            def add(module, args, output, state, _delta=delta):
                h = hidden_of(output)
                rows = steer_prompt.to(state.rows.device)[state.rows]
                if rows.any():
                    h[rows] += _delta.to(h.dtype).to(h.device)
                return output

            hooks.append(ForwardHook(layer_module_name(model, layer), add))
        return hooks


@dataclass
class ConditionalSteerer:
    """A condition (concept vectors + thresholds) and a behaviour (refusal) plan."""

    condition: Condition | None
    plan: SteeringPlan
    meta: dict = field(default_factory=dict)

    def decide(self, lm, prompts: Sequence[Prompt], system: str | None = None,
               batch_size: int = 32) -> torch.Tensor:
        """One boolean per prompt: is it about the concept? (Always True without a condition.)"""
        if self.condition is None:
            return torch.ones(len(prompts), dtype=torch.bool)
        acts = collect_activations(lm, prompts, self.condition.layers, system=system,
                                   batch_size=batch_size)
        return self.condition.decide(acts)

    def generate(self, lm, prompts: Sequence[Prompt], config: GenerationConfig | None = None,
                 *, decisions: torch.Tensor | None = None, progress: bool = True,
                 **kwargs) -> list[Generation]:
        """Generate with steering applied to the prompts whose condition fires."""
        config = config or GenerationConfig()
        if decisions is None:
            decisions = self.decide(lm, prompts, system=config.system_prompt, batch_size=config.batch_size)
        hooks = self.plan.hooks(lm.model, decisions)
        return generate(lm, prompts, config, hooks=hooks, progress=progress, **kwargs)
