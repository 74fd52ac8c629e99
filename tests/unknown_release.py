"""An UnknownBench release of our own writing in the published shape and at its published size:
``NEC/``, ``FalseQA/`` and ``RefuNQ/`` JSON Lines files with the release's item counts (13,319
items) and label types (0/1 flags, "NEC", lists of gold answers)."""

from __future__ import annotations

import json
from pathlib import Path

import workbench.unknown.datasets  # noqa: F401  (registers unknownbench)
from workbench.releases import published


def _row(task: str, partition: str, i: int) -> dict:
    if task == "RefuNQ":
        label = [f"answer {i}"] if partition == "answerable" else "NEC"
        return {"prompt": f"What is the name of thing {i}?", "label": label}
    row = {
        "prompt": f"Question {i} about {task} ({partition})?",
        "label": int(partition == "unanswerable"),
    }
    if task == "NEC":
        row["category"] = "animals"
    return row


def write_unknownbench_release(root: Path, counts: dict[str, int] | None = None) -> Path:
    """Write the release under ``root`` (``counts``: items per release-relative file, by
    default the published ones) and return ``root``."""
    counts = counts or {rel: f["items"] for rel, f in published("unknownbench").files.items()}
    for rel, n in counts.items():
        task, name = rel.split("/")
        partition = "unanswerable" if "unanswerable" in name else "answerable"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(_row(task, partition, i)) + "\n" for i in range(n)))
    return root
