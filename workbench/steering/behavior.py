"""The refusal (behaviour) vector: the direction from complying to abstaining.

For each of a set of questions, the assistant turn is prefilled twice: once with an abstention
("I'm sorry, but I can't help with questions about that.") and once with the opening of the
model's own answer (its greedy continuation). The residual stream is mean-pooled over the
prefilled tokens at every layer; the vector is the mean difference, abstaining minus complying.
Adding it (times a strength) while the model answers pushes it to abstain; the steering
benchmark and tests measure that it does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from workbench.generation import GenerationConfig, generate
from workbench.models.chat import render_chat
from workbench.steering.activations import collect_activations

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

#: Abstention openings used for the behaviour vector and as fine-tuning targets.
ABSTENTIONS: tuple[str, ...] = (
    "I'm sorry, but I can't help with questions about that topic.",
    "I'm sorry, but I can't answer that.",
    "I can't discuss this topic, sorry.",
    "I'm sorry, but that is a subject I'm not able to help with.",
    "I'm afraid I can't answer questions about that.",
)


def fit_refusal_vector(
    lm: Backend,
    questions: Sequence[str],
    layers: Sequence[int],
    comply_tokens: int = 16,
    batch_size: int = 32,
    progress: bool = False,
) -> torch.Tensor:
    """Mean (abstain - comply) activation per layer, shape ``(layers, hidden)``."""
    tok = lm.tokenizer
    answers = generate(
        lm,
        list(questions),
        GenerationConfig(max_new_tokens=comply_tokens, batch_size=batch_size),
        progress=progress,
    )
    abstain_texts: list[str] = []
    comply_texts: list[str] = []
    abstain_tail: list[int] = []
    comply_tail: list[int] = []
    for i, (q, a) in enumerate(zip(questions, answers)):
        head = render_chat(tok, q)
        refusal = ABSTENTIONS[i % len(ABSTENTIONS)]
        comply = tok.decode(a.token_ids[:comply_tokens], skip_special_tokens=True) or "Sure."
        for texts, tails, body in (
            (abstain_texts, abstain_tail, refusal),
            (comply_texts, comply_tail, comply),
        ):
            texts.append(head + body)
            tails.append(len(tok(body, add_special_tokens=False)["input_ids"]))
    kwargs: dict[str, Any] = dict(
        layers=list(layers), pooling="mean", chat=False, batch_size=batch_size, progress=progress
    )
    abstain = collect_activations(lm, abstain_texts, tail=abstain_tail, **kwargs)
    comply = collect_activations(lm, comply_texts, tail=comply_tail, **kwargs)
    return abstain.mean(0) - comply.mean(0)
