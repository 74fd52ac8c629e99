"""Activations read inside vLLM's forward pass: the one routine behind
:meth:`workbench.backends.VLLMModel.capture_activations` (vLLM in process) and the steering
server's served model (:class:`workbench.backends.steer_server.served.ServedModel`, through
vLLM's own completions route).

Each prompt is a one-token request whose ``extra_args`` carry a
:class:`~workbench.backends.vllm_steering.Capture` and a tag (never steered, and with a salt of
its own, so every position is computed rather than served from the prefix cache); the workers
keep the pooled activations under the tag until asked (``workbench_captured``). The back end
says how prompts are encoded and how a batch of requests is sent and collected.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import torch

from workbench.backends.vllm_steering import capture_args, captured_tensors, captures_for
from workbench.generation.hooks import check_layers
from workbench.progress import tqdm

#: ``run(encoded, extra_args, salts, tags)``: send one one-token request per encoded prompt with
#: its extra args and prefix-cache salt, and answer the workers' records for ``tags``
Run = Callable[[list[Any], list[dict[str, Any]], list[str], list[str]], dict]


def capture_activations(
    prompts: Sequence,
    layers: Sequence[int],
    *,
    shape: tuple[int, int],
    encode: Callable[[list, str | None, bool], list[Any]],
    run: Run,
    pooling: str = "last",
    tail=None,
    chat: bool = True,
    system: str | None = None,
    batch_size: int = 32,
    progress: bool = False,
    final_norm: bool = False,
) -> torch.Tensor:
    """Pooled residual-stream activations, shape ``(len(prompts), len(layers), hidden)``,
    float32 on the CPU, as :func:`workbench.steering.collect_activations` reads them on the
    Hugging Face engine: the same rendering (``encode(prompts, system, chat)``), layers,
    pooling and final norm. ``shape``: the model's (hidden width, number of blocks).

    ``batch_size`` prompts at a time, as the engine reads them: a step's activations stay as
    large as an answer's prefill (a few hundred at once took 0.4 GB more on the embedded
    model), and the workers' records small."""
    if pooling not in ("last", "mean"):
        raise ValueError(f"pooling must be 'last' or 'mean', got {pooling!r}")
    check_layers(layers, shape[1])  # the workers would wrap one that is not
    prompts = list(prompts)
    if not prompts:
        return torch.empty(0, len(layers), int(shape[0]))
    encoded = encode(prompts, system, chat)
    caps = captures_for(len(prompts), layers, pooling, tail, final_norm)
    out = []
    step = max(1, batch_size)
    for start in tqdm(
        range(0, len(prompts), step), desc="activations", disable=not progress, leave=False
    ):
        part = range(start, min(start + step, len(prompts)))
        tags = [f"capture-{uuid.uuid4().hex}" for _ in part]
        got = run(
            [encoded[i] for i in part],
            [capture_args(caps[i], t) for i, t in zip(part, tags)],
            [f"workbench-capture:{t}" for t in tags],  # every position computed
            tags,
        )
        for i, acts in zip(part, captured_tensors(got, tags)):
            if acts is None:
                raise RuntimeError(f"vLLM recorded no activations for prompt {i}")
            out.append(acts)
    return torch.stack(out)
