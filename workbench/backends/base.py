"""The engines' registry and how a model's name picks its engine (:func:`parse_model`); the
interface every engine meets (:class:`Backend`, :class:`Capabilities`) is
:mod:`workbench.generation.backend`'s, re-exported here.

Plain names, paths and hub ids load on the workbench's Hugging Face engine
(:mod:`workbench.backends.hf`), which can do everything; ``vllm:<model>`` on vLLM in this
process; ``openai:<model>`` or ``openai:<model>@<base url>`` through any OpenAI-compatible
endpoint (the OpenAI API, ``vllm serve``, llama.cpp's server, Ollama). The others cannot reach
activations or (for an API) weights, so techniques declare what they need and a grid that
pairs a technique with a back end that lacks it fails in one line before any model loads
(``Technique.requires``).
"""

from __future__ import annotations

from typing import TypeVar

from workbench.errors import ConfigError
from workbench.generation.backend import (
    Backend,
    BlackBoxBackend,
    Capabilities,
    ModelRef,
    cut_when,
    parse_options,
)
from workbench.registry import Registry

#: Engine name -> its :class:`Backend` class; each engine's module registers its class with
#: :func:`register_engine`. Model names without a registered prefix load on ``DEFAULT_ENGINE``.
BACKENDS: Registry[type[Backend]] = Registry("engine")
DEFAULT_ENGINE = "hf"

B = TypeVar("B", bound=type[Backend])


def register_engine(cls: B) -> B:
    """Class decorator: register an engine under its own ``backend`` name (its prefix)."""
    BACKENDS.register(cls.backend, cls)
    return cls


def options_not_in_answers() -> frozenset[str]:
    """Option names of every registered engine that change how answers are fetched, paid for
    or scheduled, never what they are (each options class lists its own ``not_in_answers``)."""
    return frozenset(
        name
        for cls in BACKENDS.values()
        for name in getattr(cls.options_type, "not_in_answers", ())
    )


def parse_model(name: str) -> ModelRef:
    """Split ``<engine>:<model>`` for a registered engine prefix (``vllm:``, ``openai:``, ...);
    anything else is the default engine's (the Hugging Face engine's)."""
    name = str(name)
    prefix, sep, rest = name.partition(":")
    if not sep or prefix == DEFAULT_ENGINE or prefix not in BACKENDS:
        return ModelRef(DEFAULT_ENGINE, name)
    ref = BACKENDS[prefix].parse_target(rest, name)
    if not ref.target:
        raise ConfigError(f"model {name!r} names no model after '{prefix}:'")
    return ref


__all__ = [
    "BACKENDS",
    "DEFAULT_ENGINE",
    "Backend",
    "BlackBoxBackend",
    "Capabilities",
    "ModelRef",
    "cut_when",
    "options_not_in_answers",
    "parse_model",
    "parse_options",
    "register_engine",
]
