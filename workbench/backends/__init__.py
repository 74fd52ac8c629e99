"""Engines besides the workbench's own: vLLM in-process and OpenAI-compatible endpoints.

Chosen by the model's name (``vllm:<model>``, ``openai:<model>[@<url>]``); everything that
takes a loaded model (techniques, the judge, UnknownBench, the refusal suite) works the same on
them as far as their capabilities reach (:class:`Capabilities`). A new back end is one module
with a :class:`Backend` subclass and an entry in :data:`BACKENDS`.
"""

from __future__ import annotations

from dataclasses import fields

from workbench.backends.base import (
    HF_CAPABILITIES,
    VLLM_CAPABILITIES,
    Backend,
    Capabilities,
    ModelRef,
    capabilities_of,
    check_technique,
    parse_model,
)
from workbench.errors import ModelLoadError


def _vllm(ref, name, options, dtype):
    from workbench.backends.vllm_engine import VLLMModel, VLLMOptions

    opts = _options(VLLMOptions, options, name)
    if dtype not in (None, "auto") and opts.dtype == "auto":
        from dataclasses import replace

        opts = replace(opts, dtype=str(dtype).removeprefix("torch."))
    return VLLMModel(ref.target, opts, name=name)


def _openai(ref, name, options, dtype):
    from dataclasses import replace

    from workbench.backends.openai_api import APIOptions, OpenAIModel

    opts = _options(APIOptions, options, name)
    if ref.base_url and not opts.base_url:
        opts = replace(opts, base_url=ref.base_url)
    return OpenAIModel(ref.target, opts, name=name)


#: Back end name -> loader(ref, name, options, dtype).
BACKENDS = {"vllm": _vllm, "openai": _openai}


def _options(cls, options, name):
    if options is None or isinstance(options, cls):
        return options or cls()
    if not isinstance(options, dict):
        raise ModelLoadError(f"model {name!r}: options must be a {cls.__name__} or a mapping")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ModelLoadError(
            f"model {name!r}: unknown option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )
    return cls(**options)


def load_backend(ref: ModelRef, name: str, options=None, dtype=None) -> Backend:
    """Load ``name`` on the back end ``ref`` names."""
    return BACKENDS[ref.backend](ref, name, options, dtype)


__all__ = [
    "BACKENDS",
    "HF_CAPABILITIES",
    "VLLM_CAPABILITIES",
    "Backend",
    "Capabilities",
    "ModelRef",
    "capabilities_of",
    "check_technique",
    "load_backend",
    "parse_model",
]
