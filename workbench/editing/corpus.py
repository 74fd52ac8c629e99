"""Text sampled from the model itself: ROME's context prefixes and, where no general text corpus
is at hand (the workbench runs offline), the text its second-moment statistics are taken over.

Sampling is top-k (k = 5 by default, as EasyEdit's ``generate_fast``), seeded, on the model's raw
text (no chat template): the same model, settings and seed give the same texts.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

#: Openings EasyEdit's ROME samples its context prefixes from (``rome_main.get_context_templates``).
CONTEXT_OPENINGS = ("The", "Therefore", "Because", "I", "You")
#: Openings for the general text a second moment is taken over (our choice: common sentence starts).
TEXT_OPENINGS = ("The", "In", "A", "It", "This", "When", "There", "We", "He", "She")


def sample_texts(
    lm: Backend,
    openings: Sequence[str],
    per_opening: int,
    max_tokens: int,
    top_k: int = 5,
    seed: int = 0,
) -> list[str]:
    """``per_opening`` samples after each opening, each at most ``max_tokens`` tokens long in all
    (the opening and any special tokens included, as EasyEdit's ``max_out_len``), decoded without
    special tokens, NFKD-normalised, blank lines joined with a space."""
    if per_opening <= 0:
        return []
    tok, model = lm.tokenizer, lm.model
    device = next(model.parameters()).device
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    out: list[str] = []
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(seed)
        for opening in openings:
            ids = tok(opening, add_special_tokens=True, return_tensors="pt")["input_ids"].to(device)
            new = max(0, max_tokens - ids.shape[1])
            if new == 0:
                texts = [opening] * per_opening
            else:
                batch = ids.repeat(per_opening, 1)
                gen = model.generate(
                    input_ids=batch,
                    attention_mask=torch.ones_like(batch),
                    do_sample=True,
                    top_k=top_k,
                    top_p=1.0,
                    temperature=1.0,
                    max_new_tokens=new,
                    min_new_tokens=new,
                    pad_token_id=pad,
                )
                texts = tok.batch_decode(gen, skip_special_tokens=True)
            out += [unicodedata.normalize("NFKD", t).replace("\n\n", " ") for t in texts]
    return out


def context_templates(
    lm: Backend,
    lengths: Sequence[Sequence[int]] = ((5, 10), (10, 10)),
    seed: int = 0,
    openings: Sequence[str] = CONTEXT_OPENINGS,
) -> list[str]:
    """ROME's context templates: ``"{}"`` then, for each ``(length, count)``, ``count`` samples of
    ``length`` tokens spread over the openings, braces removed, each followed by ``". {}"``."""
    out = ["{}"]
    for length, count in lengths:
        texts = sample_texts(lm, openings, count // len(openings), length, seed=seed + length)
        out += [t.replace("{", "").replace("}", "") + ". {}" for t in texts]
    return out
