"""The workbench's own engine as a back end: a transformers model answered by
:mod:`workbench.generation.engine`, with forward hooks (steering, gates, probes), weights to
train and edit, and exact scoring of given continuations.

Plain names, local paths and hub ids load here (``workbench.backends.load_model``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

import torch
from pydantic import model_validator

from workbench.backends.base import Backend, Capabilities, ModelRef, register_engine
from workbench.errors import ModelLoadError
from workbench.generation.config import Generation, GenerationConfig
from workbench.generation.engine import run_engine
from workbench.generation.hooks import ForwardHook
from workbench.models.loading import load_pretrained, resolve_device
from workbench.models.numerics import resolve_dtype
from workbench.settings import Settings

#: Everything: hooks on decoder blocks, local weights, adapters, scoring and distributions.
HF_CAPABILITIES = Capabilities(
    activations=True,
    weights=True,
    adapters=True,
    logprobs=True,
    scoring=True,
    distribution=True,
    steering=True,
)


class HFOptions(Settings):
    """The Hugging Face engine's options (a grid's ``model_options``); None leaves the load
    call's ``device``, ``dtype`` and ``revision``."""

    label: ClassVar[str] = "option"

    device: str | None = None
    dtype: str | None = None
    revision: str | None = None

    @model_validator(mode="after")
    def _resolve(self) -> Self:
        """The names resolved against what is installed, before any run folder is made."""
        device = resolve_device(self.device)  # None: "auto"
        if self.dtype is not None:
            resolve_dtype(self.dtype, device)
        return self


@register_engine
@dataclass
class HFModel(Backend):
    """A transformers model and its tokenizer, with what identifies them for provenance.

    Attributes:
        model: the ``transformers`` causal LM, in eval mode.
        tokenizer: its tokenizer, padding on the left (for batched generation).
        name: what the user asked for (registered name, path or hub id).
        model_id: a stable identifier for result rows (registered name or hub id or path).
        revision: what pins the weights: package version and file hash, hub commit, or a hash
            of the local config and weight file sizes.
        source_dir: the directory the weights were read from.
    """

    model: Any
    tokenizer: Any
    name: str
    model_id: str
    revision: str
    source_dir: Path
    extra: dict = field(default_factory=dict)

    backend: ClassVar[str] = "hf"
    options_type: ClassVar[type] = HFOptions
    engine: ClassVar[str] = "the Hugging Face engine"
    # unannotated, so the dataclass leaves it a class attribute (as ClassVar would) while the
    # type stays the base's instance attribute, which endpoint back ends set per instance
    capabilities = HF_CAPABILITIES

    @classmethod
    def load(
        cls,
        ref: ModelRef,
        name: str,
        *,
        options=None,
        device="auto",
        dtype="auto",
        revision=None,
        require_chat=True,
    ) -> HFModel:
        """Load ``ref.target``; ``options`` (a grid's ``model_options``) may set ``device``,
        ``dtype`` and ``revision``."""
        opts = cls.options_from(options, name)
        device = opts.device or device
        dtype = opts.dtype or dtype
        revision = opts.revision or revision
        model, tokenizer, src = load_pretrained(
            name, device=device, dtype=dtype, revision=revision, require_chat=require_chat
        )
        return cls(
            model=model,
            tokenizer=tokenizer,
            name=name,
            model_id=src.model_id,
            revision=str(src.revision),
            source_dir=Path(src.source_dir),
            extra=dict(src.extra),
        )

    @property
    def dtype_name(self) -> str:  # type: ignore[override]
        return str(self.dtype).removeprefix("torch.")

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def num_layers(self) -> int:
        """Decoder layers (of the text model, for multimodal configs such as Gemma-3 4B+)."""
        return int(self.model.config.get_text_config().num_hidden_layers)

    def hf(self) -> HFModel:
        """Itself: the Hugging Face engine."""
        return self

    def with_model(self, model: Any) -> HFModel:
        """The same provenance and tokenizer over another copy of the weights (an adapted or
        edited model)."""
        return HFModel(
            model=model,
            tokenizer=self.tokenizer,
            name=self.name,
            model_id=self.model_id,
            revision=self.revision,
            source_dir=self.source_dir,
            extra=dict(self.extra),
        )

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
        hooks: Sequence[ForwardHook] = (),
        repass: Callable[[list[int]], Sequence[bool]] | None = None,
    ) -> list[Generation]:
        if adapter is not None:
            raise ModelLoadError(
                f"model {self.name!r}: the Hugging Face engine answers through an adapted copy "
                "of the weights (HFModel.with_model), not an adapter directory"
            )
        return run_engine(
            self.model,
            self.tokenizer,
            prompts,
            config,
            hooks=hooks,
            stop_when=stop_when,
            chat=chat,
            progress=progress,
            desc=desc,
            repass=repass,
        )

    def option_probabilities(
        self, texts: Sequence[str], options: Sequence[Sequence[str]], batch_size: int = 32
    ):
        from workbench.generation.options import model_option_probabilities

        return model_option_probabilities(self.model, self.tokenizer, texts, options, batch_size)
