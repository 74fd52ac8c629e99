"""Padding token sequences into a batch (the one place that builds ids and attention masks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch


def pad_batch(
    seqs: Sequence[Sequence[int]], pad_id: int, side: Literal["left", "right"] = "left"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` for token sequences, padded on ``side``.

    Left padding (generation, last-token reads) puts every sequence's last token in the last
    column; right padding (scoring a text's own tokens) keeps positions 0..n-1.
    """
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, s in enumerate(seqs):
        n = len(s)
        cols = slice(width - n, width) if side == "left" else slice(0, n)
        ids[r, cols] = torch.tensor(list(s), dtype=torch.long)
        mask[r, cols] = 1
    return ids, mask
