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
from workbench.releases import shortfall
from workbench.scoring import detect_refusal, keyword_refusal
from workbench.scoring.keywords import unknownbench_correct, unknownbench_refusal
from workbench.unknown.datasets import TASKS, UNKNOWNBENCH_RELEASE
from workbench.unknown.measures import lexical_match, parse_confidence

#: ``<model>_<Task>_<partition>.json`` or ``<model>_uncertainty_<Task>_<partition>.json``.
OUTPUT_NAME = re.compile(
    r"^(?P<model>.+?)_(?P<uncertainty>uncertainty_)?(?P<task>"
    + "|".join(TASKS)
    + r")_(?P<partition>answerable|unanswerable)\.json$"
)
_KNOWN_FIELDS = {"prompt", "label", "category"}
#: the labels of the release's lines that are not RefuNQ's gold answers (0 answerable, 1 not;
#: RefuNQ's unanswerable questions "NEC")
_LABELS = (0, 1, "NEC")
_ABSENT = object()


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
            candidates = _release_files(p)
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


def _release_files(folder: Path) -> list[Path]:
    """The output files under ``folder``. In UnknownBench's ``outputs/`` the answers sit in
    ``*_responses/`` and the verbalized confidences in ``*_verbalized_uncertainty/``; files of the
    same names elsewhere hold derived scores (``unified_confidence_extracted_scores/``,
    ``Llama-2_logit_based_uncertainty/``, ``mistral{,-base}/confidence_scores/``) or copies
    (``mistral{,-base}/responses/``), and are read only from a folder without that layout (one's
    own)."""
    every = sorted(q for q in folder.rglob("*.json") if OUTPUT_NAME.match(q.name))

    def in_layout(q: Path) -> bool:
        return any(
            d.endswith(("_responses", "_verbalized_uncertainty"))
            for d in q.relative_to(folder).parts[:-1]
        )

    kept = [q for q in every if in_layout(q)] or every
    seen: dict[tuple[str, int], bytes] = {}
    out = []
    for q in kept:  # one copy of a file published twice
        data = q.read_bytes()
        key = (q.name, len(data))
        if seen.get(key) == data:
            continue
        seen[key] = data
        out.append(q)
    return out


def _check_whole(files: dict[OutputFile, list], searched: bool) -> None:
    """Each answer file holds the release's items for its task and partition, and a model found
    in a folder has all six (:func:`workbench.releases.shortfall`): a partial download is named,
    not scored as a smaller release."""
    counts = {k.split("/")[-1]: v["items"] for k, v in UNKNOWNBENCH_RELEASE.files.items()}
    answers = [f for f in files if not f.confidence]
    if searched:
        for model in sorted({f.model for f in answers}):
            have = {f"{f.task}_{f.partition}.json": 0 for f in answers if f.model == model}
            missing = sorted(shortfall(dict.fromkeys(counts), have).missing)
            if missing:
                raise WorkbenchError(
                    f"outputs of {model!r} lack {', '.join(f'{model}_{m}' for m in missing)} "
                    f"(the release has all {len(counts)}): a partial download? (name the files "
                    "to score only some)"
                )
    for f in answers:
        key = f"{f.task}_{f.partition}.json"
        for _, n, want in shortfall({key: counts[key]}, {key: len(files[f])}).differ:
            raise WorkbenchError(
                f"{f.path} holds {n} answers where UnknownBench's {f.task} {f.partition} set has "
                f"{want}: a partial or altered file?"
            )


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
        field = f.model
        if field not in rec:  # a reply field named otherwise: the one field that is not known
            extra = [k for k in rec if k not in _KNOWN_FIELDS]
            field = extra[0] if len(extra) == 1 else f.model
        reply = rec.get(field, _ABSENT)
        if reply is None:  # the model gave no text (PaLM's safety filter): the paper's code
            reply = ""  # keeps the row, neither a refusal nor correct
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
        if not isinstance(label, list) and (isinstance(label, bool) or label not in _LABELS):
            raise WorkbenchError(
                f'{f.path}, line {n}: label {json.dumps(label)[:60]} is not 0, 1, "NEC" or a '
                "list of gold answers"
            )
        out.append((n, rec, reply))
    return out


def read_outputs(paths: list[str | os.PathLike], model: str | None = None) -> pd.DataFrame:
    """Rows of every answer file under ``paths``, scored (refusal by the phrase detector, the
    workbench's keywords and UnknownBench's rule; accuracy where gold answers are given), with
    the model's verbalized confidence joined from its ``uncertainty`` file when there is one."""
    files = {f: _read_lines(f) for f in output_files(paths, model)}
    _check_whole(files, searched=any(Path(p).is_dir() for p in paths))
    confidence: dict[tuple[str, str, str, str], str] = {}
    for f in (f for f in files if f.confidence):
        for _, rec, reply in files[f]:
            confidence.setdefault((f.model, f.task, f.partition, rec["prompt"]), reply)
    rows = []
    for f in (f for f in files if not f.confidence):
        for n, rec, reply in files[f]:
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
