"""Models: resolve a name (registered, local path or hub id) to its weights, revision and dtype;
load them with transformers; chat formatting.

Which engine answers a loaded model is the back ends' business (:mod:`workbench.backends`):
``workbench.backends.load_model`` is the one entry point for loading a model to generate with.
"""

from workbench.models.chat import (
    Prompt,
    has_chat_template,
    render_chat,
    supports_system_prompt,
)
from workbench.models.loading import (
    ModelSource,
    default_model_name,
    load_pretrained,
    materialize_embedded,
    resolve_device,
    resolve_source,
)
from workbench.models.numerics import Numerics, numerics_of, resolve_dtype
from workbench.models.registry import DEFAULT_MODEL, MODELS, ModelSpec

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "ModelSource",
    "ModelSpec",
    "Numerics",
    "Prompt",
    "default_model_name",
    "has_chat_template",
    "load_pretrained",
    "materialize_embedded",
    "numerics_of",
    "render_chat",
    "resolve_device",
    "resolve_dtype",
    "resolve_source",
    "supports_system_prompt",
]
