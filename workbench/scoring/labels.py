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
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd

from workbench.errors import WorkbenchError
from workbench.paths import repo_root

LABELS = ("compliance", "refusal", "partial")


def default_labels_dir() -> Path:
    return repo_root() / "data" / "labels"


def split_of(question: str, response: str) -> str:
    """``dev`` for about a third of the items (by a hash of their text), else ``test``."""
    digest = hashlib.sha256(f"{question}\n{response}".encode()).digest()
    return "dev" if digest[0] < 86 else "test"


def _written(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("|", 3)
        if len(parts) != 4:
            raise WorkbenchError(f"{path}, line {n}: expected label|style|question|response")
        label, style, question, response = parts
        rows.append({"source": "written", "file": path.name, "line": n, "label": label,
                     "style": style, "question": question, "response": response})
    return rows


def _embedded(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            rows.append({"source": "embedded", "file": path.name, "line": n, "label": r["label"],
                         "style": f"embedded:{r['technique']}", "question": r["question"],
                         "response": r["response"], "technique": r["technique"],
                         "strength": r.get("strength")})
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise WorkbenchError(f"{path}, line {n}: malformed labelled row ({e})") from None
    return rows


def load_agreement_set(directory: str | os.PathLike | None = None) -> pd.DataFrame:
    """Every labelled item with ``id``, ``source``, ``style``, ``question``, ``response``,
    ``label``, ``refusal`` (label is refusal or partial) and ``split``."""
    d = Path(directory) if directory else default_labels_dir()
    rows: list[dict] = []
    for p in sorted((d / "written").glob("*.txt")):
        rows += _written(p)
    if (d / "embedded.jsonl").is_file():
        rows += _embedded(d / "embedded.jsonl")
    if not rows:
        raise WorkbenchError(f"no labelled items in {d} (written/*.txt, embedded.jsonl)")
    bad = [f"{r['file']}:{r['line']}" for r in rows if r["label"] not in LABELS]
    if bad:
        raise WorkbenchError(f"labels must be one of {LABELS}; bad rows: {', '.join(bad[:5])}")
    frame = pd.DataFrame(rows)
    frame["refusal"] = frame["label"] != "compliance"
    frame["split"] = [split_of(q, r) for q, r in zip(frame["question"], frame["response"])]
    frame.insert(0, "id", [f"{f}:{n}" for f, n in zip(frame["file"], frame["line"])])
    return frame
