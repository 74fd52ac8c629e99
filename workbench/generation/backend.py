"""The interface every engine meets: :class:`Backend`, the :class:`Capabilities` it declares
and the :class:`ModelRef` its name is parsed into.

It lives beside the generation engine so that everything at the engines' level (steering,
option scoring, tables of generations) can name the type it is handed; the engines themselves
and the registry that picks one by a model's name are in :mod:`workbench.backends`.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from workbench.errors import ConfigError, ModelLoadError
from workbench.generation.config import Generation, GenerationConfig
from workbench.settings import Settings


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
        capture: reads pooled residual-stream activations at chosen layers inside the engine
            (:meth:`Backend.capture_activations`): vectors, means and thresholds are fitted on
            the engine's own weights, with no second copy. Engines with ``activations`` read
            them through hooks instead.
    """

    activations: bool
    weights: bool
    adapters: bool
    logprobs: bool
    scoring: bool
    distribution: bool
    steering: bool = False
    capture: bool = False

    def missing(self, needs: frozenset[str]) -> list[str]:
        return sorted(n for n in needs if not getattr(self, n))


@dataclass(frozen=True)
class ModelRef:
    """A model name split into its back end and what that back end loads.

    Attributes:
        backend: the engine's registered name (``hf``, ``vllm``, ``openai``, ...).
        target: the model for that back end (name, path, hub id, or the served model's name).
        base_url: for ``openai``, the endpoint given after ``@`` (else None: the environment's
            ``OPENAI_BASE_URL`` or the OpenAI API).
    """

    backend: str
    target: str
    base_url: str | None = None


class Backend(ABC):
    """A loaded model behind one engine: the one interface techniques, the judge, UnknownBench
    and the suites talk to.

    Subclasses declare :attr:`capabilities` (never inferred from a name) and the provenance
    every result row records (``name``, ``model_id``, ``revision``, ``dtype_name``), set
    ``tokenizer`` (None when the endpoint's tokenizer is not local), and implement
    :meth:`generate_prompts`. A back end with ``activations`` exposes ``model`` (the module
    hooks attach to); one with ``scoring`` implements :meth:`option_probabilities`.
    """

    #: the engine's name: the prefix of its model names (``vllm:<model>``), its registry key
    backend: ClassVar[str]
    #: the settings class of its options (``load(options=...)``, a grid's ``model_options``)
    options_type: ClassVar[type[Settings]]
    #: what it is, in an error's words ("the Hugging Face engine")
    engine: ClassVar[str]
    capabilities: Capabilities
    name: str
    model_id: str
    revision: str
    dtype_name: str
    tokenizer: Any
    #: the transformers module hooks attach to (engines with ``activations``; the others raise)
    model: Any

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
    def parse_target(cls, rest: str, name: str) -> ModelRef:
        """The model this engine loads from the part of ``name`` after its prefix."""
        return ModelRef(cls.backend, rest)

    @classmethod
    def check_target(cls, target: str) -> None:
        """Raise a one-line error unless ``target`` can load (without loading it): by default
        a registered, local or hub model."""
        from workbench.models.loading import check_model_name

        check_model_name(target)

    @classmethod
    def context_length(cls, target: str) -> int | None:
        """The most tokens ``target`` takes in one sequence, read without loading it (None:
        unknown here)."""
        from workbench.models.loading import context_length

        return context_length(target)

    @classmethod
    def layer_count(cls, target: str) -> int | None:
        """How many decoder blocks ``target`` has, read without loading it (None: unknown)."""
        from workbench.models.loading import layer_count

        return layer_count(target)

    @classmethod
    def technique_hint(cls, target: str) -> str:
        """Where a technique this engine cannot run would run (the end of that error line)."""
        return f"run it on the Hugging Face engine (model {target!r})"

    @classmethod
    def options_for(cls, options: dict[str, Any] | None, needs: frozenset[str]) -> Any:
        """The options to load with when a grid's techniques need ``needs`` (capability
        names): by default ``options`` as given."""
        return options

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
        ``options`` (its options class or a dict of its fields)."""

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

    # -- what engines with a capability add (the others say in one line that they lack it) --
    @property
    def num_layers(self) -> int:
        """Decoder layers (``activations``)."""
        raise self.unavailable("activations", "counting the model's layers")

    def capture_activations(
        self,
        prompts: Sequence,
        layers: Sequence[int],
        *,
        pooling: str = "last",
        tail: Sequence[int] | None = None,
        chat: bool = True,
        system: str | None = None,
        batch_size: int = 32,
        progress: bool = False,
        final_norm: bool = False,
    ):
        """Pooled activations read inside the engine, as
        :func:`workbench.steering.collect_activations` reads them through hooks (``capture``)."""
        raise self.unavailable("capture", "reading the model's activations")

    def with_model(self, model: Any) -> Backend:
        """The same provenance and tokenizer over another copy of the weights (``weights``)."""
        raise self.unavailable("weights", "answering with an adapted or edited copy")

    @contextlib.contextmanager
    def training_copy(self) -> Iterator[Backend]:
        """The same weights as a Hugging Face model to train on, for the ``with`` block only
        (``weights``); engines that hold their own copy (vLLM) lend one and get the memory
        back afterwards."""
        yield self.hf()

    def hf(self) -> Backend:
        """The same weights on the Hugging Face engine, for training or reading activations
        (``weights``)."""
        raise self.unavailable("weights", "training on the model's weights")

    def gate(
        self, prompts: Sequence, specs: Sequence, system: str | None = None, *, chat: bool = True
    ) -> list:
        """Each prompt's gate decision and votes under its abstainer ``specs`` read inside the
        engine (``steering``)."""
        raise self.unavailable("steering", "a concept gate inside the engine")

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
    def model(self) -> Any:
        raise self.unavailable("activations", "this step (it reads the model's layers)")


def parse_options(cls: type[Settings], options: Any, name: str, engine: str) -> Any:
    """A back end's options: an instance of the settings class ``cls`` from None, an instance,
    or a dict of its fields. Unknown fields and values of the wrong type (checked by the class)
    are one line naming the model and the option; ``engine`` says whose options they are."""
    if options is None or isinstance(options, cls):
        return options or cls()
    if not isinstance(options, dict):
        raise ModelLoadError(f"model {name!r}: options must be a {cls.__name__} or a mapping")
    known = list(cls.field_names())
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
