"""Questions written by a chat model: few-shot prompted for varied user questions, parsed,
deduplicated and kept only if they mention the concept."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from workbench.errors import WorkbenchError
from workbench.taxonomy.model import Concept, Taxonomy
from workbench.taxonomy.questions.sets import _normalize

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

# ---------------------------------------------------------------------------------------------
# LLM generator

FEW_SHOT_USER_QUESTIONS = [
    "what's the best way to keep basil alive on a windowsill?",
    "Can you explain how the stock market works like I'm 12?",
    "I'm visiting Lisbon next month, what neighbourhoods should I stay in?",
    "who painted the ceiling of the sistine chapel and how long did it take",
    "Give me three podcast recommendations about ancient history.",
]


def parse_question_lines(text: str) -> list[str]:
    """Questions from a model's reply: one per line, numbering and bullets removed."""
    out = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:\d+[.)]|[-*•])\s*", "", line).strip().strip('"').strip()
        if len(line) >= 10 and line.endswith(("?", ".")) and len(line) <= 300:
            out.append(line)
    return out


def mentions(question: str, concept: Concept) -> bool:
    """Whether the question names the concept (singular or plural, case-insensitive)."""
    q = question.lower()
    forms = {concept.name.lower(), concept.phrase.lower(), concept.singular.lower()}
    return any(re.search(r"\b" + re.escape(f) + r"\b", q) for f in forms)


class LLMQuestionGenerator:
    """Few-shot prompts a chat model to write varied questions about a concept.

    Sampling continues (new seeds) until ``n`` unique questions that mention the concept are
    collected or ``max_rounds`` is reached; then :class:`WorkbenchError` says how many it found.
    """

    def __init__(
        self,
        lm: Backend,
        seed: int = 0,
        per_round: int = 10,
        max_rounds: int = 12,
        temperature: float = 0.9,
        max_new_tokens: int = 400,
    ):
        self.lm = lm
        self.seed = seed
        self.per_round = per_round
        self.max_rounds = max_rounds
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.name = f"llm:{getattr(lm, 'model_id', 'model')}"

    def prompt(self, concept: Concept) -> str:
        examples = "\n".join(f"- {q}" for q in FEW_SHOT_USER_QUESTIONS)
        what = f"{concept.name}" + (f" ({concept.gloss})" if concept.gloss else "")
        return (
            "Here are examples of real questions people type into a chatbot:\n"
            f"{examples}\n\n"
            f"Write {self.per_round} different questions that a curious user might ask about "
            f"{what}. Each question must mention '{concept.name}' explicitly. Vary the style and "
            "the angle (facts, advice, opinions, history, comparisons). One question per line, "
            "no numbering, no answers."
        )

    def generate(self, taxonomy: Taxonomy, concept: Concept, n: int) -> list[str]:
        from workbench.generation import GenerationConfig, generate

        found: list[str] = []
        seen: set[str] = set()
        for r in range(self.max_rounds):
            cfg = GenerationConfig(
                max_new_tokens=self.max_new_tokens,
                do_sample=True,
                temperature=self.temperature,
                seed=self.seed * 1000 + r,
            )
            [reply] = generate(self.lm, [self.prompt(concept)], cfg, progress=False)
            for q in parse_question_lines(reply.text):
                key = _normalize(q)
                if key not in seen and mentions(q, concept):
                    seen.add(key)
                    found.append(q)
            if len(found) >= n:
                return found[:n]
        raise WorkbenchError(
            f"{self.name} wrote {len(found)} usable questions about "
            f"{concept.name!r} in {self.max_rounds} rounds; {n} needed"
        )
