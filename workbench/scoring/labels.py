"""The labelled agreement set: responses with human labels, for checking refusal detectors.

Sources (``data/labels/``, guideline in ``GUIDELINE.md``):

* ``written/*.txt``: responses a developer wrote in the phrasings of several model families and
  refusal styles, and look-alike compliances; one per line, ``label|style|question|response``.
* ``embedded.jsonl``: responses of the embedded SmolLM2-135M under every technique and several
  steering strengths, labelled by hand (``style`` is ``embedded:<technique>``).

Labels are ``compliance``, ``refusal`` or ``partial`` (declines part of the request or refuses
and then helps anyway; counted as a refusal, as annotators of refusal benchmarks do). Each item
belongs to the ``dev`` split (about a third, chosen by a hash of its text) or the ``test`` split:
detector rules may be developed on ``dev`` only; ``test`` is for measuring.

**A labels file** (what the labelling widget writes, :mod:`workbench.widgets.labeller`) is JSON
Lines, one object per label, appended as labels are given::

    {"key": "3f2a...", "label": "refusal", "question": "...", "response": "...",
     "source": "run:demo", "model": "HuggingFaceTB/SmolLM2-135M-Instruct", "family": "smollm",
     "technique": "steering", "target": "wn:09411430-n", "relation": "target", "time": "..."}

``label``, ``question`` and ``response`` are required; ``label: null`` withdraws an earlier label.
Lines with the same ``key`` are one item, the last line wins (relabelling appends): the file is a
log, with more lines than labels. **The labels as they stand** are kept beside it, one row per
labelled answer, in ``<stem>.current.csv`` (:func:`current_labels_path`; the labeller rewrites it
after every label, ``python -m workbench scoring labels FILE`` writes it from any log): that is
the file to load with pandas; the log is the record of every change.

``source`` defaults to the file's stem, ``family`` to :func:`model_family` of ``model``,
``style`` to ``<source>:<technique>``; every other field is carried through. A ``.txt`` file in
the ``label|style|question|response`` shape is read too, and so is a current-labels ``.csv``. A
truncated last line of a log (a process killed mid-write) is skipped with a warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from workbench.errors import WorkbenchError
from workbench.paths import read_utf8, repo_root

LABELS = ("compliance", "refusal", "partial")
#: ``model`` / ``family`` of the shipped sources.
EMBEDDED_MODEL = "smollm2-135m-instruct"
WRITTEN = "written"


def default_labels_dir() -> Path:
    return repo_root() / "data" / "labels"


def split_of(question: str, response: str) -> str:
    """``dev`` for about a third of the items (by a hash of their text), else ``test``."""
    digest = hashlib.sha256(f"{question}\n{response}".encode()).digest()
    return "dev" if digest[0] < 86 else "test"


def model_family(model: str | None) -> str:
    """A model's family from its id: ``meta-llama/Llama-3.1-8B-Instruct`` -> ``llama``,
    ``Qwen/Qwen2.5-7B`` -> ``qwen``, ``smollm2-135m-instruct`` -> ``smollm``; ``unknown``
    for none."""
    if not model or not isinstance(model, str):
        return "unknown"
    name = model.rstrip("/").rsplit("/", 1)[-1].lower()
    name = re.sub(r"^(meta|hf|tiny|random)[-_]", "", name)
    m = re.match(r"[a-z]+", name)
    return m.group(0) if m else name


def _written(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(read_utf8(path).splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("|", 3)
        if len(parts) != 4:
            raise WorkbenchError(f"{path}, line {n}: expected label|style|question|response")
        label, style, question, response = parts
        rows.append(
            {
                "source": WRITTEN,
                "file": path.name,
                "line": n,
                "label": label,
                "style": style,
                "question": question,
                "response": response,
                "model": WRITTEN,
                "family": WRITTEN,
            }
        )
    return rows


def _embedded(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(read_utf8(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            rows.append(
                {
                    "source": "embedded",
                    "file": path.name,
                    "line": n,
                    "label": r["label"],
                    "style": f"embedded:{r['technique']}",
                    "question": r["question"],
                    "response": r["response"],
                    "technique": r["technique"],
                    "strength": r.get("strength"),
                    "model": EMBEDDED_MODEL,
                    "family": model_family(EMBEDDED_MODEL),
                }
            )
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise WorkbenchError(f"{path}, line {n}: malformed labelled row ({e})") from None
    return rows


def read_label_records(path: str | os.PathLike) -> list[dict]:
    """The current labels of a labels file: one record per item (the last line of each ``key``
    wins; withdrawn labels dropped), each with ``line``, its line number."""
    p = Path(path)
    text = read_utf8(p)
    if text.lstrip().startswith("["):
        try:
            whole = json.loads(text)
        except ValueError:
            whole = None
        if isinstance(whole, list):
            raise WorkbenchError(
                f"{p} is one JSON array; a labels file is JSON Lines (one labelled answer, a "
                "JSON object, per line)"
            )
    lines = text.split("\n")
    items: dict[str, dict] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            if not isinstance(r, dict) or "label" not in r:
                raise ValueError("not an object with a label")
            if r["label"] is not None and not {"question", "response"} <= set(r):
                raise ValueError("needs question and response")
            if r["label"] is not None:
                for field in ("question", "response"):
                    if not isinstance(r[field], str):
                        raise ValueError(
                            f"{field} must be text, got {json.dumps(r[field])[:40]} "
                            f"({type(r[field]).__name__})"
                        )
        except ValueError as e:
            if n == len(lines):  # no newline after it: a write cut short
                warnings.warn(f"{p}, line {n}: skipped an incomplete last line ({e})", stacklevel=2)
                continue
            raise WorkbenchError(f"{p}, line {n}: malformed label line ({e})") from None
        key = str(r.get("key") or f"line:{n}")
        items.pop(key, None)  # a relabelled item moves to its latest line
        if r["label"] is not None:
            items[key] = {**r, "key": key, "line": n}
    return list(items.values())


def append_label_record(path: str | os.PathLike, record: dict) -> None:
    """Append one label line and make it durable (fsync) before returning. A last line cut
    short by a killed process is removed first."""
    p = Path(path)
    new = not p.exists()
    p.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode()
    fd = os.open(p, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        old = b"" if new else p.read_bytes()
        if old and not old.endswith(b"\n"):
            cut = old.rfind(b"\n") + 1
            try:
                json.loads(old[cut:])
                data = b"\n" + data  # complete, only its newline missing
            except ValueError:
                os.ftruncate(fd, cut)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if new and hasattr(os, "O_DIRECTORY"):
        dfd = os.open(p.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


#: The first columns of a current-labels table, in this order; other fields follow.
CURRENT_COLUMNS = ("key", "label", "question", "response", "source", "model", "family", "time")


def current_labels_path(log: str | os.PathLike) -> Path:
    """Where the labels of the log ``log`` are kept as they stand: ``<stem>.current.csv``
    beside it (``labels.jsonl`` -> ``labels.current.csv``)."""
    p = Path(log)
    return p.with_name(f"{p.stem}.current.csv")


def current_labels(log: str | os.PathLike) -> pd.DataFrame:
    """The labels of the log ``log`` as they stand: one row per labelled answer (relabelled:
    its last label; withdrawn: absent), in the order they were last given, with ``line``, the
    log line each comes from."""
    records = read_label_records(log) if Path(log).is_file() else []
    frame = pd.DataFrame(records)
    first = [c for c in CURRENT_COLUMNS if c in frame] or list(CURRENT_COLUMNS)
    rest = [c for c in frame.columns if c not in first and c != "line"]
    frame = frame.reindex(columns=[*first, *rest, "line"])
    return frame.sort_values("line", kind="stable").reset_index(drop=True)


def write_current_labels(log: str | os.PathLike, out: str | os.PathLike | None = None) -> int:
    """Write :func:`current_labels` of ``log`` as CSV to ``out`` (default
    :func:`current_labels_path`), whole or not at all; returns how many labels it holds."""
    from workbench.paths import atomic_file

    table = current_labels(log)
    with atomic_file(out if out is not None else current_labels_path(log)) as tmp:
        table.to_csv(tmp, index=False)
    return len(table)


_DERIVED = ("id", "key", "line", "file", "refusal", "split")


def _current_file(path: Path) -> list[dict]:
    """The rows of a current-labels CSV, each with ``line`` (its line in the file)."""
    import io

    try:
        frame = pd.read_csv(io.StringIO(read_utf8(path)), dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:  # an empty file was pandas' traceback
        raise WorkbenchError(
            f"{path} is empty: a labels table needs columns ['label', 'question', 'response']"
        ) from None
    except pd.errors.ParserError as e:
        first = (str(e).strip().splitlines() or ["unreadable"])[0][:200]
        raise WorkbenchError(f"{path} does not read as CSV ({first})") from None
    missing = {"label", "question", "response"} - set(frame.columns)
    if missing:
        raise WorkbenchError(f"{path}: a labels table needs columns {sorted(missing)}")
    rows = []
    for n, r in enumerate(frame.to_dict("records"), 2):  # line 1 is the header
        rec = {k: v for k, v in r.items() if v != "" and k != "line"}
        rec.update(label=r["label"], question=r["question"], response=r["response"], line=n)
        rec["key"] = r.get("key") or f"line:{n}"
        rows.append(rec)
    return rows


def _label_file(path: Path) -> list[dict]:
    if path.suffix == ".txt":
        return _written(path)
    rows = []
    for r in _current_file(path) if path.suffix == ".csv" else read_label_records(path):
        source = r.get("source") or path.stem
        model = r.get("model") or r.get("model_id")
        technique = r.get("technique")
        carried = {k: v for k, v in r.items() if k not in _DERIVED}
        if "split" in r:  # the item's dataset split; ``split`` is the dev / test split here
            carried.setdefault("dataset_split", r["split"])
        rows.append(
            {
                **carried,
                "source": source,
                "file": path.name,
                "line": r["line"],
                "key": r["key"],
                "style": r.get("style") or (f"{source}:{technique}" if technique else source),
                "model": model or "unknown",
                "family": r.get("family") or model_family(model),
            }
        )
    return rows


def load_agreement_set(
    directory: str | os.PathLike | Iterable[str | os.PathLike] | None = None,
) -> pd.DataFrame:
    """Every labelled item with ``id``, ``source``, ``style``, ``model``, ``family``,
    ``question``, ``response``, ``label``, ``refusal`` (label is refusal or partial) and
    ``split``, from the shipped set's directory (default), a labels file, or several of them."""
    if directory is None:
        paths = [default_labels_dir()]
    elif isinstance(directory, (str, os.PathLike)):
        paths = [Path(directory)]
    else:
        paths = [Path(p) for p in directory]
    rows: list[dict] = []
    for d in paths:
        if d.is_file():
            found = _label_file(d)
        elif d.is_dir():
            found = []
            for p in sorted((d / "written").glob("*.txt")):
                found += _written(p)
            if (d / "embedded.jsonl").is_file():
                found += _embedded(d / "embedded.jsonl")
        else:
            raise WorkbenchError(f"no labels file or directory {d}")
        if not found:
            raise WorkbenchError(
                f"no labelled items in {d} (written/*.txt, embedded.jsonl, or a labels file)"
            )
        rows += found
    bad = [f"{r['file']}:{r['line']}" for r in rows if r["label"] not in LABELS]
    if bad:
        raise WorkbenchError(f"labels must be one of {LABELS}; bad rows: {', '.join(bad[:5])}")
    frame = pd.DataFrame(rows)
    frame["refusal"] = frame["label"] != "compliance"
    frame["split"] = [split_of(q, r) for q, r in zip(frame["question"], frame["response"])]
    frame.insert(0, "id", [f"{f}:{n}" for f, n in zip(frame["file"], frame["line"])])
    return frame
