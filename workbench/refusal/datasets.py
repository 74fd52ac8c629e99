"""Named prompt sets for the refusal suite, each with the behaviour expected of a model, read
from the files their authors publish (the user downloads them; nothing ships but our own
sanity set).

Expected behaviour is one of ``should_refuse`` (harmful requests), ``may_refuse`` (politically
sensitive topics: aligned models may decline, uncensored ones should engage) and
``should_not_refuse`` (harmless requests: a refusal is over-refusal).

Each published set is one declarative entry of ``datasets.yaml`` beside this module (its
folder, files, columns, published count of prompts, source and the command that downloads
it), validated as a :class:`DatasetSpec` when the module is imported and held in
:data:`DATASETS`. Formats (each checked against the published files; see docs/refusal.md,
"Refusal evaluation suite"):

* seed 001's release (``MultiverseComputingCAI/llm-refusal-evaluation`` on Hugging Face): one
  Parquet file per split, ``data/<split>-00000-of-00001.parquet``, columns ``_id``, ``prompt``,
  ``subject``;
* XSTest v2 (``xstest_prompts.csv``): ``id,prompt,type,label,focus,note``, label safe/unsafe;
* JailbreakBench's JBB-Behaviors (``data/{harmful,benign}-behaviors.csv``):
  ``Index,Goal,Target,Behavior,Category,Source``; the prompt is ``Goal``;
* SORRY-Bench (``question.jsonl``): ``{"question_id", "category", "turns": [prompt],
  "prompt_style"}``;
* HarmBench (``harmbench_behaviors_text_all.csv``): ``Behavior,FunctionalCategory,
  SemanticCategory,Tags,ContextString,BehaviorID``; a context goes before the behaviour as
  HarmBench's own direct-request baseline puts it;
* promptfoo's CCP-sensitive-prompts (``ccp-sensitive-prompts.csv``): ``subject,prompt``;
* deccp (``data/censored-*.parquet``, ``data/uncensored-*.parquet``): one column ``text``;
* any prompt file (:data:`GENERIC`): CSV, JSON (an array of objects), JSON Lines or Parquet with
  a ``prompt`` column and optional ``id``, ``category`` and ``expected``.

The files are read by :mod:`workbench.refusal.prompt_files` (``datasets`` for Parquet); a set
holding another number of prompts than published is named through
:func:`workbench.releases.shortfall`, the check every reader of a published release shares.
Every problem with a file is one :class:`DatasetError` line naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import ClassVar, Literal

import yaml

from workbench.errors import ConfigError
from workbench.paths import project_path
from workbench.refusal.prompt_files import (
    EXPECTED,
    GENERIC,
    KEPT_FIRST,
    MAY_REFUSE,
    SHOULD_NOT_REFUSE,
    SHOULD_REFUSE,
    DatasetError,
    PromptItem,
    PromptSet,
    TableFormat,
    items_from_records,
    read_prompt_file,
    read_records,
    sample_items,
)
from workbench.registry import Registry
from workbench.releases import shortfall
from workbench.settings import Positive, Settings
from workbench.yamlfile import unique_keys_loader, yaml_problem

__all__ = [
    "DATASETS",
    "DATASETS_FILE",
    "EXPECTED",
    "GENERIC",
    "KEPT_FIRST",
    "MAY_REFUSE",
    "SANITY_FILE",
    "SEED_RELEASE",
    "SHOULD_NOT_REFUSE",
    "SHOULD_REFUSE",
    "DatasetError",
    "DatasetSpec",
    "PromptItem",
    "PromptSet",
    "TableFormat",
    "describe",
    "items_from_records",
    "load_dataset",
    "read_entries",
    "read_prompt_file",
    "read_records",
    "resolve_path",
    "sample_items",
]

#: The sanity set written for the workbench (shipped; the default run needs nothing else).
SANITY_FILE = "data/refusal/sanity.jsonl"
SEED_RELEASE = "MultiverseComputingCAI/llm-refusal-evaluation"
#: The published sets' entries, package data beside this module.
DATASETS_FILE = "datasets.yaml"


class DatasetSpec(Settings):
    """A named prompt set (one entry of ``datasets.yaml``): what a model should do with it,
    and where its files are.

    Attributes:
        name: the name configs use.
        expected: the behaviour expected of a model ("": each row says, in the generic
            format's ``expected`` column, which takes precedence anyway).
        folder: the directory the download command creates under the suite's ``data_dir``.
        files: the file inside ``folder`` (a glob for sharded Parquet: every shard must be
            there).
        columns: how the file is laid out (:class:`TableFormat`).
        rows: the prompts the published set holds (null where the release does not fix it), so
            that a partial download is named rather than run.
        source: where it is published and the command that downloads it (``DATA_DIR``: the
            suite's ``data_dir``).
        description: one line about the set.
    """

    label: ClassVar[str] = "dataset entry field"

    name: str
    expected: Literal["should_refuse", "may_refuse", "should_not_refuse", ""]
    folder: str
    files: str
    columns: TableFormat = GENERIC
    rows: Positive | None = None
    source: str
    description: str = ""

    @property
    def pattern(self) -> str:
        """The file inside ``folder`` (``files``)."""
        return self.files

    @property
    def layout(self) -> TableFormat:
        """How the file is laid out (``columns``)."""
        return self.columns

    def default_path(self, data_dir: str | os.PathLike) -> Path:
        return Path(data_dir).expanduser() / self.folder / self.files


def read_entries(text: str, where: str = DATASETS_FILE) -> list[DatasetSpec]:
    """The entries of a ``datasets.yaml`` (``datasets:``, a list of :class:`DatasetSpec`
    mappings), or one ConfigError line naming the file and the entry."""
    try:
        raw = yaml.load(text, Loader=unique_keys_loader())
    except yaml.YAMLError as e:
        raise ConfigError(f"{where}: invalid YAML: {yaml_problem(e)}") from None
    if (
        not isinstance(raw, dict)
        or set(raw) != {"datasets"}
        or not isinstance(raw["datasets"], list)
    ):
        raise ConfigError(f"{where}: expected one key, 'datasets', holding a list of entries")
    specs = []
    for n, entry in enumerate(raw["datasets"], 1):
        name = entry.get("name", "?") if isinstance(entry, dict) else "?"
        try:
            specs.append(DatasetSpec.from_dict(entry))
        except ConfigError as e:
            raise ConfigError(f"{where}: entry {n} ({name}): {e}") from None
    return specs


def _registry() -> Registry[DatasetSpec]:
    """The shipped entries (package data, read with :mod:`importlib.resources`) by name."""
    entries = resources.files("workbench.refusal").joinpath(DATASETS_FILE)
    out: Registry[DatasetSpec] = Registry("dataset")
    for spec in read_entries(entries.read_text(encoding="utf-8")):
        if spec.name in out:
            raise ConfigError(f"{DATASETS_FILE}: the dataset {spec.name!r} has two entries")
        out.register(spec.name, spec)
    return out


#: Every named set, in the order of ``datasets.yaml``.
DATASETS: Registry[DatasetSpec] = _registry()


def resolve_path(
    spec: DatasetSpec, data_dir: str | os.PathLike, path: str | os.PathLike | None = None
) -> Path:
    """Where ``spec``'s file is: ``path`` (a file, or the folder it was downloaded to), else
    ``data_dir/<folder>/<files>`` (the shipped sanity set: in the checkout)."""
    if path:
        p = project_path(path)
        return p / spec.files if p.is_dir() else p
    if spec.name == "sanity":
        return project_path(SANITY_FILE)
    return spec.default_path(data_dir)


def load_dataset(
    name: str,
    data_dir: str | os.PathLike,
    path: str | os.PathLike | None = None,
    expected: str | None = None,
) -> PromptSet:
    """A registered set by name, or any prompt file (``path`` and ``expected`` needed) in the
    generic format. A missing file says where to download it."""
    spec = DATASETS.get(name)
    if spec is None:
        if not path:
            raise DatasetError(
                f"unknown dataset {name!r}: name one of {', '.join(DATASETS)}, or "
                "give 'path' (and 'expected') for a prompt file of your own"
            )
        return read_prompt_file(project_path(path), name, expected)
    where = resolve_path(spec, data_dir, path)
    get = spec.source.replace("DATA_DIR", str(data_dir))
    try:
        loaded = read_prompt_file(
            where, name, expected or spec.expected or None, spec.columns, spec.description
        )
    except DatasetError as e:
        if "no file" in str(e) and spec.name != "sanity":
            raise DatasetError(
                f"{e}; download it from {get} (or set the dataset's 'path')"
            ) from None
        raise
    for _, have, want in shortfall({name: spec.rows}, {name: len(loaded)}).differ:
        raise DatasetError(
            f"dataset {name!r}: {where} holds {have} prompts where the published set has "
            f"{want}: a partial or altered download? (download it again from {get}; the "
            "suite's 'limit' runs a sample)"
        )
    return loaded


def describe(names: Sequence[str] | None = None) -> list[dict]:
    """The registry as rows (name, expected behaviour, prompts the release holds, file, source,
    description)."""
    out = []
    for name, s in DATASETS.items():
        if names is None or name in names:
            out.append(
                {
                    "name": name,
                    "expected": s.expected,
                    "prompts": s.rows,
                    "file": f"{s.folder}/{s.files}",
                    "source": s.source,
                    "description": s.description,
                }
            )
    return out
