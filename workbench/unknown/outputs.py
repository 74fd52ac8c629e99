"""Published model outputs scored with the workbench's rules: UnknownBench's released response
files (``outputs/*_responses/<model>/<model>_<Task>_<partition>.json``) and verbalized
confidences (``<model>_uncertainty_<Task>_<partition>.json``), read as rows shaped like
:func:`~workbench.unknown.measures.evaluate_unknown`'s, so :func:`summarize_unknown` reports
them as it reports a run (the paper's refusal and accuracy rules: its outputs were made with its
own prompts).

A file is JSON Lines (despite the ``.json`` name): ``prompt``, ``label`` (0/1/"NEC", or RefuNQ's
gold answers), an optional ``category``, and one more field, named after the model, holding its
reply. A line without it, or with a reply that is not text, is an error naming the file and line.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from workbench.errors import WorkbenchError
from workbench.paths import read_utf8
from workbench.scoring import detect_refusal, keyword_refusal
from workbench.scoring.keywords import unknownbench_correct, unknownbench_refusal
from workbench.unknown.datasets import TASKS
from workbench.unknown.measures import lexical_match, parse_confidence

#: ``<model>_<Task>_<partition>.json`` or ``<model>_uncertainty_<Task>_<partition>.json``.
OUTPUT_NAME = re.compile(
    r"^(?P<model>.+?)_(?P<uncertainty>uncertainty_)?(?P<task>"
    + "|".join(TASKS)
    + r")_(?P<partition>answerable|unanswerable)\.json$"
)
_KNOWN_FIELDS = {"prompt", "label", "category"}


@dataclass(frozen=True)
class OutputFile:
    """One released output file and what its name says it holds."""

    path: Path
    model: str
    task: str
    partition: str
    confidence: bool  # verbalized confidences, not answers


#: The published outputs' file names, as the errors spell them.
_NAMES = (
    f"<model>_<{'|'.join(TASKS)}>_<answerable|unanswerable>.json, or "
    "<model>_uncertainty_... for confidences"
)


def output_files(paths: list[str | os.PathLike], model: str | None = None) -> list[OutputFile]:
    """The output files named by ``paths`` (files, or folders searched recursively), optionally
    of one ``model``; a named file whose name is not an output file's, or nothing found, is an
    error naming it."""
    found: list[OutputFile] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            candidates = sorted(q for q in p.rglob("*.json") if OUTPUT_NAME.match(q.name))
        elif p.is_file():
            if not OUTPUT_NAME.match(p.name):
                raise WorkbenchError(f"{p} is not an output file ({_NAMES})")
            candidates = [p]
        else:
            raise WorkbenchError(f"no such file or folder: {p}")
        for q in candidates:
            m = OUTPUT_NAME.match(q.name)
            assert m is not None
            found.append(
                OutputFile(
                    q, m["model"], m["task"], m["partition"], confidence=bool(m["uncertainty"])
                )
            )
    if model is not None:
        models = sorted({f.model for f in found})
        found = [f for f in found if f.model == model]
        if not found:
            raise WorkbenchError(
                f"no outputs of model {model!r} under {', '.join(map(str, paths))}; "
                f"found: {', '.join(models) or 'none'}"
            )
    if not found:
        raise WorkbenchError(
            f"no output files under {', '.join(map(str, paths))} (a folder is searched for "
            f"files named {_NAMES})"
        )
    return found


def _read_lines(f: OutputFile) -> list[tuple[int, dict, str]]:
    """(line number, record, reply) of every line of ``f``."""
    out = []
    for n, line in enumerate(read_utf8(f.path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            prompt = rec["prompt"]
            rec["label"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise WorkbenchError(f"{f.path}, line {n}: malformed output ({e})") from None
        reply = rec.get(f.model)
        if reply is None:  # a reply field named otherwise: the one field that is not known
            extra = [k for k in rec if k not in _KNOWN_FIELDS]
            reply = rec[extra[0]] if len(extra) == 1 else None
        if not isinstance(reply, str) or not isinstance(prompt, str):
            raise WorkbenchError(
                f"{f.path}, line {n}: no reply of {f.model!r} (expected a text field "
                f"{f.model!r} beside prompt and label)"
            )
        label = rec["label"]
        if isinstance(label, list) and not all(isinstance(g, str) for g in label):
            raise WorkbenchError(
                f"{f.path}, line {n}: label must be a list of gold answers as text, got "
                f"{json.dumps(label)[:60]}"
            )
        out.append((n, rec, reply))
    return out


def read_outputs(paths: list[str | os.PathLike], model: str | None = None) -> pd.DataFrame:
    """Rows of every answer file under ``paths``, scored (refusal by the phrase detector, the
    workbench's keywords and UnknownBench's rule; accuracy where gold answers are given), with
    the model's verbalized confidence joined from its ``uncertainty`` file when there is one."""
    files = output_files(paths, model)
    confidence: dict[tuple[str, str, str, str], str] = {}
    for f in (f for f in files if f.confidence):
        for _, rec, reply in _read_lines(f):
            confidence.setdefault((f.model, f.task, f.partition, rec["prompt"]), reply)
    rows = []
    for f in (f for f in files if not f.confidence):
        for n, rec, reply in _read_lines(f):
            label = rec["label"]
            gold = tuple(label) if isinstance(label, list) else ()
            conf = confidence.get((f.model, f.task, f.partition, rec["prompt"]))
            rows.append(
                {
                    "model": f.model,
                    "task": f.task,
                    "partition": f.partition,
                    "category": rec.get("category", ""),
                    "prompt": rec["prompt"],
                    "prompt_preset": "paper",  # the release's outputs answer the paper's prompts
                    "response": reply,
                    "refused_phrase": detect_refusal(reply, question=rec["prompt"]).refused,
                    "refused_keyword": keyword_refusal(reply),
                    "refused_unknownbench": unknownbench_refusal(reply),
                    "correct": lexical_match(reply, gold) if gold else None,
                    "correct_unknownbench": unknownbench_correct(reply, gold) if gold else None,
                    "confidence_reply": conf,
                    "confidence": parse_confidence(conf) if conf is not None else None,
                    "entropy": float("nan"),
                    "perplexity": float("nan"),
                    "source": f"{f.path.name}:{n}",
                }
            )
    if not rows:
        raise WorkbenchError(
            f"only confidence files under {', '.join(map(str, paths))}: give the answer files too"
        )
    frame = pd.DataFrame(rows)
    frame["confidence"] = frame["confidence"].astype(float)
    return frame
