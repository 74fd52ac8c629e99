"""SELECT's atoms and compositions as the workbench's taxonomies and question sets: training
splits, few-shot examples, reference answers, relation hints."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.errors import some_of
from workbench.taxonomy.compositions import (
    RelationTemplate,
    SlotRule,
    compose,
    composition_id,
)
from workbench.taxonomy.model import Concept, ConceptKind, Taxonomy, TaxonomyError
from workbench.taxonomy.questions import (
    FewShotExample,
    QuestionBank,
    QuestionSet,
    ReferenceAnswer,
)
from workbench.taxonomy.questions.sets import seeded_rng
from workbench.taxonomy.select_format.files import (
    GENERATOR,
    ROOT_TYPES,
    SelectPartition,
    T,
    _at,
    _fallback,
    _read,
    _strings,
    find_release,
)


def split_training(
    concept_id: str, questions: Sequence[T], validation: float, seed: int
) -> tuple[list[T], list[T]]:
    """(train, validation): a seeded shuffle per concept, ``round_half_up(n * validation)`` to
    validation (but at least one question stays in train)."""
    order = list(questions)
    seeded_rng(seed, "select-split:" + concept_id).shuffle(order)
    n_val = min(int(len(order) * validation + 0.5), max(0, len(order) - 1))
    return order[n_val:], order[:n_val]


def _answers(cid: str, entry: dict, train: list[str], where: str) -> list[ReferenceAnswer]:
    responses = entry.get("responses") or {}
    if not isinstance(responses, dict):
        raise TaxonomyError(f"{where}: {cid!r} has 'responses' that is not an object")
    by_hash = {hashlib.md5(q.encode()).hexdigest(): q for q in train}
    out = []
    for h, r in responses.items():
        if h in by_hash and isinstance(r, dict) and "safe" in r and "unsafe" in r:
            out.append(ReferenceAnswer(cid, by_hash[h], str(r["safe"]), str(r["unsafe"])))
    return out


def _examples(target: str, rows: Any, where: str) -> list[FewShotExample]:
    if not isinstance(rows, list):
        raise TaxonomyError(f"{where}: examples of {target!r} are not a list")
    out = []
    for r in rows:
        if not isinstance(r, dict) or "query" not in r or "response" not in r:
            raise TaxonomyError(f"{where}: an example of {target!r} lacks 'query' or 'response'")
        out.append(
            FewShotExample(
                target,
                r["query"],
                str(r["response"]),
                r.get("concept") or "",
                tuple(r.get("context") or ()),
            )
        )
    return out


def _questions(
    cid: str, entry: dict, train_entry: dict | None, where: str, validation: float, seed: int
) -> tuple[QuestionSet, list[ReferenceAnswer]]:
    key = cid.split("/", 1)[-1]  # the released key (compositions: without the relation)
    if not isinstance(entry, dict):
        raise TaxonomyError(f"{_at(where, key)}: entry {cid!r} is not an object")
    evalq = _strings(entry.get("queries"), where, f"{cid!r} 'queries'", key)
    if train_entry is not None:
        train_where = where.replace("data.json", "data.train.json")
        pool = _strings(train_entry.get("queries"), train_where, f"{cid!r} 'queries'", key)
    else:
        pool = _strings(entry.get("extra_queries") or [], where, f"{cid!r} 'extra_queries'", key)
    train, val = split_training(cid, pool, validation, seed)
    answers = _answers(cid, train_entry, pool, where) if train_entry else []
    return QuestionSet(cid, train=train, validation=val, eval=evalq, generator=GENERATOR), answers


def _check_training(
    sets: list[QuestionSet],
    train_file: Path,
    has_train: dict,
    where: str,
    allow_missing: bool,
    fallbacks: list[str],
    base: Path,
) -> None:
    """Every concept has training questions (else an error, or with ``allow_missing`` a
    fallback); concepts that ``data.train.json`` lacks take ``extra_queries`` (a fallback)."""
    rel = str(train_file.relative_to(base))
    data_rel = str(Path(where).relative_to(base))
    empty = [s.concept_id for s in sets if not s.train and not s.validation]
    if train_file.is_file():
        absent = [
            s.concept_id
            for s in sets
            if not has_train.get(s.concept_id) and s.concept_id not in empty
        ]
        if absent:
            _fallback(
                fallbacks,
                f"{rel} lacks {len(absent)} of {len(sets)} concepts (first: "
                f"{', '.join(absent[:3])}): their training questions come from {data_rel}'s "
                "'extra_queries', with no reference answers",
            )
    if not empty:
        return
    source = f"no 'extra_queries' in {data_rel}" + (
        f" and none in {rel}" if train_file.is_file() else f" and no {rel}"
    )
    names = some_of([repr(c) for c in empty], 5)
    if not allow_missing:
        raise TaxonomyError(
            f"{len(empty)} of {len(sets)} concepts have no training questions "
            f"({source}): {names}; the release gives every concept some, so the "
            "file is incomplete (download it again), or import it for evaluation "
            "only with allow_missing_training=True (--allow-missing-training)"
        )
    _fallback(
        fallbacks,
        f"{len(empty)} of {len(sets)} concepts have no training questions "
        f"({source}): {names}; steering, sft, sft_dpo and generated few-shot examples "
        "cannot target them",
    )


def load_select_atoms(
    directory: str | os.PathLike,
    validation: float = 0.25,
    seed: int = 0,
    allow_missing_training: bool = False,
) -> SelectPartition:
    """The atomic partition: taxonomy, questions (train/validation from the training questions),
    cached few-shot examples and reference replies.

    A missing optional file warns (:class:`SelectImportWarning`) and is listed in the
    partition's ``fallbacks``; a concept without training questions is an error unless
    ``allow_missing_training`` (then a warning with the count)."""
    base = find_release(directory)
    d = base / "atoms"
    files: dict[str, str] = {}
    fallbacks: list[str] = []
    tpath = (
        d / "taxonomy_plus.json" if (d / "taxonomy_plus.json").is_file() else d / "taxonomy.json"
    )
    if tpath.name == "taxonomy.json" and tpath.is_file():
        _fallback(
            fallbacks,
            "atoms/taxonomy_plus.json is missing: the taxonomy is read from "
            "atoms/taxonomy.json, which has no instances (questions about them will not "
            "import)",
        )
    tree = _read(tpath, files, base)
    if not isinstance(tree, dict):
        raise TaxonomyError(f"{tpath}: expected an object of root concepts")
    concepts: list[Concept] = []

    def walk(cid: str, node: Any, parent: str | None, root: str) -> None:
        if not isinstance(node, dict) or "name" not in node:
            raise TaxonomyError(f"{tpath}: node {cid!r} lacks a 'name'")
        children = node.get("children") or {}
        kind: ConceptKind = "class" if children or parent is None else "instance"
        concepts.append(
            Concept(
                id=cid,
                name=node["name"],
                kind=kind,
                parent=parent,
                root=root,
                source="select",
                plural=node["name"] if kind == "class" else "",
            )
        )
        for ch_id, ch in children.items():
            walk(ch_id, ch, cid, root)

    for cid, node in tree.items():
        walk(
            cid,
            node,
            None,
            ROOT_TYPES.get(
                cid, str(node.get("name", cid)).lower() if isinstance(node, dict) else cid
            ),
        )
    taxonomy = Taxonomy.from_concepts(concepts, name="select-atoms", metadata={"source": "select"})

    where = str(d / "data.json")
    data = _read(d / "data.json", files, base)
    train_data = (
        _read(d / "data.train.json", files, base) if (d / "data.train.json").is_file() else None
    )
    if train_data is None:
        _fallback(
            fallbacks,
            "atoms/data.train.json is missing: atoms' training questions come "
            "from atoms/data.json's 'extra_queries' and atoms have no reference answers "
            "(sft/sft_dpo with comply_answers='reference' use the model's own answers for "
            "atomic questions)",
        )
    sets: list = []
    answers: dict = {}
    for cid, entry in data.items():
        if cid not in taxonomy:
            raise TaxonomyError(f"{where}: questions for {cid!r}, which the taxonomy lacks")
        if not isinstance(entry, dict):
            raise TaxonomyError(f"{where}: the entry of {cid!r} is not an object")
        context = entry.get("context") or {}
        if not isinstance(context, dict):
            raise TaxonomyError(
                f"{where}: {cid!r} has context {json.dumps(context)[:60]}, not an object with 'ids'"
            )
        context = context.get("ids") or []
        if list(context) != taxonomy.ancestors(cid)[::-1]:
            raise TaxonomyError(
                f"{where}: {cid!r} has context {context!r}, but its taxonomy path "
                f"is {taxonomy.ancestors(cid)[::-1]!r}"
            )
        qs, ans = _questions(cid, entry, (train_data or {}).get(cid), where, validation, seed)
        sets.append(qs)
        answers.update((a.question, a) for a in ans)
    _check_training(
        sets,
        d / "data.train.json",
        {c: c in (train_data or {}) for c in data},
        where,
        allow_missing_training,
        fallbacks,
        base,
    )
    examples = {}
    if (d / "example_cache.json").is_file():
        cache = _read(d / "example_cache.json", files, base)
        examples = {
            cid: _examples(cid, rows, str(d / "example_cache.json"))
            for cid, rows in cache.items()
            if cid in taxonomy
        }
    else:
        _fallback(
            fallbacks,
            "atoms/example_cache.json is missing: atoms have no cached few-shot "
            "examples (few_shot_cot writes its own from training questions with "
            "examples='auto'; examples='benchmark' fails)",
        )
    return SelectPartition(
        taxonomy, QuestionBank(sets), examples, answers, files=files, fallbacks=fallbacks
    )


def read_hints(
    path: str | os.PathLike, files: dict[str, str] | None = None, base: Path | None = None
) -> list[RelationTemplate]:
    """SELECT's ``hints.json``: relation templates with their slot rules."""
    hints = _read(Path(path), files, base)
    if not isinstance(hints, list):
        raise TaxonomyError(f"{path}: expected a list of relation templates")
    out = []
    for h in hints:
        if not isinstance(h, dict) or "relation" not in h or "components" not in h:
            raise TaxonomyError(f"{path}: a hint lacks 'relation' or 'components': {h!r:.120}")
        try:
            out.append(
                RelationTemplate(
                    h["relation"], tuple(SlotRule.from_select(c) for c in h["components"])
                )
            )
        except Exception as e:  # ConfigError from the rules: name the file
            raise TaxonomyError(f"{path}: {e}") from None
    return out


