"""Import SELECT's released benchmark (kinshuk-h/SELECT, ``data/SELECT/``) unchanged.

Shapes, as released:

* ``atoms/taxonomy_plus.json`` (else ``taxonomy.json``): nested ``{id: {"name", "children":
  {id: {...}}}}`` under five schema.org roots; leaves are instances.
* ``atoms/data.json``: ``{id: {"concept", "name", "context": {"names", "ids"}, "queries",
  "extra_queries"}}``: 30 evaluation ``queries`` and 20 ``extra_queries`` for training;
  ``context`` lists the ancestors, root first.
* ``atoms/data.train.json`` (optional): ``{id: {..., "queries", "responses": {md5(query):
  {"safe", "unsafe"}}}}``: the training questions again, with reference replies.
* ``atoms/example_cache.json`` (optional): ``{id: [{"query", "response", "concept",
  "context"}]}``: SELECT's cached few-shot examples ("Abstained" or an answer).
* ``compositions/taxonomy_plus.json``: ``{relation: {id: {"name", "names", "ids", "children"}}}``
  with ids ``a#b`` unique within a relation only; ``compositions/data.json`` and
  ``data.train.json`` are ``{relation: {id: {..., "compositions": {"names", "ids"}}}}`` with 20 +
  10 questions; ``example_cache.json`` is ``{relation: {id: [...]}}``; ``hints.json`` lists the
  relation templates ``{"relation", "components": [{"concept", "flow", "exclude"?}]}`` where
  ``exclude`` is a list of ids or the string ``"leaves"``.

What the import does: names are kept exactly as released (they are already the phrases SELECT's
prompts use, mostly plural: "Rivers"); composition ids are qualified by their relation
(``consuming-at/yago:Liquor#yago:Park``) because two relations may join the same pair; the
training questions (``extra_queries`` / ``data.train.json``) are split into train and validation
by a seeded shuffle per concept (a quarter, rounded half up, to validation: 15/5 for atoms, 7/3
for compositions); the evaluation questions are ``queries``. The example cache becomes the
benchmark's few-shot examples, the reference replies its answers.

The import is loud: a missing optional file is a :class:`SelectImportWarning` naming the file and
what falls back, recorded in the manifest's ``fallbacks``; a concept with no training questions
is an error (every concept of the release has them) unless ``allow_missing_training``; a Git
LFS pointer in place of a file is an error saying to run ``git lfs pull``. Evaluation questions
that are also some concept's training question are recorded in the manifest's ``overlap`` and
never asked in evaluation (:attr:`~workbench.taxonomy.benchmark.Benchmark.excluded_eval`).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from workbench.releases import Found, check_release, register
from workbench.select.protocol import find_protocol_root, is_lfs_pointer, read_protocol
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
    _rng,
)

#: SELECT's root ids and the root-type keys the workbench uses for them.
ROOT_TYPES = {
    "schema:Product": "products",
    "schema:Person": "people",
    "schema:Place": "places",
    "schema:Organization": "organizations",
    "schema:CreativeWork": "creative works",
}
GENERATOR = "select-gpt-4o"

T = TypeVar("T")


class SelectImportWarning(UserWarning):
    """Part of the release is missing and something falls back (the message says what)."""


@dataclass
class SelectPartition:
    """One partition of the release (atoms or compositions) in the workbench's types."""

    taxonomy: Taxonomy
    questions: QuestionBank
    examples: dict[str, list[FewShotExample]] = field(default_factory=dict)
    answers: dict[str, ReferenceAnswer] = field(default_factory=dict)
    templates: list[RelationTemplate] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    fallbacks: list[str] = field(default_factory=list)  # what is missing and what falls back


def _fallback(part_fallbacks: list[str], message: str) -> None:
    part_fallbacks.append(message)
    warnings.warn(message, SelectImportWarning, stacklevel=3)


def find_release(directory: str | os.PathLike) -> Path:
    """The directory holding ``atoms/``: ``directory`` itself, or its ``SELECT/`` or
    ``data/SELECT/`` (so a clone of the repository works as well as the data folder)."""
    d = Path(directory)
    for cand in (d, d / "SELECT", d / "data" / "SELECT"):
        if (cand / "atoms").is_dir():
            return cand
    raise TaxonomyError(
        f"no SELECT release under {d} (looked for atoms/ in {d}, {d / 'SELECT'} "
        f"and {d / 'data' / 'SELECT'})"
    )


def _read(path: Path, files: dict[str, str] | None = None, base: Path | None = None) -> Any:
    if not path.is_file():
        raise TaxonomyError(f"SELECT file missing: {path}")
    raw = path.read_bytes()
    if not raw.strip():
        raise TaxonomyError(f"{path}: empty file (a Git LFS or partial download?)")
    if is_lfs_pointer(raw):
        raise TaxonomyError(
            f"{path} is a Git LFS pointer, not the data: run `git lfs pull` in "
            "the clone of kinshuk-h/SELECT (or download the file itself)"
        )
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise TaxonomyError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None
    if files is not None:
        files[str(path.relative_to(base)) if base else path.name] = hashlib.sha256(raw).hexdigest()
    return data


