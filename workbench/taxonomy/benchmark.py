"""The shipped benchmark: atomic and composition taxonomies, their questions, and a manifest.

``load_benchmark()`` is the one call that gives everything in ``data/``;
``build_default_benchmark()`` rebuilds it from WordNet deterministically.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.paths import repo_root, write_text_atomic
from workbench.taxonomy.builder import BuildParams, build_taxonomy
from workbench.taxonomy.compositions import (
    DEFAULT_TEMPLATES,
    CompositionParams,
    compose,
)
from workbench.taxonomy.model import Concept, Taxonomy
from workbench.taxonomy.questions import (
    DEFAULT_SPLIT_SIZES,
    SPLITS,
    FewShotExample,
    QuestionBank,
    QuestionSet,
    ReferenceAnswer,
    TemplateQuestionGenerator,
    build_question_bank,
    load_jsonl,
    save_jsonl,
)
from workbench.taxonomy.questions.sets import _normalize
from workbench.taxonomy.select_format.protocol import load_protocol, write_protocol

FILES = {
    "atomic": "taxonomy_atomic.json",
    "compositions": "taxonomy_compositions.json",
    "questions": "questions.jsonl",
    "manifest": "manifest.json",
}
#: Files a benchmark may add (written only when it has such data).
OPTIONAL_FILES = {
    "examples": "examples.jsonl",  # few-shot examples shipped with the benchmark
    "answers": "answers.jsonl",  # reference replies to training questions
}


def default_data_dir() -> Path:
    return Path(os.environ.get("WORKBENCH_DATA", repo_root() / "data"))


@dataclass
class Benchmark:
    """Everything SELECT-style experiments read: taxonomies and questions.

    ``examples`` (few-shot examples by target concept) and ``answers`` (reference replies by
    training question) are present when the benchmark ships them (SELECT's release does).
    ``select_protocol`` is SELECT's protocol text (a ``workbench.taxonomy.select_format.protocol.SelectProtocol``)
    when the benchmark was imported from a clone of SELECT's repository, else None.
    """

    atomic: Taxonomy
    compositions: Taxonomy
    questions: QuestionBank
    manifest: dict = field(default_factory=dict)
    examples: dict[str, list[FewShotExample]] = field(default_factory=dict)
    answers: dict[str, ReferenceAnswer] = field(default_factory=dict)
    select_protocol: Any = None

    def taxonomy_of(self, concept_id: str) -> Taxonomy:
        """The taxonomy (atomic or compositions) that holds ``concept_id``."""
        if concept_id in self.atomic:
            return self.atomic
        if concept_id in self.compositions:
            return self.compositions
        self.atomic[concept_id]  # raises UnknownConceptError with suggestions
        raise AssertionError  # pragma: no cover

    def concept(self, concept_id: str) -> Concept:
        return self.taxonomy_of(concept_id)[concept_id]

    @property
    def excluded_eval(self) -> frozenset[str]:
        """Evaluation questions that evaluation never asks: each is also a training or
        validation question of some concept (``manifest["overlap"]``, found at import by
        :func:`eval_overlap`), so asking it would score a question a technique may have seen.
        The question sets themselves keep them (as released)."""
        return frozenset((self.manifest.get("overlap") or {}).get("questions", ()))

    def near_concepts(self, concept_id: str) -> dict[str, str]:
        """SELECT's specificity set of a concept: ``{id: relation}`` with relation ``parent``,
        ``ancestor``, ``sibling`` or ``other_relation``.

        Atomic concepts: ancestors and siblings (roots are siblings of each other). Compositions:
        siblings, plus every composition of the same relation whose constituents are each an
        ancestor-or-self of the target's (its taxonomy ancestors among them); a top composition
        with neither (a relation with a single root) gets the other relations' compositions.
        """
        tax = self.taxonomy_of(concept_id)
        c = tax[concept_id]
        ancestors = tax.ancestors(concept_id)
        if c.kind == "composition":
            ancestors += [x for x in self._constituent_ancestors(c) if x not in ancestors]
        out = {a: "parent" if a == c.parent else "ancestor" for a in ancestors}
        for s in tax.siblings(concept_id):
            out.setdefault(s, "sibling")
        if not out and c.kind == "composition":
            out = {x.id: "other_relation" for x in tax if x.relation != c.relation}
        return out

    def _constituent_ancestors(self, c: Concept) -> list[str]:
        index = self.__dict__.setdefault(
            "_by_constituents", {(x.relation, x.constituents): x.id for x in self.compositions}
        )
        options = [
            [k] + (self.atomic.ancestors(k) if k in self.atomic else []) for k in c.constituents
        ]
        out = []
        for combo in itertools.product(*options):
            cid = index.get((c.relation, tuple(combo)))
            if cid is not None and cid != c.id:
                out.append(cid)
        return out

    def content_hash(self) -> str:
        """A hash of the benchmark's content: the manifest's when it has one, else a hash of the
        taxonomies, questions, examples and answers themselves (so a run never mistakes one
        benchmark for another)."""
        if self.manifest.get("content_hash"):
            return self.manifest["content_hash"]
        h = hashlib.sha256()
        for part in (
            self.atomic.to_json(),
            self.compositions.to_json(),
            self.questions.rows(),
            {k: [e.to_dict() for e in v] for k, v in sorted(self.examples.items())},
            [a.to_dict() for _, a in sorted(self.answers.items())],
        ):
            h.update(json.dumps(part, sort_keys=True, ensure_ascii=False).encode())
        if self.excluded_eval:  # they change what evaluation asks
            h.update(json.dumps(sorted(self.excluded_eval), ensure_ascii=False).encode())
        if self.select_protocol is not None:  # SELECT's prompts and refusal rule
            h.update(json.dumps(self.select_protocol.files, sort_keys=True).encode())
        return h.hexdigest()

    def stats(self) -> dict:
        """Counts of the kind SELECT reports, plus data-quality checks."""
        ids = [c.id for c in self.atomic] + [c.id for c in self.compositions]
        per_concept = [len(self.questions[c]) if c in self.questions else 0 for c in ids]
        per_split = {
            split: [len(self.questions[c].split(split)) if c in self.questions else 0 for c in ids]
            for split in SPLITS
        }
        by_split = {}
        for split, counts in per_split.items():
            by_split[f"{split}_questions"] = sum(counts)
            by_split[f"min_{split}_per_concept"] = min(counts, default=0)
            by_split[f"max_{split}_per_concept"] = max(counts, default=0)
        return {
            "atomic_concepts": len(self.atomic),
            "atomic_classes": sum(c.kind == "class" for c in self.atomic),
            "atomic_instances": sum(c.kind == "instance" for c in self.atomic),
            "compositions": len(self.compositions),
            "relations": len({c.relation for c in self.compositions}),
            "roots": [self.atomic[r].name for r in self.atomic.roots],
            "max_depth": self.atomic.max_depth,
            "compositions_max_depth": self.compositions.max_depth,
            "questions": sum(per_concept),
            "min_questions_per_concept": min(per_concept, default=0),
            "max_questions_per_concept": max(per_concept, default=0),
            "concepts_without_questions": sum(n == 0 for n in per_concept),
            **by_split,
            "concepts_without_train_questions": sum(n == 0 for n in per_split["train"]),
            "duplicate_questions": self.questions.duplicates(),
            "eval_questions_excluded_as_seen": len(self.excluded_eval),
        }


def eval_overlap(questions: QuestionBank) -> dict:
    """Evaluation questions that are also a training or validation question of any concept
    (the same one, another of its partition or of the other partition; compared after
    normalising case and punctuation).

    Returns ``{"count", "questions", "pairs"}``: the number of such evaluation questions, their
    text as in the evaluation split, and for each the concept it evaluates and those that train
    on it. :attr:`Benchmark.excluded_eval` reads ``questions`` from the manifest's ``overlap``.
    """
    trained: dict[str, set[str]] = {}
    for s in questions:
        for q in s.train + s.validation:
            trained.setdefault(_normalize(q), set()).add(s.concept_id)
    pairs = [
        {"question": q, "eval_of": s.concept_id, "train_of": sorted(trained[_normalize(q)])}
        for s in questions
        for q in s.eval
        if _normalize(q) in trained
    ]
    found = sorted({p["question"] for p in pairs})
    return {"count": len(found), "questions": found, "pairs": pairs}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_benchmark_folder(directory: str | os.PathLike, what: str = "--out") -> None:
    """One line when ``directory`` holds files but no benchmark
    (:func:`workbench.paths.check_folder_of`): a new or empty folder, or a benchmark's (rebuilt
    in place), passes."""
    from workbench.paths import check_folder_of

    check_folder_of(
        directory,
        what,
        "benchmark",
        lambda m: isinstance(m.get("files"), dict) and "questions" in m["files"],
        FILES["manifest"],
    )


def save_benchmark(bench: Benchmark, directory: str | os.PathLike) -> Path:
    """Write the data files (and the optional ones the benchmark has) and a manifest with their
    content hashes."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    bench.atomic.save(d / FILES["atomic"])
    bench.compositions.save(d / FILES["compositions"])
    bench.questions.save(d / FILES["questions"])
    written = {k: v for k, v in FILES.items() if k != "manifest"}
    if bench.examples:
        save_jsonl(
            (e.to_dict() for k in bench.examples for e in bench.examples[k]),
            d / OPTIONAL_FILES["examples"],
        )
        written["examples"] = OPTIONAL_FILES["examples"]
    if bench.answers:
        save_jsonl((a.to_dict() for a in bench.answers.values()), d / OPTIONAL_FILES["answers"])
        written["answers"] = OPTIONAL_FILES["answers"]
    manifest = {
        k: v
        for k, v in bench.manifest.items()
        if k not in ("content_hash", "select_protocol_files")
    }
    manifest["counts"] = bench.stats()
    manifest["files"] = {k: {"path": v, "sha256": _sha256(d / v)} for k, v in written.items()}
    hashed = "".join(manifest["files"][k]["sha256"] for k in sorted(manifest["files"]))
    if bench.excluded_eval:  # they change what evaluation asks (absent: hashes as before)
        hashed += json.dumps(sorted(bench.excluded_eval), ensure_ascii=False)
    if bench.select_protocol is not None:  # select_protocol/: SELECT's text (absent: as before)
        manifest["select_protocol_files"] = write_protocol(bench.select_protocol, d)
        hashed += "".join(h for _, h in sorted(manifest["select_protocol_files"].items()))
    manifest["content_hash"] = hashlib.sha256(hashed.encode()).hexdigest()
    write_text_atomic(
        d / FILES["manifest"], json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    )
    bench.manifest = manifest
    return d


