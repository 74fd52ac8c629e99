"""Batched, deterministic generation with hooks: the engine every technique answers through."""

from workbench.generation.config import REFUSAL_SCORING, Generation, GenerationConfig
from workbench.generation.engine import generate, render_prompts, sample_seed
from workbench.generation.hooks import (
    ForwardHook,
    StepState,
    attached,
    layer_module_name,
)
from workbench.generation.tables import generations_frame

__all__ = [
    "REFUSAL_SCORING",
    "ForwardHook",
    "Generation",
    "GenerationConfig",
    "StepState",
    "attached",
    "generate",
    "generations_frame",
    "layer_module_name",
    "render_prompts",
    "sample_seed",
]
