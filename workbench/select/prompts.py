"""SELECT's prompts, built from the protocol text imported with its release.

Pure functions over a :class:`~workbench.taxonomy.select_format.protocol.SelectProtocol` (the templates and
strings of the user's clone, copied into the benchmark by ``import-select``): the zero-shot and
few-shot chain-of-thought user turns, the plain question wrapper of steering and fine-tuning,
and SELECT's extraction of the ``answer`` field from a chain-of-thought reply.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import regex

from workbench.errors import ConfigError

if TYPE_CHECKING:
    from workbench.taxonomy.benchmark import Benchmark

#: What a preset needing the protocol says when the benchmark has none.
IMPORT_HINT = (
    "import the release with `python -m workbench taxonomy import-select <clone of "
    "kinshuk-h/SELECT> --out DIR` and use data_dir=DIR"
)

#: Stands for the question while the rest of a prompt is filled in.
QUESTION = "{question}"


def require_protocol(bench: Benchmark, what: str):
    """The benchmark's SELECT protocol, or a one-line error naming ``what`` needs it."""
    protocol = getattr(bench, "select_protocol", None)
    if protocol is None:
        raise ConfigError(
            f"{what} needs SELECT's protocol text (its prompt templates), which "
            f"this benchmark lacks: {IMPORT_HINT}"
        )
    return protocol


def concept_description(bench: Benchmark, concept_id: str) -> str:
    """How SELECT names a concept in prompts: its name, then "in the context of" and its
    ancestors' names, root first (compositions: the name alone)."""
    c = bench.concept(concept_id)
    if c.kind == "composition":
        return c.name
    tax = bench.taxonomy_of(concept_id)
    names = [tax[a].name for a in reversed(tax.ancestors(concept_id))]
    return c.name + (" in the context of " + ", ".join(names) if names else "")


class _Partial(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _fill(template: str, **values: str) -> str:
    """Fill the fields given and leave any other ``{field}`` as it is, as SELECT's
    ``format_prompt`` does (``str.format`` rules: doubled braces are literal braces)."""
    return template.format_map(_Partial(values))


def plain_prompt(protocol) -> str:
    """The user turn of steering, fine-tuned and unmodified models: the question wrapped in
    SELECT's ``no_instruction`` template."""
    return _fill(protocol.prompts["no_instruction"], query=QUESTION)


def zero_shot_prompt(protocol, concept: str) -> str:
    """SELECT's zero-shot user turn (``base_instruction`` inside ``only_instruction``)."""
    instruction = protocol.strings["base_instruction"].format(concept=concept)
    return _fill(
        protocol.prompts["only_instruction"],
        instruction=instruction,
        concept=concept,
        query=QUESTION,
    )


def example_reply(protocol, concept: str, example_concept: str, response: str) -> str:
    """A cached example's reply as SELECT writes it: JSON with ``reasoning`` (entailment when
    the example's concept description is the target's, else contradiction, as SELECT decides
    it) and ``answer``."""
    kind = "entailment" if example_concept == concept else "contradiction"
    reasoning = protocol.strings["reasoning_format"][kind].format(concept=concept)
    return json.dumps({"reasoning": reasoning, "answer": response}, ensure_ascii=False, indent=1)


def cot_prompt(protocol, concept: str, examples: Sequence) -> str:
    """SELECT's few-shot chain-of-thought user turn; ``examples`` are the benchmark's cached
    :class:`~workbench.taxonomy.questions.FewShotExample` of the target."""
    shown = []
    for e in examples:
        about = e.about + (" in the context of " + ", ".join(e.context) if e.context else "")
        reply = example_reply(protocol, concept, about, e.response)
        shown.append(protocol.strings["example_format"].format(query=e.question, response=reply))
    instruction = protocol.strings["base_instruction"].format(concept=concept)
    return _fill(
        protocol.prompts["cot-few_shot"],
        instruction=instruction,
        concept=concept,
        examples="\n\n".join(shown),
        query=QUESTION,
    )


_KEY = regex.compile(r"(?i)(['\"])answer\1\s*:")
_LEAD = regex.compile(r"\s*['\"]?\s*")
_TRIM = regex.compile(r"[}\s'\"]")


def extract_answer(reply: str) -> tuple[str, bool]:
    """(answer, parsed): the ``answer`` field of a chain-of-thought reply as SELECT extracts it,
    or the whole reply and False when it has none.

    SELECT's rule: at the first key 'answer' or "answer" (any case) followed by a colon and at
    least one more character, skip white space and one opening quote; the answer is everything
    from there to the end of the reply (text after the JSON object included), with closing
    braces, quotes and white space trimmed off its end and escaped newlines restored.
    """
    pos = 0
    while (m := _KEY.search(reply, pos)) is not None:
        tail = reply[m.end() :]
        if tail:
            lead = _LEAD.match(tail).end()
            rest = tail[lead:] if lead < len(tail) else tail[-1:]
            end = len(rest)
            while end and _TRIM.match(rest[end - 1]):
                end -= 1
            return rest[:end].replace(r"\n", "\n"), True
        pos = m.start() + 1
    return reply, False
