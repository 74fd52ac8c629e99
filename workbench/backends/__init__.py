"""Engines as peers: the workbench's Hugging Face engine, vLLM in process and OpenAI-compatible
endpoints, each a :class:`Backend` that declares its :class:`Capabilities`.

:func:`load_model` is the one way to load a model to generate with; the name picks the back
end (``vllm:<model>``, ``openai:<model>[@<url>]``, anything else the Hugging Face engine), and
everything that takes a loaded model (techniques, the judge, UnknownBench, the refusal suite)
talks to the interface only. A new back end is one module with a :class:`Backend` subclass
that names its prefix (``backend = "myengine"``) and registers itself (``@register_engine``),
plus its import below.
"""

from __future__ import annotations

import os
from typing import Any

from workbench.backends.base import (
    BACKENDS,
    DEFAULT_ENGINE,
    Backend,
    BlackBoxBackend,
    Capabilities,
    ModelRef,
    options_not_in_answers,
    parse_model,
    register_engine,
)
from workbench.backends.hf import HF_CAPABILITIES, HFModel, HFOptions
from workbench.backends.openai_api import API_CAPABILITIES, APIOptions, OpenAIModel
from workbench.backends.vllm_engine import VLLM_CAPABILITIES, VLLMModel, VLLMOptions
from workbench.errors import ConfigError
from workbench.models.loading import default_model_name


def load_model(
    name: str | os.PathLike | None = None,
    *,
    device: str | None = "auto",
    dtype: Any = "auto",
    revision: str | None = None,
    require_chat: bool = True,
    options: Any = None,
) -> Backend:
    """Load a model on the back end its name picks, ready for batched chat generation.

    Args:
        name: a registered name (default ``smollm2-135m-instruct``, shipped offline, or
            ``$WORKBENCH_MODEL``), a local model directory, or a Hugging Face model id (needs
            the hub, or its local cache); ``vllm:<any of those>`` loads it on vLLM,
            ``openai:<model>[@<url>]`` reaches it through an OpenAI-compatible endpoint.
        device: ``"auto"`` (CUDA if available), ``"cpu"``, ``"cuda:0"``, ... (Hugging Face).
        dtype: ``"auto"`` (bf16 on capable GPUs and CPUs with native bf16, else fp32), or a
            dtype name.
        revision: hub revision (branch, tag or commit) for hub ids.
        require_chat: raise :class:`~workbench.errors.ChatTemplateError` if the tokenizer has
            no chat template (Hugging Face).
        options: a back end's options (:class:`VLLMOptions`, :class:`APIOptions`) or a dict of
            their fields; for the Hugging Face engine a dict of ``device``, ``dtype``,
            ``revision`` (a grid's ``model_options``, e.g. ``{"dtype": "float32"}``).

    Raises:
        ModelLoadError: unknown name, missing package, directory without weights, and the like.
    """
    name = str(name) if name is not None else default_model_name()
    ref = parse_model(name)
    return BACKENDS[ref.backend].load(
        ref,
        name,
        options=options,
        device=device,
        dtype=dtype,
        revision=revision,
        require_chat=require_chat,
    )


def capabilities_of(name: str) -> Capabilities:
    """What the back end ``name`` would load on declares it can do, without loading anything."""
    return BACKENDS[parse_model(name).backend].capabilities


def check_model(name: str) -> None:
    """Raise a one-line error unless ``name`` can load: a registered, local or hub model
    (checked without loading it; a hub id fast, offline too) on the Hugging Face engine or
    vLLM, or any ``openai:`` model (its endpoint is asked when it is first used)."""
    ref = parse_model(name)
    BACKENDS[ref.backend].check_target(ref.target)


def check_new_tokens(model: str, max_new_tokens: int, where: str = "max_new_tokens") -> None:
    """Raise a one-line ConfigError when ``max_new_tokens`` is more than ``model`` can hold in
    one sequence (its context length, read without loading it): such a run loads the model and
    then generates past what it was trained on until it is killed."""
    ref = parse_model(model)
    limit = BACKENDS[ref.backend].context_length(ref.target)
    if limit is not None and max_new_tokens > limit:
        raise ConfigError(
            f"{where} is {max_new_tokens}, more than model {model!r} holds in one sequence "
            f"({limit} tokens, prompt included)"
        )


def check_layer(model: str, layer: int, where: str = "layer") -> None:
    """Raise a one-line ConfigError when decoder block ``layer`` (negative: from the last) is
    not one of ``model``'s, read from its config without loading it."""
    ref = parse_model(model)
    count = BACKENDS[ref.backend].layer_count(ref.target)
    if count is not None and not -count <= layer < count:
        raise ConfigError(
            f"{where} is {layer}, but model {model!r} has {count} layers (0 to {count - 1}, "
            "or negative from the last)"
        )


def check_options(model: str, options: Any) -> None:
    """Raise a one-line error when ``options`` (a grid's ``model_options`` entry) names an
    option ``model``'s back end lacks or gives one a value of the wrong type: before any model
    loads, not when the first cell starts."""
    BACKENDS[parse_model(model).backend].options_from(options, model)


def check_technique(model: str, technique: str, needs: frozenset[str]) -> None:
    """Raise ConfigError when ``technique`` needs (``Technique.requires``) what ``model``'s back
    end lacks."""
    missing = capabilities_of(model).missing(needs)
    if missing:
        ref = parse_model(model)
        why = {
            "activations": "forward hooks on the model's layers",
            "weights": "the model's weights to train on",
            "steering": "steering vectors and a concept gate inside the engine",
        }
        raise ConfigError(
            f"technique {technique!r} needs {' and '.join(why.get(m, m) for m in missing)}, which "
            f"the {ref.backend} back end of model {model!r} does not give; "
            + BACKENDS[ref.backend].technique_hint(ref.target)
        )


def load_options_for(model: str, options: dict[str, Any] | None, needs: frozenset[str]) -> Any:
    """The options ``model`` loads with when the techniques it runs need ``needs``: its
    engine's say (vLLM turns its steering extension on for a steering technique)."""
    return BACKENDS[parse_model(model).backend].options_for(options, needs)


__all__ = [
    "API_CAPABILITIES",
    "BACKENDS",
    "DEFAULT_ENGINE",
    "HF_CAPABILITIES",
    "VLLM_CAPABILITIES",
    "APIOptions",
    "Backend",
    "BlackBoxBackend",
    "Capabilities",
    "HFModel",
    "HFOptions",
    "ModelRef",
    "OpenAIModel",
    "VLLMModel",
    "VLLMOptions",
    "capabilities_of",
    "check_layer",
    "check_model",
    "check_new_tokens",
    "check_options",
    "check_technique",
    "load_model",
    "load_options_for",
    "options_not_in_answers",
    "parse_model",
    "register_engine",
]
