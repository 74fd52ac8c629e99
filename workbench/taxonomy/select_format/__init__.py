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

import os
import warnings

from workbench.taxonomy.model import TaxonomyError
from workbench.taxonomy.select_format.convert import (
    load_select_atoms,
    load_select_compositions,
    read_hints,
    regenerate_compositions,
    same_structure,
    split_training,
)
from workbench.taxonomy.select_format.files import (
    GENERATOR,
    ROOT_TYPES,
    SelectImportWarning,
    SelectPartition,
    find_release,
    line_of,
)
from workbench.taxonomy.select_format.manifest import (
    SELECT_RELEASE,
    check_select_release,
    count_select,
)
from workbench.taxonomy.select_format.protocol import find_protocol_root, read_protocol


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


__all__ = [
    "GENERATOR",
    "ROOT_TYPES",
    "SELECT_RELEASE",
    "SelectImportWarning",
    "SelectPartition",
    "check_select_release",
    "count_select",
    "find_release",
    "import_select",
    "line_of",
    "load_select_atoms",
    "load_select_compositions",
    "read_hints",
    "regenerate_compositions",
    "same_structure",
    "split_training",
]