def _strings(value: Any, where: str, what: str, key: str | None = None) -> list[str]:
    """``value`` as a list of strings; else an error naming ``where`` (and the line of ``key``
    in it, looked up only then)."""
    if not isinstance(value, list) or not all(isinstance(q, str) for q in value):
        raise TaxonomyError(f"{_at(where, key) if key else where}: {what} is not a list of strings")
    return list(value)


def line_of(path: str | os.PathLike, key: str) -> int | None:
    """The line of ``path`` where the JSON key ``key`` first appears (None if nowhere): where a
    malformed entry is, for the error naming it."""
    needle = json.dumps(key) + ":"
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if needle in line:
                    return n
    except OSError:
        return None
    return None


def _at(where: str, key: str) -> str:
    n = line_of(where, key)
    return f"{where}, line {n}" if n else where


def _tree_size(tree: Any) -> int:
    if not isinstance(tree, dict):
        return 0
    return sum(
        1 + _tree_size(n.get("children") if isinstance(n, dict) else None) for n in tree.values()
    )


def _total(entries, key: str, where: Path | None = None) -> int:
    """How many ``key`` (questions, responses) the entries hold; with ``where``, an entry whose
    ``key`` is not a list of strings (or an object, for responses) is an error naming the file
    and line."""
    n = 0
    for name, e in entries:
        value = e.get(key) if isinstance(e, dict) else None
        if value is None:
            continue
        ok = (
            isinstance(value, dict)
            if key == "responses"
            else (isinstance(value, list) and all(isinstance(q, str) for q in value))
        )
        if not ok and where is not None:
            what = "an object" if key == "responses" else "a list of strings"
            raise TaxonomyError(
                f"{_at(str(where), name)}: {name!r} {key!r} is not {what} "
                f"(got {type(value).__name__} {value!r:.60})"
            )
        n += len(value) if ok else 0
    return n


def count_select(base: str | os.PathLike) -> dict:
    """What each file of the release under ``base`` (the folder holding ``atoms/``) holds, as
    :data:`SELECT_RELEASE` counts it: concepts per file, questions and examples
    as parts."""
    base = Path(base)
    found: dict[str, Found] = {}

    def read(rel: str):
        if not (base / rel).is_file():
            found[rel] = Found(None)
            return None
        return _read(base / rel)

    def values(d) -> list:
        return list(d.values()) if isinstance(d, dict) else []

    def items(d) -> list:
        return list(d.items()) if isinstance(d, dict) else []

    def nested(d) -> list:  # compositions' files: {relation: {id: entry}}
        return [e for per in values(d) for e in values(per)]

    def nested_items(d) -> list:
        return [kv for per in values(d) for kv in items(per)]

    def questions_and_examples(part: str, entries, entry_items) -> None:
        """data.json, data.train.json and example_cache.json of ``part`` (atoms: {id: entry};
        compositions: {relation: {id: entry}}, read by ``entries`` / ``entry_items``)."""
        for name, keys in (
            ("data.json", ("queries", "extra_queries")),
            ("data.train.json", ("queries", "responses")),
        ):
            d = read(f"{part}/{name}")
            if d is not None:
                found[f"{part}/{name}"] = Found(
                    len(entries(d)),
                    {k: _total(entry_items(d), k, base / part / name) for k in keys},
                )
        d = read(f"{part}/example_cache.json")
        if d is not None:
            found[f"{part}/example_cache.json"] = Found(
                len(entries(d)),
                {"examples": sum(len(v) for v in entries(d) if isinstance(v, list))},
            )

    t = read("atoms/taxonomy_plus.json")
    if t is not None:
        found["atoms/taxonomy_plus.json"] = Found(_tree_size(t))
    questions_and_examples("atoms", values, items)
    t = read("compositions/taxonomy_plus.json")
    if t is not None:
        found["compositions/taxonomy_plus.json"] = Found(
            sum(_tree_size(r) for r in values(t)), {"relations": len(values(t))}
        )
    questions_and_examples("compositions", nested, nested_items)
    d = read("compositions/hints.json")
    if d is not None:
        found["compositions/hints.json"] = Found(len(d) if isinstance(d, list) else 0)
    return found


def _locate_select(root: str | os.PathLike) -> tuple[Path, dict[str, Found]]:
    base = find_release(root)
    return base, count_select(base)


#: kinshuk-h/SELECT data/SELECT: concepts per file (relations' compositions for those of
#: compositions/), questions as parts. atoms/data.train.json's blob was not in the copy
#: counted: it must be there, its size is not checked.
SELECT_RELEASE = register(
    "select",
    "github.com/kinshuk-h/SELECT @ e193764, data/SELECT/",
    {
        "atoms/taxonomy_plus.json": {"items": 394},
        "atoms/data.json": {"items": 394, "parts": {"queries": 11820, "extra_queries": 7880}},
        "atoms/data.train.json": {"items": None},
        "atoms/example_cache.json": {"items": 394, "parts": {"examples": 1784}},
        "compositions/taxonomy_plus.json": {"items": 156, "parts": {"relations": 11}},
        "compositions/data.json": {
            "items": 156,
            "parts": {"queries": 3120, "extra_queries": 1560},
        },
        "compositions/data.train.json": {
            "items": 156,
            "parts": {"queries": 1560, "responses": 1560},
        },
        "compositions/example_cache.json": {"items": 156, "parts": {"examples": 730}},
        "compositions/hints.json": {"items": 12},
    },
    unit="concepts",
    additive=False,  # each file counts the same concepts
    locate=_locate_select,
)


