"""Conditional activation steering: decide per prompt, then steer only the rows that fired.

By default (``mode="separate"``, SELECT's order) a prompt's decision is known before it is
steered: the prompts are encoded once with each condition layer voting on the last-token
activation; prompts that did not fire continue generating from that very pass, unsteered;
prompts that fired get their prompt pass again with the refusal vector added from their first
token (``generate(repass=...)``), and all continue in one batch. The extra cost is one prompt
pass for the prompts that fired. Both kinds of hook are ``prefix_safe`` (the vote reads only the
last token; the second pass is encoded whole), so a prefix shared by all prompts stays cached.

With ``mode="in_pass"`` (CAST) the decision is made during the prompt's own forward pass and
fixed for the whole generation. Rows whose condition fired get
``strength * vector[l]`` added to the residual stream at behaviour layer ``l``: in the prompt
pass at behaviour layers deeper than the deepest condition layer (earlier ones have already run
when the decision is made), and at every behaviour layer for every generated token (KV-cached
steps). Other rows are untouched. Decisions are indexed by prompt through the engine's
``StepState``, so batch composition, row removal and sampling do not change who is steered, and
the activations the condition reads are never steered ones. No state outlives a call except
``last_decisions``, a record of the last call's decisions.

With ``decisions=`` given up front (the inspector, tests), fired rows are steered at every
behaviour layer and position from the start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from workbench.errors import ConfigError
from workbench.generation import (
    ForwardHook,
    Generation,
    GenerationConfig,
    generate,
    layer_module_name,
)
from workbench.generation.hooks import decoder_blocks
from workbench.models.chat import Prompt
from workbench.steering.activations import collect_activations, hidden_of
from workbench.steering.concept import Condition
from workbench.steering.spec import SteerSpec, repeated_layer

if TYPE_CHECKING:
    from workbench.generation.backend import Backend


@dataclass
class SteeringPlan:
    """What to add where: ``strength * vectors[i]`` at ``layers[i]``'s output."""

    layers: list[int]
    vectors: torch.Tensor  # (len(layers), hidden)
    strength: float = 1.0

    def __post_init__(self) -> None:
        twice = repeated_layer(self.layers)
        if twice is not None:  # as every engine refuses it (vLLM keeps one vector per block)
            raise ConfigError(f"steering plan: {twice}")

    def hooks(self, model, steer_prompt: torch.Tensor) -> list[ForwardHook]:
        """Hooks that steer the rows whose prompt index is True in ``steer_prompt``."""
        twice = repeated_layer(self.layers, len(decoder_blocks(model)[1]))
        if twice is not None:
            raise ConfigError(f"steering plan: {twice}")
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
    last_decisions: torch.Tensor | None = None
    #: each condition layer's vote per prompt in the last call (None when decisions were given)
    last_votes: torch.Tensor | None = None

    def decide(
        self,
        lm: Backend,
        prompts: Sequence[Prompt],
        system: str | None = None,
        batch_size: int = 32,
    ) -> torch.Tensor:
        """One boolean per prompt: is it about the concept? (Always True without a condition.)"""
        if self.condition is None:
            return torch.ones(len(prompts), dtype=torch.bool)
        acts = collect_activations(
            lm, prompts, self.condition.layers, system=system, batch_size=batch_size
        )
        return self.condition.decide(acts)

    def generate(
        self,
        lm: Backend,
        prompts: Sequence[Prompt],
        config: GenerationConfig | None = None,
        *,
        decisions: torch.Tensor | None = None,
        mode: str = "separate",
        progress: bool = True,
        **kwargs,
    ) -> list[Generation]:
        """Generate with steering applied to the prompts whose condition fires.

        ``mode="separate"`` (SELECT's order: decide, then steer from the first token): the
        prompts are encoded once with the condition voting; those that did not fire go on
        generating unsteered from that pass, those that fired are generated again with the
        refusal vector added everywhere. ``mode="in_pass"``: one generation, the decision made
        inside the prompt pass (see the module docstring). With ``decisions`` given, they are used.
        """
        config = config or GenerationConfig()
        if decisions is None and self.condition is None:
            decisions = torch.ones(len(prompts), dtype=torch.bool)
        self.last_votes = None
        if decisions is not None:
            out = generate(
                lm,
                prompts,
                config,
                hooks=self.plan.hooks(lm.model, decisions),
                progress=progress,
                **kwargs,
            )
            fired = decisions
        elif mode == "in_pass":
            hooks, fired = self._in_pass_hooks(lm.model, len(prompts))
            out = generate(lm, prompts, config, hooks=hooks, progress=progress, **kwargs)
        else:
            out, fired = self._decide_then_steer(lm, prompts, config, progress, **kwargs)
        self.last_decisions = fired.clone()
        return out

    def _vote_hooks(
        self, model, n_prompts: int
    ) -> tuple[list[ForwardHook], torch.Tensor, torch.Tensor]:
        """Hooks that vote on each prompt's last token during the prompt pass."""
        cond = self.condition
        assert cond is not None  # generate decides without hooks when there is no condition
        fired = torch.zeros(n_prompts, dtype=torch.bool)
        votes = torch.zeros(n_prompts, len(cond.layers), dtype=torch.bool)
        deepest = max(cond.layers)
        hooks: list[ForwardHook] = []
        for j, layer in enumerate(cond.layers):

            def vote(module, args, output, state, _j=j, _layer=layer):
                if state.step != 0 or state.repass:
                    return output
                rows = state.rows
                sims = cond.vectors.similarity_at(_j, hidden_of(output)[:, -1, :])
                thr = cond.thresholds[_j]
                votes[rows, _j] = ((sims >= thr) if cond.inclusive else (sims > thr)).cpu()
                if _layer == deepest:
                    fired[rows] = cond.combine(votes[rows])
                return output

            hooks.append(ForwardHook(layer_module_name(model, layer), vote, prefix_safe=True))
        return hooks, fired, votes

    def _decide_then_steer(self, lm: Backend, prompts, config, progress, **kwargs):
        """One generation: the first prompt pass votes; prompts that fired get a second,
        steered prompt pass and are steered at every step; the others are untouched."""
        hooks, fired, self.last_votes = self._vote_hooks(lm.model, len(prompts))
        for i, layer in enumerate(self.plan.layers):
            delta = self.plan.strength * self.plan.vectors[i]

            def add(module, args, output, state, _delta=delta):
                if state.step == 0 and not state.repass:
                    return output  # the deciding pass itself is never steered
                h = hidden_of(output)
                weight = fired[state.rows].to(device=h.device, dtype=h.dtype)
                h.add_(weight[:, None, None] * _delta.to(device=h.device, dtype=h.dtype))
                return output

            hooks.append(ForwardHook(layer_module_name(lm.model, layer), add, prefix_safe=True))
        out = generate(
            lm,
            prompts,
            config,
            hooks=hooks,
            progress=progress,
            repass=lambda rows: fired[rows].tolist(),
            **kwargs,
        )
        return out, fired

    def _in_pass_hooks(self, model, n_prompts: int) -> tuple[list[ForwardHook], torch.Tensor]:
        """Hooks that decide during the prompt pass and steer the rows that fired."""
        hooks, fired, self.last_votes = self._vote_hooks(model, n_prompts)
        assert self.condition is not None  # checked by _vote_hooks
        deepest = max(self.condition.layers)
        for i, layer in enumerate(self.plan.layers):
            delta = self.plan.strength * self.plan.vectors[i]

            def add(module, args, output, state, _delta=delta, _layer=layer):
                if state.step == 0 and _layer <= deepest:
                    return output  # the decision is not known yet in this pass
                rows = fired[state.rows]
                if rows.any():
                    h = hidden_of(output)
                    h[rows.to(h.device)] += _delta.to(h.dtype).to(h.device)
                return output

            hooks.append(ForwardHook(layer_module_name(model, layer), add))
        return hooks, fired


def steerer_of(spec: SteerSpec) -> ConditionalSteerer:
    """The abstainer ``spec`` on the workbench's engine (what vLLM runs from the same spec)."""
    plan = SteeringPlan(list(spec.layers), spec.vectors.float(), float(spec.strength))
    return ConditionalSteerer(None if spec.gate is None else spec.gate.condition(), plan)
