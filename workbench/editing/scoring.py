"""Multiple-choice scoring by the log-likelihood of each choice as a continuation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import torch

from workbench.generation.batching import pad_batch

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

Normalization = Literal["none", "token", "byte"]
#: What :func:`choice_logprobs` accepts.
SCORE_NORMALIZATIONS: tuple[str, ...] = ("none", "token", "byte")
#: What a notebook's ``normalization`` parameter accepts: a score above, or "" for the editing
#: preset's (:mod:`workbench.editing.presets`).
NORMALIZATIONS: tuple[str, ...] = SCORE_NORMALIZATIONS + ("",)


def choice_logprobs(
    lm: Backend,
    prompts: Sequence[str],
    choices: Sequence[Sequence[str]],
    normalization: Normalization = "none",
    batch_size: int = 32,
    suffixes: Sequence[str] | None = None,
) -> list[list[float]]:
    """Score ``choices[i]`` after ``prompts[i]``; returns one score list per prompt.

    Each choice is scored as the continuation " <choice><suffix>" of the raw prompt (no chat
    template; ``suffixes[i]`` is the rest of the sentence when the answer slot sits inside it,
    "" by default): the sum of the continuation tokens' log-probabilities (``none``), their mean
    (``token``), or the sum per UTF-8 byte of the continuation text (``byte``). Batched with
    right padding and attention masks; a prompt scores the same alone or in any batch.
    """
    if normalization not in SCORE_NORMALIZATIONS:
        raise ValueError(f"normalization must be none, token or byte, got {normalization!r}")
    tok, model = lm.tokenizer, lm.model
    suffixes = list(suffixes) if suffixes is not None else [""] * len(prompts)
    pairs = [(i, c + suffixes[i]) for i, cs in enumerate(choices) for c in cs]
    prompt_ids = [tok(p, add_special_tokens=True)["input_ids"] for p in prompts]
    seqs, spans = [], []
    for i, c in pairs:
        cont = tok(" " + c, add_special_tokens=False)["input_ids"]
        seqs.append(prompt_ids[i] + cont)
        spans.append((len(prompt_ids[i]), len(cont)))
    scores = [0.0] * len(pairs)
    device = next(model.parameters()).device
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    with torch.inference_mode():
        for start in range(0, len(seqs), batch_size):
            idx = list(range(start, min(len(seqs), start + batch_size)))
            ids, mask = pad_batch([seqs[k] for k in idx], pad, "right")
            logp = torch.log_softmax(
                model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float(), -1
            )
            for r, k in enumerate(idx):
                s, n = spans[k]
                targets = ids[r, s : s + n].to(device)
                lp = logp[r, s - 1 : s - 1 + n].gather(-1, targets[:, None])[:, 0]
                total = float(lp.sum())
                if normalization == "token":
                    total /= max(1, n)
                elif normalization == "byte":
                    total /= max(1, len(pairs[k][1].encode()))
                scores[k] = total
    out: list[list[float]] = [[] for _ in prompts]
    for (i, _), score in zip(pairs, scores):
        out[i].append(score)
    return out