def check_select_release(base: str | os.PathLike, allow_partial: bool = False) -> str:
    """The import's record ("whole" / "partial: ...") of the release under ``base`` against
    the published one (:data:`SELECT_RELEASE`) or its ``release_manifest.json``;
    a missing file or fewer concepts or questions is an error naming them unless
    ``allow_partial``."""
    return check_release("select", Path(base), count_select(base), allow_partial)


def split_training(
    concept_id: str, questions: Sequence[T], validation: float, seed: int
) -> tuple[list[T], list[T]]:
    """(train, validation): a seeded shuffle per concept, ``round_half_up(n * validation)`` to
    validation (but at least one question stays in train)."""
    order = list(questions)
    _rng(seed, "select-split:" + concept_id).shuffle(order)
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
    names = ", ".join(repr(c) for c in empty[:5]) + (
        f" and {len(empty) - 5} more" if len(empty) > 5 else ""
    )
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
        context = (entry.get("context") or {}).get("ids") or []
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


def import_select(
    directory: str | os.PathLike,
    validation: float = 0.25,
    seed: int = 0,
    allow_missing_training: bool = False,
    allow_partial: bool = False,
):
    """The whole release as a :class:`~workbench.taxonomy.benchmark.Benchmark` with a manifest
    (source files and their hashes, split parameters, whether the compositions regenerate, what
    fell back for missing files (``fallbacks``), and the evaluation questions that are also
    training questions (``overlap``), which evaluation never asks).

    The release is whole or an error naming what is missing (:func:`check_select_release`:
    every file of the published release with its concepts and questions); ``allow_partial``
    imports what is there, recorded as the manifest's ``release_load`` (and so in every row a
    run on it writes). Then warns (:class:`SelectImportWarning`) for each fallback and for an
    overlap; raises :class:`TaxonomyError` for a concept without training questions unless
    ``allow_missing_training``.

    Given a clone of the repository (or its ``data/`` inside one), the benchmark also gets
    SELECT's protocol text (``select_protocol``: prompt templates, refusal keywords, ...); given
    the data folder alone, it is None and the manifest says why (``"select_protocol"``)."""
    from workbench.taxonomy.benchmark import Benchmark, eval_overlap

    if not 0 <= validation < 1:
        raise TaxonomyError(f"validation must be a fraction in [0, 1), got {validation!r}")
    base = find_release(directory)
    release_load = check_select_release(base, allow_partial)
    atoms = load_select_atoms(base, validation, seed, allow_missing_training)
    comps = load_select_compositions(base, atoms.taxonomy, validation, seed, allow_missing_training)
    regenerated = None
    if comps.templates:
        try:
            regenerated = not same_structure(
                regenerate_compositions(atoms.taxonomy, comps), comps.taxonomy
            )
        except Exception:  # a release whose hints do not produce it: recorded, not fatal
            regenerated = False
    questions = atoms.questions.merge(comps.questions)
    overlap = eval_overlap(questions)
    if overlap["count"]:
        shown = "; ".join(
            f"{p['question']!r} (evaluates {p['eval_of']}, trains {', '.join(p['train_of'])})"
            for p in overlap["pairs"][:3]
        )
        warnings.warn(
            f"{overlap['count']} evaluation question(s) are also training questions "
            f"and are excluded from evaluation: {shown}",
            SelectImportWarning,
            stacklevel=2,
        )
    manifest = {
        "name": "SELECT (released benchmark)",
        "source": "SELECT release (github.com/kinshuk-h/SELECT, data/SELECT), YAGO 4.5 concepts, "
        "questions written by GPT-4o",
        "release_dir": str(base.resolve()),
        "release_files": {**atoms.files, **comps.files},
        "builder": "workbench.taxonomy.import_select",
        "parameters": {"validation_fraction": validation, "split_seed": seed},
        "compositions_regenerate_from_hints": regenerated,
        "fallbacks": atoms.fallbacks + comps.fallbacks,
        "overlap": overlap,
        "release_load": release_load,
    }
    clone = find_protocol_root(directory) or find_protocol_root(base)
    if clone is None:
        manifest["select_protocol"] = (
            f"absent: no templates/prompts.yaml in or above {base} (a data folder without the "
            "rest of the repository); import a clone of github.com/kinshuk-h/SELECT for SELECT's "
            "prompts and refusal rule"
        )
    return Benchmark(
        atoms.taxonomy,
        comps.taxonomy,
        questions,
        manifest,
        examples={**atoms.examples, **comps.examples},
        answers={**atoms.answers, **comps.answers},
        select_protocol=read_protocol(clone) if clone else None,
    )
