"""What the steering inspector keeps and compares, as plain values: the settings a vote or an
answer was made with, a layer's vote, an answer and why it is stale, the threshold slider's range
and the condition layer to view."""

from __future__ import annotations

from dataclasses import dataclass

import torch


def slider_range(
    related: torch.Tensor, unrelated: torch.Tensor, threshold: float, margin: float = 0.05
) -> tuple[float, float]:
    """The threshold slider's range at one layer: the validation similarities (and the current
    threshold) plus a margin, within [-1, 1], so each pixel of the slider is a fine step."""
    lo = min(float(related.min()), float(unrelated.min()), threshold) - margin
    hi = max(float(related.max()), float(unrelated.max()), threshold) + margin
    return max(-1.0, round(lo, 2)), min(1.0, round(hi, 2))


@dataclass(frozen=True)
class LayerVote:
    layer: int
    similarity: float
    threshold: float

    @property
    def fires(self) -> bool:
        return self.similarity > self.threshold


@dataclass(frozen=True)
class Settings:
    """What a vote or an answer was computed with (shown beside it)."""

    concept: str
    layers: tuple[int, ...]
    thresholds: tuple[float, ...]
    aggregate: str
    strength: float

    def describe(self) -> str:
        thr = ", ".join(f"{l}: {t:+.3f}" for l, t in zip(self.layers, self.thresholds))
        return (
            f"concept {self.concept}; condition layers {{{thr}}}; vote {self.aggregate}; "
            f"strength {self.strength:.2f}"
        )


@dataclass(frozen=True)
class Answer:
    """An answer pair and what made it: the question and the settings."""

    question: str
    plain: str
    steered: str
    fired: bool
    settings: Settings
    number: int = 1  # the inspector's answers are numbered, so a new one is told from the last
    seconds: float | None = None  # how long it took


def stale_reason(answer: Answer, question: str, settings: Settings) -> str | None:
    """Why ``answer`` is not the answer to ``question`` under ``settings`` (None: it is)."""
    changed = []
    if answer.question.strip() != question.strip():
        changed.append("question")
    if answer.settings != settings:
        changed.append("settings")
    return " and ".join(changed) or None


def nearest_voting_layer(view: int, layers: list[int]) -> int | None:
    """The condition layer closest to ``view`` (the lower one on a tie); None without layers."""
    return min(layers, key=lambda l: (abs(l - view), l)) if layers else None
