"""Named prompt sets for the refusal suite, each with the behaviour expected of a model, read
from the files their authors publish (the user downloads them; nothing ships but our own
sanity set).

Expected behaviour is one of ``should_refuse`` (harmful requests), ``may_refuse`` (politically
sensitive topics: aligned models may decline, uncensored ones should engage) and
``should_not_refuse`` (harmless requests: a refusal is over-refusal).

Formats (each checked against the published files; see docs/refusal.md, "Refusal evaluation suite"):

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

Every problem with a file (missing, unreadable, a missing column, an empty prompt, a duplicate
id, an unknown expected behaviour) is one :class:`DatasetError` line naming the file.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.registry import Registry

SHOULD_REFUSE, MAY_REFUSE, SHOULD_NOT_REFUSE = "should_refuse", "may_refuse", "should_not_refuse"
EXPECTED = (SHOULD_REFUSE, MAY_REFUSE, SHOULD_NOT_REFUSE)
#: The sanity set written for the workbench (shipped; the default run needs nothing else).
SANITY_FILE = "data/refusal/sanity.jsonl"


class DatasetError(WorkbenchError):
    """A prompt file is missing or malformed; the one-line message names the file."""


@dataclass(frozen=True)
class PromptItem:
    """One prompt of a set, with the behaviour expected of a model."""

    prompt_id: str
    prompt: str
    expected: str
    category: str = ""


@dataclass(frozen=True)
class TableFormat:
    """How a published file is laid out: which columns hold the prompt, its id and category.

    Attributes:
        prompt: the column with the prompt (for ``first_turn``, a list of turns).
        id / category: columns with an id and a category (None: row number / none).
        context: a column whose text, when present, precedes the prompt (HarmBench).
        where: keep only rows whose column has this value (XSTest's ``label``).
        first_turn: the prompt column holds the conversation's turns; the first is the prompt.
        expected: a column with each row's expected behaviour (the generic format).
    """

    prompt: str = "prompt"
    id: str | None = "id"
    category: str | None = None
    context: str | None = None
    where: tuple[tuple[str, str], ...] = ()
    first_turn: bool = False
    expected: str | None = None
    optional: tuple[str, ...] = ()

    def required(self) -> list[str]:
        cols = [self.prompt, self.id, self.category, self.context, *(c for c, _ in self.where)]
        return [c for c in dict.fromkeys(cols) if c and c not in self.optional]


#: Any prompt file: a ``prompt`` column; ``id``, ``category`` and ``expected`` when present.
GENERIC = TableFormat(
    prompt="prompt",
    id="id",
    category="category",
    expected="expected",
    optional=("id", "category", "expected"),
)


@dataclass(frozen=True)
class DatasetSpec:
    """A named prompt set: what a model should do with it, and where its file is.

    Attributes:
        name: the name configs use.
        expected: the behaviour expected of a model ("": each row says, in the generic
            format's ``expected`` column, which takes precedence anyway).
        pattern: the file inside ``folder`` (a glob for sharded Parquet).
        folder: the directory the download command creates under the suite's ``data_dir``.
        layout: how the file is laid out.
        source: where it is published and the command that downloads it.
        description: one line about the set.
        rows: the prompts the published set holds (None where the release does not fix it), so
            that a partial download is named rather than run.
    """

    name: str
    expected: str
    pattern: str
    folder: str
    layout: TableFormat
    source: str
    description: str = ""
    rows: int | None = None

    def default_path(self, data_dir: str | os.PathLike) -> Path:
        return Path(data_dir).expanduser() / self.folder / self.pattern


SEED_RELEASE = "MultiverseComputingCAI/llm-refusal-evaluation"
_SEED_SOURCE = (
    f"huggingface.co/datasets/{SEED_RELEASE} (seed 001's splits): "
    f"hf download {SEED_RELEASE} --repo-type dataset --local-dir DATA_DIR/llm-refusal-evaluation"
)
_SEED_LAYOUT = TableFormat(prompt="prompt", id="_id", category="subject")
#: seed 001's splits, the behaviour its README expects of each and the prompts its dataset card
#: gives each (world_politics is in the earlier copy ``Iker/refusal-evaluation`` only, whose
#: card gives the same counts for the splits both have).
_SEED_SPLITS = {
    "jailbreakbench": (SHOULD_REFUSE, "JailbreakBench's harmful behaviours", 100),
    "sorrybench": (SHOULD_REFUSE, "SORRY-Bench: unsafe requests over 44 categories", 440),
    "xstest_unsafe": (SHOULD_REFUSE, "XSTest's unsafe contrast prompts", 200),
    "harmbench_sampled": (SHOULD_REFUSE, "a sample of HarmBench's red-teaming behaviours", 256),
    "adversarial_unsafe_prompts": (
        SHOULD_REFUSE,
        "harmful prompts with injected China topics",
        512,
    ),
    "ccp_sensitive_sampled": (MAY_REFUSE, "a sample of promptfoo's CCP-sensitive prompts", 340),
    "ccp_sensitive": (MAY_REFUSE, "promptfoo's CCP-sensitive prompts, all of them", 1360),
    "deccp_censored": (MAY_REFUSE, "prompts Qwen2-7B-Instruct refused (deccp)", 95),
    "world_politics": (
        MAY_REFUSE,
        "world-politics prompts (Iker/refusal-evaluation only)",
        135,
    ),
    "xstest_safe": (SHOULD_NOT_REFUSE, "XSTest's safe prompts that look unsafe", 250),
    "general_prompts": (SHOULD_NOT_REFUSE, "random everyday prompts (from smoltalk)", 100),
}

DATASETS: Registry[DatasetSpec] = Registry(
    "dataset",
    {
        name: DatasetSpec(
            name,
            expected,
            f"data/{name}-*.parquet",
            "llm-refusal-evaluation",
            _SEED_LAYOUT,
            _SEED_SOURCE,
            desc,
            rows,
        )
        for name, (expected, desc, rows) in _SEED_SPLITS.items()
    },
)
_XSTEST = (
    "github.com/paul-rottger/exaggerated-safety: git clone "
    "https://github.com/paul-rottger/exaggerated-safety DATA_DIR/exaggerated-safety"
)
_JBB = (
    "huggingface.co/datasets/JailbreakBench/JBB-Behaviors: hf download "
    "JailbreakBench/JBB-Behaviors --repo-type dataset --local-dir DATA_DIR/JBB-Behaviors"
)
_SORRY = (
    "huggingface.co/datasets/sorry-bench/sorry-bench-202503 (gated: accept its terms, "
    "then) hf download sorry-bench/sorry-bench-202503 --repo-type dataset "
    "--local-dir DATA_DIR/sorry-bench"
)
_HARMBENCH = (
    "github.com/centerforaisafety/HarmBench: git clone "
    "https://github.com/centerforaisafety/HarmBench DATA_DIR/HarmBench"
)
_CCP = (
    "huggingface.co/datasets/promptfoo/CCP-sensitive-prompts: hf download "
    "promptfoo/CCP-sensitive-prompts --repo-type dataset --local-dir DATA_DIR/CCP-sensitive-prompts"
)
_DECCP = (
    "huggingface.co/datasets/augmxnt/deccp: hf download augmxnt/deccp --repo-type dataset "
    "--local-dir DATA_DIR/deccp"
)
_ORIGINALS = [
    DatasetSpec(
        "xstest.safe",
        SHOULD_NOT_REFUSE,
        "xstest_prompts.csv",
        "exaggerated-safety",
        TableFormat(prompt="prompt", id="id", category="type", where=(("label", "safe"),)),
        _XSTEST,
        "XSTest v2's 250 safe prompts, from its authors' CSV",
        250,
    ),
    DatasetSpec(
        "xstest.unsafe",
        SHOULD_REFUSE,
        "xstest_prompts.csv",
        "exaggerated-safety",
        TableFormat(prompt="prompt", id="id", category="type", where=(("label", "unsafe"),)),
        _XSTEST,
        "XSTest v2's 200 unsafe contrast prompts, from its authors' CSV",
        200,
    ),
    DatasetSpec(
        "jbb.harmful",
        SHOULD_REFUSE,
        "data/harmful-behaviors.csv",
        "JBB-Behaviors",
        TableFormat(prompt="Goal", id="Index", category="Category"),
        _JBB,
        "JailbreakBench's 100 harmful behaviours",
        100,
    ),
    DatasetSpec(
        "jbb.benign",
        SHOULD_NOT_REFUSE,
        "data/benign-behaviors.csv",
        "JBB-Behaviors",
        TableFormat(prompt="Goal", id="Index", category="Category"),
        _JBB,
        "JailbreakBench's 100 benign behaviours on the same topics",
        100,
    ),
    DatasetSpec(
        "sorrybench.questions",
        SHOULD_REFUSE,
        "question.jsonl",
        "sorry-bench",
        TableFormat(prompt="turns", id="question_id", category="category", first_turn=True),
        _SORRY,
        "SORRY-Bench's unsafe instructions (first turn of each)",
        440,  # 2025/03: 44 categories x 10 (the 2024/06 release had 45)
    ),
    DatasetSpec(
        "harmbench",
        SHOULD_REFUSE,
        "data/behavior_datasets/harmbench_behaviors_text_all.csv",
        "HarmBench",
        TableFormat(
            prompt="Behavior", id="BehaviorID", category="SemanticCategory", context="ContextString"
        ),
        _HARMBENCH,
        "HarmBench's text behaviours (standard, contextual, copyright)",
        400,
    ),
    DatasetSpec(
        "ccp_sensitive_prompts",
        MAY_REFUSE,
        "ccp-sensitive-prompts.csv",
        "CCP-sensitive-prompts",
        TableFormat(prompt="prompt", id=None, category="subject"),
        _CCP,
        "promptfoo's CCP-sensitive prompts, from its CSV",
        1360,
    ),
    DatasetSpec(
        "deccp.censored",
        MAY_REFUSE,
        "data/censored-*.parquet",
        "deccp",
        TableFormat(prompt="text", id=None),
        _DECCP,
        "prompts Qwen2-7B-Instruct refused (deccp's censored split)",
        95,
    ),
    DatasetSpec(
        "deccp.uncensored",
        MAY_REFUSE,
        "data/uncensored-*.parquet",
        "deccp",
        TableFormat(prompt="text", id=None),
        _DECCP,
        "deccp's control prompts Qwen2-7B-Instruct answered",
        37,
    ),
]
for _spec in _ORIGINALS:
    DATASETS.register(_spec.name, _spec)
DATASETS.register(
    "sanity",
    DatasetSpec(
        "sanity",
        "",
        Path(SANITY_FILE).name,
        str(Path(SANITY_FILE).parent),
        GENERIC,
        "shipped with the workbench",
        "our own sanity set: harmless, bland harmful and sensitive prompts",
    ),
)  # each row carries its own expected behaviour


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
    import random

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


def _kind(path: Path) -> str:
    suffix = path.suffix.lower()
    kinds = {
        ".csv": "csv",
        ".json": "json",
        ".jsonl": "jsonl",
        ".ndjson": "jsonl",
        ".parquet": "parquet",
    }
    return kinds.get(suffix, "")


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
            import pandas as pd

            return pd.read_parquet(p).to_dict("records")
        text = p.read_text(encoding="utf-8")
    except DatasetError:
        raise
    except UnicodeDecodeError:  # a CSV or JSON saved in another encoding
        from workbench.errors import ConfigError
        from workbench.paths import read_utf8

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


def _check_whole_rows(path: Path, name: str) -> None:
    """One line naming the first CSV record (counted after the header, blank lines skipped,
    as pandas skips them) whose number of fields is not the header's."""
    import csv

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
        missing = sorted(set(range(first, first + total)) - have)
        if missing:
            raise DatasetError(
                f"dataset {name!r}: {key} has {len(have)} of its {total} shards (shard "
                f"{', '.join(f'{i:05d}' for i in missing[:3])} missing): a partial download"
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


def resolve_path(
    spec: DatasetSpec, data_dir: str | os.PathLike, path: str | os.PathLike | None = None
) -> Path:
    """Where ``spec``'s file is: ``path`` (a file, or the folder it was downloaded to), else
    ``data_dir/<folder>/<pattern>`` (the shipped sanity set: in the checkout)."""
    from workbench.paths import project_path

    if path:
        p = project_path(path)
        return p / spec.pattern if p.is_dir() else p
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
        from workbench.paths import project_path

        return read_prompt_file(project_path(path), name, expected)
    where = resolve_path(spec, data_dir, path)
    get = spec.source.replace("DATA_DIR", str(data_dir))
    try:
        loaded = read_prompt_file(
            where, name, expected or spec.expected or None, spec.layout, spec.description
        )
    except DatasetError as e:
        if "no file" in str(e) and spec.name != "sanity":
            raise DatasetError(
                f"{e}; download it from {get} (or set the dataset's 'path')"
            ) from None
        raise
    if spec.rows is not None and len(loaded) != spec.rows:
        raise DatasetError(
            f"dataset {name!r}: {where} holds {len(loaded)} prompts where the published set has "
            f"{spec.rows}: a partial or altered download? (download it again from {get}; the "
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
                    "file": f"{s.folder}/{s.pattern}",
                    "source": s.source,
                    "description": s.description,
                }
            )
    return out
