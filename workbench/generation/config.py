"""Typed settings and results for batched generation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Self

from pydantic import model_validator

from workbench.errors import ConfigError
from workbench.settings import NonNegative, Number, Positive, Seq, Settings

FinishReason = Literal["eos", "stop_string", "stop_when", "length"]


class GenerationConfig(Settings):
    """How to generate.

    Attributes:
        max_new_tokens: cap on generated tokens per sample.
        do_sample: sample (True) or decode greedily (False).
        temperature: softmax temperature when sampling.
        top_p: nucleus sampling mass when sampling (1.0 keeps the whole distribution).
        num_samples: K samples per prompt (greedy with K > 1 repeats the same answer).
        seed: base seed; each (prompt, sample) gets its own generator derived from it and the
            prompt text, so a sample does not depend on which batch it lands in.
        stop_strings: generation of a sample ends at the first of these; the text is cut before it.
        return_logprobs: record the log-probability (temperature 1) of every generated token.
        batch_size: rows (prompt x sample) per forward pass.
        system_prompt: a system prompt added to every prompt (folded into the user turn for
            templates that reject system turns).
        prefix_cache: encode the token prefix that all prompts of a call share (a system prompt,
            few-shot examples) once and reuse its KV cache for every batch; used only when it
            is at least ``min_prefix_tokens`` long and every hook attached is ``prefix_safe``
            (others may act on prompt positions). Outputs are the same as without it.
    """

    max_new_tokens: Positive = 64
    do_sample: bool = False
    temperature: Number = 1.0
    top_p: Number = 1.0
    num_samples: Positive = 1
    seed: NonNegative = 0
    stop_strings: Seq[str] = ()
    return_logprobs: bool = False
    batch_size: Positive = 32
    system_prompt: str | None = None
    prefix_cache: bool = True
    min_prefix_tokens: int = 16

    @model_validator(mode="before")
    @classmethod
    def _one_stop_string(cls, data: Any) -> Any:
        """A single stop string stands for a list of one."""
        if isinstance(data, dict) and isinstance(data.get("stop_strings"), str):
            return {**data, "stop_strings": (data["stop_strings"],)}
        return data

    @model_validator(mode="after")
    def _sampling(self) -> Self:
        if self.do_sample and self.temperature <= 0:
            raise ConfigError(f"temperature must be > 0 when sampling, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        return self


#: Most refusals show in the opening words; 48 tokens decide them at a fraction of the cost.
REFUSAL_SCORING = GenerationConfig(max_new_tokens=48)


@dataclass
class Generation:
    """One generated sample.

    Attributes:
        prompt_index: position of the prompt in the caller's list.
        sample: sample number in ``range(num_samples)``.
        text: the decoded completion (special tokens removed, cut at a stop string).
        token_ids: generated token ids (up to and including EOS when it was produced).
        logprobs: per-token log-probabilities when requested, else None.
        finish_reason: why generation ended.
        prompt_tokens: length of the rendered prompt in tokens.
        raw_text: when ``text`` is a part extracted from the reply (SELECT's chain of thought
            scores only its ``answer`` field), the whole reply; else None.
        answer_parsed: with ``raw_text``, whether an answer field was found (SELECT scores the
            whole reply when none is).
        completion_tokens: tokens the endpoint billed for the answer, when ``token_ids`` are
            not known (an HTTP back end); ``num_tokens`` reports it.
        cost: what the answer cost (USD) at the back end's configured prices, else None.
        cached: answered from the response cache (nothing paid) rather than the endpoint.
    """

    prompt_index: int
    sample: int
    text: str
    token_ids: list[int]
    finish_reason: FinishReason
    prompt_tokens: int
    logprobs: list[float] | None = field(default=None)
    raw_text: str | None = field(default=None)
    answer_parsed: bool | None = field(default=None)
    completion_tokens: int | None = field(default=None)
    cost: float | None = field(default=None)
    cached: bool | None = field(default=None)

    @property
    def num_tokens(self) -> int:
        if not self.token_ids and self.completion_tokens is not None:
            return self.completion_tokens
        return len(self.token_ids)
