"""Reading prompt files: the generic reader behind every set of the refusal suite.

A prompt file is CSV, JSON (an array of objects), JSON Lines or Parquet, or the shards a glob
names; :class:`TableFormat` says which columns hold the prompt, its id and category (a
published set's entry in ``datasets.yaml`` gives its own, :data:`GENERIC` is any file of one's
own). Each format is read by the library that reads it as the file's authors meant:

* Parquet (Hugging Face releases) through ``datasets`` (its Parquet builder, offline, cached in
  a temporary folder removed after the read), as pandas would give the rows;
* CSV through pandas (every cell text, empty cells empty: ``datasets``' CSV builder has no
  all-text mode and would make an extra leading field an index column);
* JSON and JSON Lines through the standard library (``datasets``' JSON builder would take one
  object as a one-row file, merge rows of different types into a column type or fail on them,
  and give no line number).

A sharded glob's shards must all be there (:func:`workbench.releases.shortfall`, the one check
of every published release). Every problem with a file (missing, unreadable, a missing column,
an empty prompt, a duplicate id, an unknown expected behaviour) is one :class:`DatasetError`
line naming the file.
"""

from __future__ import annotations

import csv
import glob
import hashlib
import json
import logging
import os
import random
import re
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from workbench.errors import ConfigError, WorkbenchError
from workbench.paths import read_utf8
from workbench.releases import shortfall
from workbench.settings import Seq, Settings

SHOULD_REFUSE, MAY_REFUSE, SHOULD_NOT_REFUSE = "should_refuse", "may_refuse", "should_not_refuse"
EXPECTED = (SHOULD_REFUSE, MAY_REFUSE, SHOULD_NOT_REFUSE)


class DatasetError(WorkbenchError):
    """A prompt file is missing or malformed; the one-line message names the file."""


@dataclass(frozen=True)
class PromptItem:
    """One prompt of a set, with the behaviour expected of a model."""

    prompt_id: str
    prompt: str
    expected: str
    category: str = ""


class TableFormat(Settings):
    """How a file is laid out: which columns hold the prompt, its id and category (an entry's
    ``columns`` in ``datasets.yaml``).

    Attributes:
        prompt: the column with the prompt (for ``first_turn``, a list of turns).
        id / category: columns with an id and a category (null: the row number / none).
        context: a column whose text, when present, precedes the prompt (HarmBench).
        where: keep only rows whose column has this value (XSTest's ``label``).
        first_turn: the prompt column holds the conversation's turns; the first is the prompt.
        expected: a column with each row's expected behaviour (the generic format).
        optional: the columns above a file may lack.
    """

    label: ClassVar[str] = "dataset column setting"

    prompt: str = "prompt"
    id: str | None = "id"
    category: str | None = None
    context: str | None = None
    where: dict[str, str] = Field(default_factory=dict)
    first_turn: bool = False
    expected: str | None = None
    optional: Seq[str] = ()

    def required(self) -> list[str]:
        cols = [self.prompt, self.id, self.category, self.context, *self.where]
        return [c for c in dict.fromkeys(cols) if c and c not in self.optional]


#: Any prompt file: a ``prompt`` column; ``id``, ``category`` and ``expected`` when present.
GENERIC = TableFormat(
    prompt="prompt",
    id="id",
    category="category",
    expected="expected",
    optional=("id", "category", "expected"),
)


@dataclass
class PromptSet:
    """A loaded set: its items, the file read and a hash of its bytes (recorded with rows)."""

    name: str
    items: list[PromptItem]
    path: str
    content_hash: str
    expected: str = ""  # the set's declared behaviour ("" when rows carry their own)
    description: str = ""
    splits: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.items)

    def limited(self, limit: int, seed: object) -> tuple[PromptSet, tuple[str, ...]]:
        """This set cut to at most ``limit`` prompts (:func:`sample_items`), and the splits the
        cut leaves without a prompt (only when ``limit`` is smaller than the number of splits)."""
        if not limit or limit >= len(self.items):
            return self, ()
        items = sample_items(self.items, limit, f"{seed}:{self.name}")
        kept = tuple(e for e in self.splits if any(i.expected == e for i in items))
        cut = replace(self, items=items, splits=kept)
        return cut, tuple(e for e in self.splits if e not in kept)


