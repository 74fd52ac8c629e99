"""Models: load any causal LM by registered name, local path or hub id; chat formatting."""

from workbench.models.chat import (
    Prompt,
    has_chat_template,
    render_chat,
    supports_system_prompt,
)
from workbench.models.loading import LoadedModel, load_model, materialize_embedded
from workbench.models.registry import DEFAULT_MODEL, REGISTRY, ModelSpec

__all__ = [
    "DEFAULT_MODEL",
    "REGISTRY",
    "LoadedModel",
    "ModelSpec",
    "Prompt",
    "has_chat_template",
    "load_model",
    "materialize_embedded",
    "render_chat",
    "supports_system_prompt",
]
