"""The interface every engine meets: :class:`Backend`, the :class:`Capabilities` it declares,
and how a model's name picks its back end (:func:`parse_model`).

Plain names, paths and hub ids load on the workbench's Hugging Face engine
(:mod:`workbench.backends.hf`), which can do everything; ``vllm:<model>`` on vLLM in this
process; ``openai:<model>`` or ``openai:<model>@<base url>`` through any OpenAI-compatible
endpoint (the OpenAI API, ``vllm serve``, llama.cpp's server, Ollama). The others cannot reach
activations or (for an API) weights, so techniques declare what they need and a grid that
pairs a technique with a back end that lacks it fails in one line before any model loads
(``Technique.requires``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeVar

from workbench.errors import ConfigError, ModelLoadError
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
        steering: adds steering vectors to chosen requests and reads a concept gate inside the
            engine (conditional steering), per request.
    """

    activations: bool
    weights: bool
    adapters: bool
    logprobs: bool
    scoring: bool
    distribution: bool
    steering: bool = False

    def missing(self, needs: frozenset[str]) -> list[str]:
        return sorted(n for n in needs if not getattr(self, n))


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


class Backend(ABC):
    """A loaded model behind one engine: the one interface techniques, the judge, UnknownBench
    and the suites talk to.

    Subclasses declare :attr:`capabilities` (never inferred from a name) and the provenance
    every result row records (``name``, ``model_id``, ``revision``, ``dtype_name``), set
    ``tokenizer`` (None when the endpoint's tokenizer is not local), and implement
    :meth:`generate_prompts`. A back end with ``activations`` exposes ``model`` (the module
    hooks attach to); one with ``scoring`` implements :meth:`option_probabilities`.
    """

    backend: ClassVar[str]
    #: the dataclass of its options (``load(options=...)``, a grid's ``model_options``)
    options_type: ClassVar[type]
    #: what it is, in an error's words ("the Hugging Face engine")
    engine: ClassVar[str]
    capabilities: Capabilities
    name: str
    model_id: str
    revision: str
    dtype_name: str
    tokenizer: Any

    @property
    def numerics(self) -> str:
        """``reproducible`` (fp32: answers independent of batch, resume, executor and CPU),
        ``fast`` (bf16 or fp16: speed first) or ``endpoint`` (the server's own numerics);
        recorded in every result row (:mod:`workbench.models.numerics`)."""
        from workbench.models.numerics import numerics_of

        return "endpoint" if self.dtype_name == "endpoint" else numerics_of(self.dtype_name)

    @classmethod
    def options_from(cls, options: Any, name: str) -> Any:
        """``options`` (None, an ``options_type`` or a mapping of its fields) as an
        ``options_type``, checked: one line names model ``name`` and the option at fault."""
        return parse_options(cls.options_type, options, name, cls.engine)

    @classmethod
    @abstractmethod
    def load(
        cls,
        ref: ModelRef,
        name: str,
        *,
        options: Any = None,
        device: Any = "auto",
        dtype: Any = "auto",
        revision: str | None = None,
        require_chat: bool = True,
    ) -> Backend:
        """Load ``ref.target`` (``name`` as the user wrote it) with this back end's
        ``options`` (its options dataclass or a dict of its fields)."""

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
        hooks: Sequence = (),
        repass: Callable | None = None,
    ) -> list[Generation]:
        """One :class:`Generation` per (prompt, sample), ordered by prompt then sample;
        ``adapter`` names a LoRA adapter directory to answer through; ``hooks`` and ``repass``
        (:func:`workbench.generation.engine.run_engine`) need ``activations``."""

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

    def refuse_hooks(self, hooks: Sequence, repass: Callable | None) -> None:
        """For engines without ``activations``: raise when asked for hooks or a second pass."""
        if hooks or repass is not None:
            raise self.unavailable("activations", "forward hooks (steering, gates, probes)")

    def close(self) -> None:  # noqa: B027 (optional: engines without resources keep it)
        """Release the engine (processes, memory)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BlackBoxBackend(Backend):
    """A back end with no layers to reach (vLLM, an endpoint): ``model`` says so in one line."""

    @property
    def model(self):
        raise self.unavailable("activations", "this step (it reads the model's layers)")


def parse_options(cls: type, options: Any, name: str, engine: str) -> Any:
    """A back end's options: an instance of the dataclass ``cls`` from None, an instance, or a
    dict of its fields. Unknown fields and values of the wrong type (checked by the class) are
    one line naming the model and the option; ``engine`` says whose options they are."""
    if options is None or isinstance(options, cls):
        return options or cls()
    if not isinstance(options, dict):
        raise ModelLoadError(f"model {name!r}: options must be a {cls.__name__} or a mapping")
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ModelLoadError(
            f"model {name!r} loads on {engine}, whose options are {', '.join(known[:-1])} "
            f"and {known[-1]}; got {', '.join(map(str, unknown))}"
        )
    try:
        return cls(**options)
    except ConfigError as e:
        raise ConfigError(f"model {name!r}: {e}") from None


#: A token: an id, or (from an endpoint that returns no ids) its text.
Token = TypeVar("Token")


def cut_when(
    ids: Sequence[Token],
    decode: Callable[[Sequence[Token]], str],
    stop_when: Callable[[str], bool],
) -> int | None:
    """The fewest leading tokens of ``ids`` whose text satisfies ``stop_when`` (None if none):
    the cut the workbench's engine makes while decoding, applied after the fact."""
    for n in range(1, len(ids) + 1):
        if stop_when(decode(ids[:n])):
            return n
    return None
