"""Generations as a tidy table (one row per prompt x sample, with provenance)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from workbench.generation.config import Generation, GenerationConfig
from workbench.models.chat import Prompt

if TYPE_CHECKING:
    from workbench.generation.backend import Backend


def generations_frame(
    gens: Sequence[Generation],
    prompts: Sequence[Prompt],
    lm: Backend | None = None,
    config: GenerationConfig | None = None,
):
    """A ``pandas.DataFrame`` with one row per generation.

    Columns: prompt_index, sample, prompt, response, n_tokens, finish_reason, and, when given,
    model_id, revision and the generation seed for provenance.
    """
    import pandas as pd

    rows = []
    for g in gens:
        p = prompts[g.prompt_index]
        rows.append(
            {
                "prompt_index": g.prompt_index,
                "sample": g.sample,
                "prompt": p if isinstance(p, str) else p[-1]["content"],
                "response": g.text,
                "n_tokens": g.num_tokens,
                "finish_reason": g.finish_reason,
                **({"model_id": lm.model_id, "revision": lm.revision} if lm is not None else {}),
                **({"seed": config.seed} if config is not None else {}),
            }
        )
    return pd.DataFrame(rows)