def load_benchmark(directory: str | os.PathLike | None = None, verify: bool = True) -> Benchmark:
    """Load the benchmark in ``directory`` (default: the shipped ``data/``).

    With ``verify``, each file's hash is checked against the manifest, so a hand-edited or
    truncated file is reported instead of silently used.
    """
    d = Path(directory) if directory else default_data_dir()
    mpath = d / FILES["manifest"]
    if not mpath.is_file():
        raise WorkbenchError(
            f"no benchmark in {d} (missing {FILES['manifest']}); "
            "build one with: python -m workbench taxonomy build"
        )
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
        files_ok = isinstance(manifest, dict) and all(
            isinstance(i, dict) and {"path", "sha256"} <= set(i)
            for i in manifest.get("files", {}).values()
        )
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as err:
        raise WorkbenchError(f"{mpath} is damaged ({err}); {_rebuild_hint({}, d)}") from None
    if not files_ok:
        raise WorkbenchError(
            f"{mpath} is not a benchmark manifest (a mapping whose 'files' each have a path and "
            f"a sha256); {_rebuild_hint({}, d)}"
        )
    if verify:
        for info in manifest.get("files", {}).values():
            p = d / info["path"]
            if not p.is_file():
                what = "is a folder, not a file" if p.is_dir() else "is missing"
                raise WorkbenchError(f"{mpath} names {info['path']!r}: {p} {what}")
            if _sha256(p) != info["sha256"]:
                raise WorkbenchError(
                    f"{p} does not match the manifest's hash (edited or "
                    f"truncated?); {_rebuild_hint(manifest, d)}"
                )
        for rel, sha in (manifest.get("select_protocol_files") or {}).items():
            p = d / rel
            if not p.is_file() or _sha256(p) != sha:
                raise WorkbenchError(
                    f"{p} is missing or does not match the manifest's hash; "
                    f"{_rebuild_hint(manifest, d)}"
                )
    files = manifest.get("files", {})
    examples: dict[str, list[FewShotExample]] = {}
    if "examples" in files:
        for e in load_jsonl(d / files["examples"]["path"], FewShotExample.from_dict, "example"):
            examples.setdefault(e.target, []).append(e)
    answers = {}
    if "answers" in files:
        answers = {
            a.question: a
            for a in load_jsonl(d / files["answers"]["path"], ReferenceAnswer.from_dict, "answer")
        }
    return Benchmark(
        atomic=Taxonomy.load(d / FILES["atomic"]),
        compositions=Taxonomy.load(d / FILES["compositions"]),
        questions=QuestionBank.load(d / FILES["questions"]),
        manifest=manifest,
        examples=examples,
        answers=answers,
        select_protocol=load_protocol(d) if manifest.get("select_protocol_files") else None,
    )


