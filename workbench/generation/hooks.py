"""Forward hooks that see which prompts are in the batch.

The engine removes finished rows from the batch as it goes, so a hook that keeps per-prompt
state (a steering decision, say) needs to know which prompt each row belongs to at every step.
:class:`StepState` tells it; :class:`ForwardHook` receives it with every call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.errors import ConfigError, WorkbenchError


@dataclass
class StepState:
    """What the engine is doing right now (updated in place before every forward pass).

    Attributes:
        rows: for each row of the current batch, the index of its prompt in the caller's list.
        samples: for each row, its sample number.
        step: 0 during the prompt's forward pass (prefill), then 1, 2, ... for each new token.
        attention_mask: the mask over the whole sequence so far (rows x positions), 1 = real token.
        repass: True during a second prompt pass the caller asked for (``generate(repass=...)``).
    """

    rows: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    samples: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    step: int = 0
    attention_mask: torch.Tensor | None = None
    repass: bool = False

    @property
    def is_prefill(self) -> bool:
        return self.step == 0


#: ``fn(module, inputs, output, state) -> new output or None`` (as torch's forward hooks).
HookFn = Callable[[torch.nn.Module, tuple, Any, StepState], Any]


@dataclass(frozen=True)
class ForwardHook:
    """A forward hook on the module at ``module`` (a dotted name from ``named_modules()``).

    ``prefix_safe``: the hook neither reads nor changes the positions of a first prompt pass
    other than the last one (it may act on a repass and on generated tokens). Only then may the
    engine encode a prefix shared by all prompts once, without the hook; a repass is always
    encoded whole, so it sees every position.
    """

    module: str
    fn: HookFn
    prefix_safe: bool = False


class UnsupportedModelError(WorkbenchError, ValueError):
    """A model whose layout the workbench cannot act on (no decoder blocks where it looks, no
    MLP down-projection to edit, ...); the message names the model class and what is missing."""


#: Where causal LMs keep their decoder blocks: Llama, Mistral, Gemma, Qwen, Phi-3 (``model.layers``);
#: Gemma-3, Mistral-3 and other image-text models (``model.language_model.layers``, and
#: ``language_model.model.layers`` in older transformers); GPT-2, GPT-NeoX, OPT.
BLOCK_CONTAINERS = (
    "model.layers",
    "model.language_model.layers",
    "language_model.model.layers",
    "transformer.h",
    "gpt_neox.layers",
    "model.decoder.layers",
)


def decoder_blocks(model: torch.nn.Module) -> tuple[str, torch.nn.ModuleList]:
    """``(dotted name, module list)`` of the model's decoder blocks."""
    for prefix in BLOCK_CONTAINERS:
        try:
            blocks = model.get_submodule(prefix)
        except AttributeError:
            continue
        if isinstance(blocks, torch.nn.ModuleList):
            return prefix, blocks
    raise UnsupportedModelError(
        f"cannot find the decoder blocks of {type(model).__name__} (looked for "
        f"{', '.join(BLOCK_CONTAINERS)}): steering, activations, ROME/FT and LoRA need them"
    )


def layer_module_name(model: torch.nn.Module, layer: int) -> str:
    """Dotted name of decoder block ``layer`` (see :data:`BLOCK_CONTAINERS`).

    The output of this block is the residual stream after layer ``layer``: the same site is used
    to read activations and to add steering vectors.
    """
    prefix, blocks = decoder_blocks(model)
    check_layers([layer], len(blocks))
    return f"{prefix}.{layer % len(blocks)}"


def check_layers(layers: Sequence[int], num_layers: int) -> None:
    """One line naming the first of ``layers`` outside a model's ``num_layers`` blocks (each
    may count from the end: -1 is the last), rather than a wrapped or wrong block."""
    for layer in layers:
        if not -num_layers <= int(layer) < num_layers:
            raise ConfigError(
                f"layer {layer} is outside the model's {num_layers} blocks "
                f"(0..{num_layers - 1}, or -{num_layers}..-1 from the end)"
            )


@contextmanager
def attached(model: torch.nn.Module, hooks: Sequence[ForwardHook], state: StepState):
    """Register ``hooks`` on ``model`` for the duration of the block, passing ``state``."""
    handles = []
    try:
        for hook in hooks:
            module = model.get_submodule(hook.module)

            def wrapper(mod, args, output, _fn=hook.fn):
                return _fn(mod, args, output, state)

            handles.append(module.register_forward_hook(wrapper))
        yield
    finally:
        for h in handles:
            h.remove()