def load_select_compositions(
    directory: str | os.PathLike,
    atomic: Taxonomy | None = None,
    validation: float = 0.25,
    seed: int = 0,
    allow_missing_training: bool = False,
) -> SelectPartition:
    """The composition partition: taxonomy (relation-qualified ids), questions, examples,
    reference replies and the relation templates of ``hints.json``.

    With ``atomic``, every constituent must be one of its concepts. Missing files and training
    questions are handled as in :func:`load_select_atoms`.
    """
    base = find_release(directory)
    d = base / "compositions"
    files: dict[str, str] = {}
    fallbacks: list[str] = []
    tpath = d / "taxonomy_plus.json"
    forest = _read(tpath, files, base)
    if not isinstance(forest, dict):
        raise TaxonomyError(f"{tpath}: expected an object of relations")
    concepts: list[Concept] = []
    qualified: dict[tuple[str, str], str] = {}  # (relation, released id) -> our id

    def walk(sel_id: str, node: Any, parent: str | None, relation: str) -> None:
        if not isinstance(node, dict) or "name" not in node:
            raise TaxonomyError(f"{tpath}: composition {sel_id!r} lacks a 'name'")
        ids = tuple(node.get("ids") or sel_id.split("#"))
        if atomic is not None:
            for i in ids:
                if i not in atomic:
                    raise TaxonomyError(
                        f"{tpath}: composition {sel_id!r} joins {i!r}, which the "
                        "atomic taxonomy lacks"
                    )
        cid = composition_id(relation, ids)
        qualified[(relation, sel_id)] = cid
        concepts.append(
            Concept(
                id=cid,
                name=node["name"],
                kind="composition",
                parent=parent,
                root=relation,
                source="select",
                constituents=ids,
                relation=relation,
            )
        )
        for ch_id, ch in (node.get("children") or {}).items():
            walk(ch_id, ch, cid, relation)

    for relation, tree in forest.items():
        if not isinstance(tree, dict):
            raise TaxonomyError(f"{tpath}: relation {relation!r} does not map ids to compositions")
        for sel_id, node in tree.items():
            walk(sel_id, node, None, relation)
    taxonomy = Taxonomy.from_concepts(
        concepts, name="select-compositions", metadata={"source": "select"}
    )

    where = str(d / "data.json")
    data = _read(d / "data.json", files, base)
    train_data = (
        _read(d / "data.train.json", files, base) if (d / "data.train.json").is_file() else {}
    )
    if not (d / "data.train.json").is_file():
        _fallback(
            fallbacks,
            "compositions/data.train.json is missing: compositions' training "
            "questions come from compositions/data.json's 'extra_queries' and compositions "
            "have no reference answers (sft/sft_dpo with comply_answers='reference' use the "
            "model's own answers for composition questions)",
        )
    sets: list = []
    answers: dict = {}
    in_train: dict = {}
    for relation, per_relation in data.items():
        for sel_id, entry in per_relation.items():
            cid = qualified.get((relation, sel_id))
            if cid is None:
                raise TaxonomyError(
                    f"{where}: questions for {relation!r} / {sel_id!r}, which the taxonomy lacks"
                )
            qs, ans = _questions(
                cid, entry, (train_data.get(relation) or {}).get(sel_id), where, validation, seed
            )
            sets.append(qs)
            answers.update((a.question, a) for a in ans)
            in_train[cid] = sel_id in (train_data.get(relation) or {})
    _check_training(
        sets, d / "data.train.json", in_train, where, allow_missing_training, fallbacks, base
    )
    examples: dict[str, list[FewShotExample]] = {}
    if not (d / "example_cache.json").is_file():
        _fallback(
            fallbacks,
            "compositions/example_cache.json is missing: compositions have no "
            "cached few-shot examples (few_shot_cot writes its own from training questions "
            "with examples='auto'; examples='benchmark' fails)",
        )
    if (d / "example_cache.json").is_file():
        cache = _read(d / "example_cache.json", files, base)
        for relation, per_relation in cache.items():
            for sel_id, rows in (per_relation or {}).items():
                if (relation, sel_id) in qualified:
                    cid = qualified[(relation, sel_id)]
                    examples[cid] = _examples(cid, rows, str(d / "example_cache.json"))
    templates = read_hints(d / "hints.json", files, base) if (d / "hints.json").is_file() else []
    if not (d / "hints.json").is_file():
        _fallback(
            fallbacks,
            "compositions/hints.json is missing: no relation templates, so the "
            "compositions are not checked against them (compositions_regenerate_from_hints "
            "is null)",
        )
    return SelectPartition(
        taxonomy, QuestionBank(sets), examples, answers, templates, files, fallbacks
    )


def regenerate_compositions(atomic: Taxonomy, part: SelectPartition) -> Taxonomy:
    """The released compositions regenerated from ``hints.json`` and the atomic taxonomy: every
    released composition must obey a template's slot rules, and linking them by their
    constituents' IS-A relations must give the released parents."""
    only = [(c.relation, *c.constituents) for c in part.taxonomy]
    return compose(atomic, part.templates, only=only, source="select")


def same_structure(a: Taxonomy, b: Taxonomy) -> list[str]:
    """Differences in ids, parents and names between two taxonomies (empty when equal)."""
    out = [f"only in the first: {x}" for x in sorted(set(a.concepts) - set(b.concepts))]
    out += [f"only in the second: {x}" for x in sorted(set(b.concepts) - set(a.concepts))]
    for cid in sorted(set(a.concepts) & set(b.concepts)):
        if a[cid].parent != b[cid].parent:
            out.append(f"{cid}: parent {a[cid].parent!r} != {b[cid].parent!r}")
        if a[cid].name != b[cid].name:
            out.append(f"{cid}: name {a[cid].name!r} != {b[cid].name!r}")
    return out