def _rebuild_hint(manifest: dict, directory: Path) -> str:
    """How to rewrite the benchmark in ``directory``, by the manifest's builder."""
    if manifest.get("builder") == "workbench.taxonomy.import_select":
        release = manifest.get("release_dir") or "<clone of kinshuk-h/SELECT>"
        return (
            "re-import it with: python -m workbench taxonomy import-select "
            f"{release} --out {directory}"
        )
    return "rebuild with: python -m workbench taxonomy build"


def build_default_benchmark(
    params: BuildParams = BuildParams(),
    composition_params: CompositionParams = CompositionParams(),
    question_seed: int = 0,
    split_sizes: dict[str, int] | None = None,
    wordnet_dir: str | os.PathLike | None = None,
    progress: bool = False,
) -> Benchmark:
    """Build the default benchmark from WordNet 3.0 (deterministic for fixed arguments)."""
    from workbench.taxonomy.sources import WORDNET_ROOTS
    from workbench.taxonomy.wordnet import LICENSE_NOTICE, WordNet, WordNetGraph

    graph = WordNetGraph(WordNet(wordnet_dir))
    atomic = build_taxonomy(graph, WORDNET_ROOTS, params, name="atomic", id_of=graph.node_id)
    compositions = compose(atomic, DEFAULT_TEMPLATES, composition_params)
    gen = TemplateQuestionGenerator(seed=question_seed)
    sizes = dict(split_sizes or DEFAULT_SPLIT_SIZES)
    questions = build_question_bank(atomic, gen, sizes, progress=progress).merge(
        _composition_questions(compositions, gen, sizes, progress)
    )
    manifest = {
        "name": "abstention-workbench default benchmark",
        "source": "WordNet 3.0 (Debian package wordnet-base), noun hierarchy",
        "license": LICENSE_NOTICE,
        "builder": "workbench.taxonomy.build_default_benchmark",
        "parameters": {
            "atomic": params.to_dict(),
            "compositions": composition_params.to_dict(),
            "question_generator": gen.name,
            "question_seed": question_seed,
            "split_sizes": sizes,
        },
        "roots": {r.name: list(r.anchors) for r in WORDNET_ROOTS},
    }
    return Benchmark(atomic, compositions, questions, manifest)


def _composition_questions(compositions: Taxonomy, gen, sizes, progress) -> QuestionBank:
    return build_question_bank(compositions, gen, sizes, progress=progress)


__all__ = [
    "Benchmark",
    "QuestionSet",
    "build_default_benchmark",
    "load_benchmark",
    "save_benchmark",
]