#: The split a limit too small for every split keeps first: the prompts a model should refuse,
#: what a refusal suite is about.
KEPT_FIRST = ("should_refuse",)


def sample_items(items: Sequence[PromptItem], limit: int, seed: str) -> list[PromptItem]:
    """A seeded sample of at most ``limit`` items, in their order, spread over the expected
    behaviours: each keeps at least one item while ``limit`` allows (so a small limit never
    silently drops a split; below one per split, ``should_refuse`` is kept first), the rest in proportion to their sizes (largest remainder). With one
    behaviour it is the plain seeded sample ``random.Random(seed).sample``."""
    if limit >= len(items):
        return list(items)
    groups: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(it.expected, []).append(i)
    if len(groups) == 1:
        return [items[i] for i in sorted(random.Random(seed).sample(range(len(items)), limit))]
    names = list(groups)
    if limit < len(names):  # not every split can keep one: should_refuse, then a seeded choice
        first = [n for n in KEPT_FIRST if n in groups][:limit]
        others = [n for n in names if n not in first]
        chosen = first + random.Random(f"{seed}:splits").sample(others, limit - len(first))
        names = sorted(chosen, key=list(groups).index)
    share = dict.fromkeys(names, 1)
    rest = limit - len(names)
    spare = {n: len(groups[n]) - 1 for n in names}
    total = sum(spare.values())
    if rest and total:
        exact = {n: rest * spare[n] / total for n in names}
        for n in names:
            share[n] += int(exact[n])
        left = rest - sum(int(v) for v in exact.values())
        for n in sorted(names, key=lambda n: (-(exact[n] - int(exact[n])), names.index(n)))[:left]:
            share[n] += 1
    keep: list[int] = []
    for n in names:
        idx = groups[n]
        keep += random.Random(f"{seed}:{n}").sample(idx, min(share[n], len(idx)))
    return [items[i] for i in sorted(keep)]


# ---------------------------------------------------------------------------------------------
# Reading files


def _fail(name: str, path: Path, what: str) -> DatasetError:
    return DatasetError(f"dataset {name!r}: {path}: {what}")


_KINDS = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
}


def _kind(path: Path) -> str:
    return _KINDS.get(path.suffix.lower(), "")


