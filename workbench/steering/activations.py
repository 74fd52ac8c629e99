"""Read the residual stream at chosen layers for many prompts, in batches.

The read site is the output of decoder block ``l`` (:func:`workbench.generation.layer_module_name`),
the same site steering adds to. Pooling is mask-aware: with left padding the last position is the
last real token; ``"mean"`` averages only real tokens (optionally only the last ``tail`` tokens of
each prompt, e.g. a response prefix). The forward pass stops after the deepest requested layer.
Memory is linear in the number of prompts: the result is prompts x layers x hidden.
``final_norm=True`` reads the last block after the model's final norm, as Hugging Face's
``hidden_states[-1]`` (what SELECT's layer -1 is).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import torch

from workbench.generation.batching import pad_batch
from workbench.generation.engine import render_prompts
from workbench.generation.hooks import UnsupportedModelError, decoder_blocks, layer_module_name
from workbench.models.chat import Prompt
from workbench.progress import tqdm

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

Pooling = Literal["last", "mean"]


class _Stop(Exception):
    """Raised by the hook on the deepest layer to skip the rest of the forward pass."""


def final_norm_name(model) -> str:
    """Dotted name of the norm after the last decoder block: a sibling of the blocks
    (Llama/Mistral/Gemma/Qwen/Phi-3 and image-text models' ``norm``, GPT-2's ``ln_f``,
    GPT-NeoX's and OPT's ``final_layer_norm``)."""
    parent = decoder_blocks(model)[0].rsplit(".", 1)[0]
    for leaf in ("norm", "ln_f", "final_layer_norm"):
        try:
            model.get_submodule(f"{parent}.{leaf}")
            return f"{parent}.{leaf}"
        except AttributeError:
            continue
    raise UnsupportedModelError(
        f"cannot find the final norm of {type(model).__name__} next to its "
        f"decoder blocks ({parent}.norm, .ln_f or .final_layer_norm)"
    )


def hidden_size(model) -> int:
    """Width of the residual stream (of the text model, for image-text models)."""
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(text.hidden_size)


def hidden_of(output) -> torch.Tensor:
    """The hidden states in a decoder block's output (a tensor, or a tuple led by one)."""
    return output[0] if isinstance(output, tuple) else output


def collect_activations(
    lm: Backend,
    prompts: Sequence[Prompt],
    layers: Sequence[int],
    *,
    pooling: Pooling = "last",
    tail: Sequence[int] | None = None,
    chat: bool = True,
    system: str | None = None,
    batch_size: int = 32,
    progress: bool = False,
    final_norm: bool = False,
) -> torch.Tensor:
    """Pooled activations, shape ``(len(prompts), len(layers), hidden)``, float32 on the CPU.

    Args:
        lm: a back end with ``activations`` (hooks on ``lm.model``), or one with ``capture``
            (vLLM), which reads them inside its own forward pass.
        prompts: user messages / conversations (``chat=True``) or final strings (``chat=False``).
        layers: decoder block indices to read.
        pooling: ``"last"`` token or ``"mean"`` over real tokens.
        tail: with ``"mean"``, pool only each prompt's last ``tail[i]`` tokens.
        final_norm: read the model's last block after its final norm.
    """
    caps = getattr(lm, "capabilities", None)
    if caps is not None and not caps.activations:  # an engine that reads them itself (vLLM)
        return lm.capture_activations(
            prompts,
            layers,
            pooling=pooling,
            tail=tail,
            chat=chat,
            system=system,
            batch_size=batch_size,
            progress=progress,
            final_norm=final_norm,
        )
    if not prompts:
        return torch.empty(0, len(layers), hidden_size(lm.model))
    model, tok = lm.model, lm.tokenizer
    texts = render_prompts(tok, prompts, system, chat=chat)
    encoded = [tok(t, add_special_tokens=not chat)["input_ids"] for t in texts]
    order = sorted(range(len(texts)), key=lambda i: -len(encoded[i]))
    device = next(model.parameters()).device
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    names = [layer_module_name(model, l) for l in layers]
    depth = [int(n.rsplit(".", 1)[1]) for n in names]
    if final_norm:
        last = layer_module_name(model, -1)
        names = [final_norm_name(model) if n == last else n for n in names]
        depth = [d + (1 if n == final_norm_name(model) else 0) for d, n in zip(depth, names)]
    deepest = max(range(len(layers)), key=lambda j: depth[j])
    size = hidden_size(model)
    out = torch.empty(len(texts), len(layers), size)
    current: dict = {}

    def make_hook(j: int):
        def hook(module, args, output):
            h = hidden_of(output).float()
            mask = current["pool_mask"]
            if pooling == "last":
                pooled = h[:, -1, :]
            else:
                pooled = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
            current["acts"][:, j, :] = pooled.cpu()
            if j == deepest:
                raise _Stop

        return hook

    handles = [
        model.get_submodule(n).register_forward_hook(make_hook(j)) for j, n in enumerate(names)
    ]
    try:
        with torch.inference_mode():
            for start in tqdm(
                range(0, len(order), batch_size),
                desc="activations",
                disable=not progress,
                leave=False,
            ):
                chunk = order[start : start + batch_size]
                ids, mask = pad_batch([encoded[i] for i in chunk], pad, "left")
                width = ids.shape[1]
                pool_mask = mask.float()
                if tail is not None:  # only each prompt's last tail[i] tokens
                    for r, i in enumerate(chunk):
                        pool_mask[r, : width - min(int(tail[i]), len(encoded[i]))] = 0.0
                ids, mask = ids.to(device), mask.to(device)
                current["pool_mask"] = pool_mask.to(device)
                current["acts"] = torch.empty(len(chunk), len(layers), size)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                try:
                    model(
                        input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False
                    )
                except _Stop:
                    pass
                out[chunk] = current["acts"]
    finally:
        for h in handles:
            h.remove()
    return out
