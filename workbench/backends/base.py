"""What an engine other than the workbench's own offers, and the checks made before it runs.

A back end is chosen by the model's name: ``vllm:<model>`` (vLLM in this process),
``openai:<model>`` or ``openai:<model>@<base url>`` (any OpenAI-compatible endpoint: the
OpenAI API, ``vllm serve``, llama.cpp's server, Ollama). Plain names, paths and hub ids load
through the workbench's Hugging Face engine, which can do everything. The others cannot
reach activations or (for an API) weights, so techniques declare what they need
and a grid that pairs a technique with a back end that lacks it fails in one
line before any model loads (``Technique.requires``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workbench.errors import ConfigError
from workbench.generation.config import Generation, GenerationConfig


@dataclass(frozen=True)
class Capabilities:
    """What a back end can do.

    Attributes:
        activations: forward hooks on decoder blocks (steering, gates, probes, editing).
        weights: the model's weights are local, so adapters can be trained on them.
        adapters: serves LoRA adapters over the base weights without a merged copy.
        logprobs: log-probabilities of generated tokens (K-sample weighting, c(x)).
        scoring: log-probabilities of given continuations (the judge's constrained choice,
            number confidence, perplexity).
        distribution: the full next-token distribution (entropy).
    """

    activations: bool
    weights: bool
    adapters: bool
    logprobs: bool
    scoring: bool
    distribution: bool

    def missing(self, needs: frozenset[str]) -> list[str]:
        return sorted(n for n in needs if not getattr(self, n))


HF_CAPABILITIES = Capabilities(
    activations=True, weights=True, adapters=True, logprobs=True, scoring=True, distribution=True
)
VLLM_CAPABILITIES = Capabilities(
    activations=False, weights=True, adapters=True, logprobs=True, scoring=True, distribution=False
)


@dataclass(frozen=True)
class ModelRef:
    """A model name split into its back end and what that back end loads.

    Attributes:
        backend: ``hf``, ``vllm`` or ``openai``.
        target: the model for that back end (name, path, hub id, or the served model's name).
        base_url: for ``openai``, the endpoint given after ``@`` (else None: the environment's
            ``OPENAI_BASE_URL`` or the OpenAI API).
    """

    backend: str
    target: str
    base_url: str | None = None


def parse_model(name: str) -> ModelRef:
    """Split ``vllm:<model>`` / ``openai:<model>[@<url>]``; anything else is the HF engine's."""
    name = str(name)
    for prefix in ("vllm", "openai"):
        if name.startswith(prefix + ":"):
            rest = name[len(prefix) + 1 :]
            base_url = None
            if prefix == "openai" and "@" in rest:
                rest, base_url = rest.split("@", 1)
                if not base_url.startswith(("http://", "https://")):
                    raise ConfigError(
                        f"model {name!r}: the endpoint after '@' must be an "
                        "http(s) URL, e.g. openai:my-model@http://127.0.0.1:8000/v1"
                    )
            if not rest:
                raise ConfigError(f"model {name!r} names no model after '{prefix}:'")
            return ModelRef(prefix, rest, base_url)
    return ModelRef("hf", name)


def capabilities_of(name: str) -> Capabilities:
    """The capabilities of the back end ``name`` would load on, without loading anything."""
    ref = parse_model(name)
    if ref.backend == "vllm":
        return VLLM_CAPABILITIES
    if ref.backend == "openai":
        from workbench.backends.openai_api import API_CAPABILITIES

        return API_CAPABILITIES
    return HF_CAPABILITIES


def check_technique(model: str, technique: str, needs: frozenset[str]) -> None:
    """Raise ConfigError when ``technique`` needs (``Technique.requires``) what ``model``'s back
    end lacks."""
    missing = capabilities_of(model).missing(needs)
    if missing:
        ref = parse_model(model)
        why = {
            "activations": "forward hooks on the model's layers",
            "weights": "the model's weights to train on",
        }
        where = (
            f"run it on the Hugging Face engine (model {ref.target!r})"
            if ref.backend == "vllm"
            else "an API model takes black-box techniques only (base, zero_shot, few_shot_cot)"
        )
        raise ConfigError(
            f"technique {technique!r} needs {' and '.join(why.get(m, m) for m in missing)}, which "
            f"the {ref.backend} back end of model {model!r} does not give; {where}"
        )


class Backend(ABC):
    """A model behind an engine other than the workbench's: generation and scoring only.

    Subclasses set the provenance attributes a :class:`~workbench.models.LoadedModel` has
    (``name``, ``model_id``, ``revision``, ``dtype_name``) and ``tokenizer`` (None when the
    endpoint's tokenizer is not local), and implement :meth:`generate_prompts`.
    """

    backend: str
    capabilities: Capabilities
    name: str
    model_id: str
    revision: str
    dtype_name: str
    tokenizer = None

    @abstractmethod
    def generate_prompts(
        self,
        prompts: Sequence,
        config: GenerationConfig,
        *,
        chat: bool = True,
        stop_when: Callable[[str], bool] | None = None,
        progress: bool = True,
        desc: str = "generating",
        adapter: str | None = None,
    ) -> list[Generation]:
        """One :class:`Generation` per (prompt, sample), ordered by prompt then sample;
        ``adapter`` names a LoRA adapter directory to answer through."""

    def option_probabilities(
        self, texts: Sequence[str], options: Sequence[Sequence[str]], batch_size: int = 32
    ):
        raise self.unavailable("scoring", "the judge's constrained choice and number confidence")

    def next_token_logprobs(self, texts: Sequence[str]):
        raise self.unavailable("distribution", "next-token entropy")

    def unavailable(self, capability: str, what: str) -> ConfigError:
        return ConfigError(
            f"{what} needs {capability} ({capability!r}), which the {self.backend} "
            f"back end of model {self.name!r} does not give"
        )

    def close(self) -> None:
        """Release the engine (processes, memory)."""

    @property
    def model(self):
        raise self.unavailable("activations", "this step (it reads the model's layers)")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def cut_when(
    ids: Sequence[int], decode: Callable[[Sequence[int]], str], stop_when: Callable[[str], bool]
) -> int | None:
    """The fewest leading tokens of ``ids`` whose text satisfies ``stop_when`` (None if none):
    the cut the workbench's engine makes while decoding, applied after the fact."""
    for n in range(1, len(ids) + 1):
        if stop_when(decode(ids[:n])):
            return n
    return None
