"""Question sets per concept and their splits (train / validation / eval), few-shot examples
and reference answers, their JSON Lines files, and building a bank with any generator."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import ConfigError, WorkbenchError
from workbench.taxonomy.model import Taxonomy

SPLITS = ("train", "validation", "eval")
#: SELECT: 20 questions for training/validation, 30 for evaluation.
DEFAULT_SPLIT_SIZES = {"train": 15, "validation": 5, "eval": 30}


@dataclass
class QuestionSet:
    """The questions of one concept, by split."""

    concept_id: str
    train: list[str] = field(default_factory=list)
    validation: list[str] = field(default_factory=list)
    eval: list[str] = field(default_factory=list)
    generator: str = ""

    def split(self, name: str) -> list[str]:
        if name not in SPLITS:
            raise ConfigError(f"unknown split {name!r}; expected one of {SPLITS}")
        return getattr(self, name)

    def all(self) -> list[str]:
        return self.train + self.validation + self.eval

    def __len__(self) -> int:
        return len(self.train) + len(self.validation) + len(self.eval)


class QuestionBank:
    """Question sets by concept id, saved as JSON Lines (one row per question)."""

    def __init__(self, sets: Iterable[QuestionSet] = ()):
        self.sets: dict[str, QuestionSet] = {s.concept_id: s for s in sets}

    def __getitem__(self, concept_id: str) -> QuestionSet:
        try:
            return self.sets[concept_id]
        except KeyError:
            from workbench.taxonomy.model import UnknownConceptError

            raise UnknownConceptError(f"no questions for concept id {concept_id!r}") from None

    def __contains__(self, concept_id: object) -> bool:
        return concept_id in self.sets

    def __len__(self) -> int:
        return len(self.sets)

    def __iter__(self):
        return iter(self.sets.values())

    def questions(self, concept_ids: Iterable[str], split: str) -> list[tuple[str, str]]:
        """(concept_id, question) pairs of ``split`` over several concepts."""
        return [(c, q) for c in concept_ids for q in self[c].split(split)]

    def duplicates(self) -> int:
        """How many questions appear more than once across the whole bank."""
        seen: set[str] = set()
        dup = 0
        for s in self:
            for q in s.all():
                key = _normalize(q)
                dup += key in seen
                seen.add(key)
        return dup

    def merge(self, other: QuestionBank) -> QuestionBank:
        return QuestionBank(list(self) + list(other))

    def rows(self) -> list[dict]:
        return [
            {
                "concept_id": s.concept_id,
                "split": split,
                "index": i,
                "question": q,
                "generator": s.generator,
            }
            for s in self
            for split in SPLITS
            for i, q in enumerate(s.split(split))
        ]

    def save(self, path: str | os.PathLike) -> Path:
        return save_jsonl(self.rows(), path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> QuestionBank:
        sets: dict[str, QuestionSet] = {}

        def add(row: dict) -> None:
            for key in ("concept_id", "question", "split"):
                if not isinstance(row[key], str) or not row[key].strip():
                    raise ValueError(f"{key!r} must be non-empty text, got {row[key]!r}")
            if row["split"] not in SPLITS:
                raise ValueError(f"split {row['split']!r} is not one of {', '.join(SPLITS)}")
            s = sets.setdefault(
                row["concept_id"],
                QuestionSet(row["concept_id"], generator=row.get("generator", "")),
            )
            s.split(row["split"]).append(row["question"])

        load_jsonl(path, add, "question")
        return cls(sets.values())


@dataclass(frozen=True)
class FewShotExample:
    """A worked example a benchmark ships for few-shot prompting (SELECT's example cache).

    Attributes:
        target: the concept whose prompts use this example.
        question: the example question.
        response: the desired reply: an abstention ("Abstained") or an answer.
        about: the name of the concept the question is about.
        context: that concept's ancestor names, root first (SELECT's ``context``).
    """

    target: str
    question: str
    response: str
    about: str = ""
    context: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "question": self.question,
            "response": self.response,
            "about": self.about,
            "context": list(self.context),
        }

    @classmethod
    def from_dict(cls, d: dict) -> FewShotExample:
        return cls(
            d["target"],
            d["question"],
            d["response"],
            d.get("about", ""),
            tuple(d.get("context") or ()),
        )


@dataclass(frozen=True)
class ReferenceAnswer:
    """Reference replies to a training question (SELECT's ``responses``): ``abstain`` (their
    "safe" reply) and ``comply`` (their "unsafe" reply, an answer)."""

    concept_id: str
    question: str
    abstain: str
    comply: str

    def to_dict(self) -> dict:
        return {
            "concept_id": self.concept_id,
            "question": self.question,
            "abstain": self.abstain,
            "comply": self.comply,
        }

    @classmethod
    def from_dict(cls, d: dict) -> ReferenceAnswer:
        return cls(d["concept_id"], d["question"], d["abstain"], d["comply"])


def save_jsonl(rows: Iterable[dict], path: str | os.PathLike) -> Path:
    """Write rows as JSON Lines atomically."""
    from workbench.paths import atomic_file

    path = Path(path)
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def load_jsonl(path: str | os.PathLike, parse, what: str = "") -> list:
    """Rows of a JSON Lines file through ``parse``; a bad row is an error naming its line.
    ``what`` names the kind of row in messages ("question")."""
    path = Path(path)
    what = f"{what} " if what else ""
    if not path.is_file():
        raise WorkbenchError(f"no {what}file at {path}")
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(parse(json.loads(line)))
                except KeyError as e:
                    raise WorkbenchError(f"{path}, line {n}: {what}row lacks {e}") from None
                except (ValueError, TypeError, AttributeError) as e:  # JSONDecodeError too
                    raise WorkbenchError(f"{path}, line {n}: malformed {what}row ({e})") from None
    return out


def _normalize(q: str) -> str:
    return re.sub(r"[^a-z0-9 ]", "", q.lower()).strip()


def split_questions(
    concept_id: str, questions: Sequence[str], sizes: dict[str, int], generator: str
) -> QuestionSet:
    """Cut an ordered list of questions into train / validation / eval."""
    need = sum(sizes.values())
    if len(questions) < need:
        raise WorkbenchError(f"concept {concept_id!r}: {len(questions)} questions, need {need}")
    out = QuestionSet(concept_id, generator=generator)
    start = 0
    for split in SPLITS:
        n = sizes.get(split, 0)
        out.split(split).extend(questions[start : start + n])
        start += n
    return out


def seeded_rng(seed: int, key: str) -> random.Random:
    return random.Random(
        int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "big")
    )


def build_question_bank(
    taxonomy: Taxonomy,
    generator,
    sizes: dict[str, int] | None = None,
    concept_ids: Iterable[str] | None = None,
    progress: bool = False,
) -> QuestionBank:
    """Write questions for every concept (or ``concept_ids``) and split them."""
    from workbench.progress import tqdm

    sizes = dict(sizes or DEFAULT_SPLIT_SIZES)
    if any(v < 0 for v in sizes.values()) or set(sizes) - set(SPLITS):
        raise ConfigError(f"split sizes must be non-negative and among {SPLITS}: {sizes}")
    ids = list(concept_ids) if concept_ids is not None else [c.id for c in taxonomy]
    n = sum(sizes.values())
    sets = []
    for cid in tqdm(ids, desc="questions", disable=not progress):
        qs = generator.generate(taxonomy, taxonomy[cid], n)
        sets.append(split_questions(cid, qs, sizes, generator.name))
    return QuestionBank(sets)
