"""Probabilities of answering with one of a few fixed options ("0"..."10", "refusal"/"compliance").

Constrained choice instead of parsing: the probability of each option's token sequence as the
whole continuation of a rendered prompt, read from the model's log-probabilities, so every
prompt gets a distribution and nothing can fail to parse. Each prompt is encoded once; every
chain of the options' prefix tree then continues from a copy of its KV cache. An option that is a
token prefix of another ("1" of "10") gets its own probability minus the longer ones', so the
options' probabilities do not overlap; ``mass`` says how much probability the model puts on
the options at all.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from workbench.generation.batching import pad_batch

if TYPE_CHECKING:
    from workbench.generation.backend import Backend


@dataclass(frozen=True)
class OptionDistribution:
    """``probs`` over the options, renormalised to sum to 1; ``mass`` before renormalising."""

    probs: tuple[float, ...]
    mass: float

    def argmax(self) -> int:
        return max(range(len(self.probs)), key=self.probs.__getitem__)


def _prefill(model, ids: torch.Tensor, mask: torch.Tensor):
    """Encode left-padded prompts once: (last-position logits, the KV cache)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=pos,
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    return out.logits[:, -1, :].float(), cache


def option_candidates(
    tokenizer, options: Sequence[Sequence[str]]
) -> list[tuple[int, tuple[int, ...]]]:
    """(option index, token ids) of every distinct spelling of every option."""
    cands: list[tuple[int, tuple[int, ...]]] = []
    for k, spellings in enumerate(options):
        for s in spellings:
            ids = tuple(tokenizer(s, add_special_tokens=False)["input_ids"])
            if ids and (k, ids) not in cands:
                cands.append((k, ids))
    return cands


def option_probabilities(
    lm: Backend, texts: Sequence[str], options: Sequence[Sequence[str]], batch_size: int = 32
) -> list[OptionDistribution]:
    """For each rendered ``text``, the distribution over ``options``, from whatever engine
    ``lm`` is (a :class:`~workbench.backends.Backend`; each scores them its own way).

    ``options[k]`` lists the spellings of option k (e.g. ``["7", " 7"]``); their probabilities
    add up. Texts are tokenized without special tokens (they are rendered chat prompts).
    """
    return lm.option_probabilities(texts, options, batch_size)


def model_option_probabilities(
    model, tok, texts: Sequence[str], options: Sequence[Sequence[str]], batch_size: int = 32
) -> list[OptionDistribution]:
    """:func:`option_probabilities` on a transformers ``model`` and its tokenizer ``tok``."""
    cands = option_candidates(tok, options)
    prefixes = {ids[:i] for _, ids in cands for i in range(len(ids))}
    chains = [
        p for p in prefixes if p and not any(len(q) > len(p) and q[: len(p)] == p for q in prefixes)
    ]
    enc = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    logp: dict[tuple[int, tuple], torch.Tensor] = {}
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    device = next(model.parameters()).device
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            idx = list(range(start, min(len(texts), start + batch_size)))
            ids, mask = pad_batch([enc[i] for i in idx], pad, "left")
            ids, mask = ids.to(device), mask.to(device)
            first, cache = _prefill(model, ids, mask)
            for r, i in enumerate(idx):
                logp[(i, ())] = torch.log_softmax(first[r], -1).cpu()
            for c, chain in enumerate(chains):
                branch = cache if c == len(chains) - 1 else copy.deepcopy(cache)
                steps = torch.tensor([list(chain)] * len(idx), device=device)
                full = torch.cat([mask, torch.ones_like(steps)], -1)
                pos = (full.cumsum(-1) - 1)[:, -len(chain) :]
                out = model(
                    input_ids=steps,
                    attention_mask=full,
                    position_ids=pos,
                    past_key_values=branch,
                    use_cache=True,
                ).logits.float()
                for r, i in enumerate(idx):
                    for t in range(1, len(chain) + 1):
                        logp[(i, chain[:t])] = torch.log_softmax(out[r, t - 1], -1).cpu()
    result = []
    for i in range(len(texts)):
        p_seq = {
            ids: math.exp(sum(float(logp[(i, ids[:t])][ids[t]]) for t in range(len(ids))))
            for _, ids in cands
        }
        result.append(combine_options(cands, p_seq, len(options)))
    return result


def combine_options(
    cands: Sequence[tuple[int, tuple[int, ...]]],
    p_seq: dict[tuple[int, ...], float],
    n_options: int,
) -> OptionDistribution:
    """One prompt's distribution from the probability of each candidate token sequence
    (``cands``: (option, token ids)): a sequence that is a prefix of another keeps only its own
    share, spellings of an option add up, and the result is renormalised."""
    excl = {
        ids: max(
            0.0,
            p
            - sum(
                q
                for other, q in p_seq.items()
                if len(other) > len(ids) and other[: len(ids)] == ids
            ),
        )
        for ids, p in p_seq.items()
    }
    per = [0.0] * n_options
    for k, ids in cands:
        per[k] += excl[ids]
    mass = sum(per)
    probs = tuple(p / mass for p in per) if mass > 0 else tuple(1 / len(per) for _ in per)
    return OptionDistribution(probs, mass)