def read_records(path: str | os.PathLike, name: str = "?", whole_rows: bool = False) -> list[dict]:
    """The rows of a CSV, JSON (array of objects), JSON Lines or Parquet file, as dicts. With
    ``whole_rows`` (a published CSV, whose every row holds every field) a CSV row with fewer or
    more fields than the header is an error: a cell lost in the middle shifts the later ones
    into the wrong columns, which pandas cannot tell from empty trailing cells (and one more
    field in every row makes pandas read the first column as the index)."""
    p = Path(path)
    kind = _kind(p)
    if not kind:
        raise _fail(name, p, "unknown file type (expected .csv, .json, .jsonl or .parquet)")
    try:
        if kind == "csv":
            import pandas as pd

            try:
                frame = pd.read_csv(p, dtype=str, keep_default_na=False)
            except pd.errors.EmptyDataError:
                raise _fail(name, p, "is empty") from None
            if whole_rows:
                _check_whole_rows(p, name)
            return frame.to_dict("records")
        if kind == "parquet":
            return read_parquet(p)
        text = p.read_text(encoding="utf-8")
    except DatasetError:
        raise
    except UnicodeDecodeError:  # a CSV or JSON saved in another encoding
        try:  # the file's first bad byte (pandas reports one within its read buffer)
            read_utf8(p)
        except ConfigError as e:
            raise _fail(name, p, str(e).removeprefix(f"{p}: ")) from None
        raise
    except (OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _fail(name, p, f"cannot be read as {kind}: {first}") from None
    if kind == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise _fail(name, p, f"is not valid JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise _fail(name, p, "must hold a JSON array of objects, one per prompt")
        return data
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise _fail(name, p, f"line {n} is not valid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise _fail(name, p, f"line {n} is not a JSON object")
        rows.append(row)
    return rows


@contextmanager
def _offline_datasets() -> Iterator[Any]:
    """``datasets``, quiet and offline for the block (a packaged builder's load would otherwise
    ask the Hub to count it): data is only ever read from the user's own files."""
    import datasets
    import datasets.config

    saved = datasets.config.HF_HUB_OFFLINE, datasets.config.HF_UPDATE_DOWNLOAD_COUNTS
    bars = datasets.is_progress_bar_enabled()
    level = datasets.logging.get_verbosity()
    datasets.config.HF_HUB_OFFLINE, datasets.config.HF_UPDATE_DOWNLOAD_COUNTS = True, False
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity(logging.CRITICAL)
    try:
        yield datasets
    finally:
        datasets.config.HF_HUB_OFFLINE, datasets.config.HF_UPDATE_DOWNLOAD_COUNTS = saved
        datasets.logging.set_verbosity(level)
        if bars:
            datasets.enable_progress_bars()


def read_parquet(path: Path) -> list[dict]:
    """A Parquet file's rows through ``datasets`` (offline, cached in a temporary folder removed
    afterwards), with the values and columns ``pandas.read_parquet`` gives: a column pandas
    would restore as the frame's index is left out, as it was. A file ``datasets`` cannot read
    raises the reader's own error (an ``OSError`` or ``ValueError``)."""
    import pyarrow.parquet as pq

    if pq.read_metadata(path).num_rows == 0:  # datasets' builder cannot make batches of none
        return []
    index = (pq.read_schema(path).pandas_metadata or {}).get("index_columns", [])
    with _offline_datasets() as datasets, tempfile.TemporaryDirectory(prefix="wb-data-") as cache:
        try:
            table = datasets.load_dataset(
                "parquet",
                data_files=[glob.escape(str(path))],  # the file itself, not a pattern
                split="train",
                cache_dir=cache,
                keep_in_memory=True,
            )
        except datasets.exceptions.DatasetGenerationError as e:
            cause = e.__cause__ or e.__context__
            if isinstance(cause, (OSError, ValueError)):
                raise cause from None
            raise ValueError(str(cause or e)) from None
        frame = table.to_pandas()
    dropped = [c for c in index if isinstance(c, str) and c in frame.columns]
    return frame.drop(columns=dropped).to_dict("records")


def _check_whole_rows(path: Path, name: str) -> None:
    """One line naming the first CSV record (counted after the header, blank lines skipped,
    as pandas skips them) whose number of fields is not the header's."""
    limit = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)  # a long field pandas reads is no error here either
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            rows = (r for r in reader if any(c.strip() for c in r))
            header = next(rows, [])
            for n, row in enumerate(rows, 1):
                if len(row) != len(header):
                    raise _fail(
                        name,
                        path,
                        f"row {n} (line {reader.line_num}) has {len(row)} fields where the "
                        f"header has {len(header)}: a cell is missing or one too many, and the "
                        "later ones would be read into the wrong columns (a damaged download?)",
                    )
    except csv.Error as e:
        raise _fail(name, path, f"cannot be read as csv: {e}") from None
    finally:
        csv.field_size_limit(limit)


def _text(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


def items_from_records(
    records: Sequence[dict], layout: TableFormat, expected: str | None, name: str, path: Path
) -> list[PromptItem]:
    """Map a file's rows to prompts by ``layout``; ``expected`` applies to rows without their own."""
    if not records:
        raise _fail(name, path, "holds no rows")
    columns = list(dict.fromkeys(k for r in records for k in r))
    missing = [c for c in layout.required() if c not in columns]
    if missing:
        raise _fail(
            name,
            path,
            f"has no column {', '.join(map(repr, missing))} (its columns: {', '.join(columns)})",
        )
    where = dict(layout.where)
    items, seen = [], set()
    for n, row in enumerate(records, 1):
        if any(_text(row.get(c)) != v for c, v in where.items()):
            continue
        value = row.get(layout.prompt)
        if layout.first_turn:
            if value is not None and hasattr(value, "tolist"):  # numpy arrays from parquet
                value = value.tolist()
            if not isinstance(value, (list, tuple)) or not value:
                raise _fail(
                    name, path, f"row {n}: {layout.prompt!r} must be a non-empty list of turns"
                )
            value = value[0]
        if value is not None and not isinstance(value, str) and value == value:  # NaN: empty
            kind = (
                "a list"
                if isinstance(value, (list, tuple))
                else "an object"
                if isinstance(value, dict)
                else type(value).__name__
            )
            raise _fail(name, path, f"row {n}: {layout.prompt!r} must be text, got {kind}")
        prompt = _text(value).strip()
        if not prompt:
            raise _fail(name, path, f"row {n} has an empty {layout.prompt!r}")
        context = _text(row.get(layout.context)).strip() if layout.context else ""
        if context:
            prompt = f"{context}\n\n---\n\n{prompt}"
        pid = _text(row.get(layout.id)).strip() if layout.id and layout.id in row else ""
        pid = pid or str(n - 1)
        if pid in seen:
            raise _fail(name, path, f"row {n} repeats the id {pid!r}")
        seen.add(pid)
        exp = _text(row.get(layout.expected)).strip() if layout.expected else ""
        exp = exp or (expected or "")
        if not exp:
            raise _fail(
                name,
                path,
                f"row {n} has no expected behaviour: give the dataset "
                f"'expected: {'|'.join(EXPECTED)}' in the config, or an "
                "'expected' column",
            )
        if exp not in EXPECTED:
            raise _fail(
                name,
                path,
                f"row {n}: expected behaviour {exp!r} is not one of {', '.join(EXPECTED)}",
            )
        category = _text(row.get(layout.category)).strip() if layout.category else ""
        items.append(PromptItem(pid, prompt, exp, category))
    if not items:
        raise _fail(name, path, f"no rows with {', '.join(f'{c}={v!r}' for c, v in where.items())}")
    return items


def _files(name: str, path: Path) -> list[Path]:
    if any(ch in str(path) for ch in "*?["):
        found = sorted(Path(p) for p in glob.glob(str(path)))
        if not found:
            raise DatasetError(f"dataset {name!r}: no file matches {path}")
        _all_shards(name, found)
        return found
    if not path.is_file():
        raise DatasetError(f"dataset {name!r}: no file at {path}")
    return [path]


def _all_shards(name: str, files: Sequence[Path]) -> None:
    """Shards named as Hugging Face names them (``<split>-00001-of-00003.parquet``) must all be
    there: one missing is a partial download, not a smaller set."""
    counts: dict[str, tuple[set[int], int]] = {}
    for f in files:
        m = re.fullmatch(r"(.*)-(\d+)-of-(\d+)(\.\w+)", f.name)
        if m:
            key = f"{f.parent / m.group(1)}-*-of-{m.group(3)}{m.group(4)}"
            counts.setdefault(key, (set(), int(m.group(3))))[0].add(int(m.group(2)))
    for key, (have, total) in counts.items():
        first = 1 if 0 not in have and total in have else 0  # numbered 0..N-1 or 1..N
        published: dict[str, int | None] = {f"{i:05d}": None for i in range(first, first + total)}
        missing = shortfall(published, {f"{i:05d}": 1 for i in have}).missing
        if missing:
            raise DatasetError(
                f"dataset {name!r}: {key} has {len(have)} of its {total} shards (shard "
                f"{', '.join(missing[:3])} missing): a partial download"
            )


def _hash(files: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


def read_prompt_file(
    path: str | os.PathLike,
    name: str = "prompts",
    expected: str | None = None,
    layout: TableFormat = GENERIC,
    description: str = "",
) -> PromptSet:
    """Read a prompt file (or the shards a glob names) in ``layout`` (default: the generic
    format). Raises :class:`DatasetError` naming the file and what is wrong."""
    if expected is not None and expected not in EXPECTED:
        raise DatasetError(
            f"dataset {name!r}: expected behaviour {expected!r} is not one of {', '.join(EXPECTED)}"
        )
    files = _files(name, Path(path).expanduser())
    items: list[PromptItem] = []
    for f in files:
        # a published layout's files hold every field in every row; one's own may stop early
        records = read_records(f, name, whole_rows=layout != GENERIC)
        items += items_from_records(records, layout, expected, name, f)
    ids = [i.prompt_id for i in items]
    if len(set(ids)) != len(ids):
        raise DatasetError(f"dataset {name!r}: {path}: its shards repeat ids")
    splits = tuple(e for e in EXPECTED if any(i.expected == e for i in items))
    return PromptSet(name, items, str(path), _hash(files), expected or "", description, splits)
