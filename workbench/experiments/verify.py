"""``python -m workbench verify``: does this machine give the recorded answers?

Reruns a small fixed slice of the main experiment (the demo's settings; the unmodified model,
zero-shot, few-shot CoT and conditional steering on one target, steering vectors recomputed in
a fresh artifact store) and compares every answer and every cell's metrics with the reference
recorded in the repository (``data/reference/verify.json``, written by ``--record``). Printed:
one line per cell (answers identical, metrics equal or what moved), then a verdict. ``--kernels
other`` runs the same check in a fresh process on narrower CPU kernels than this machine's
(:func:`workbench.models.numerics.other_kernels_env`), standing in for another machine.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import WorkbenchError
from workbench.paths import project_path

#: Where the reference lives (tracked); ``--record`` rewrites it.
REFERENCE = Path("data/reference/verify.json")
#: The slice: the demo's settings, one target, four techniques, a few questions per group.
SLICE: dict[str, Any] = {
    "name": "verify",
    "techniques": ["base", "zero_shot", "few_shot_cot", "steering"],
    "targets": ["wn:09411430-n"],
    "n_target": 8,
    "n_descendant": 4,
    "n_specificity": 4,
    "n_unrelated": 4,
}
KEY = ["technique", "target", "seed", "question_index", "sample"]
#: What each field of a reference's rows and metrics holds (checked before the slice runs).
_FIELD_TYPES: dict[str, type] = {
    "technique": str,
    "target": str,
    "seed": int,
    "question_index": int,
    "sample": int,
    "response": str,
}
_KIND_WORDS: dict[type, str] = {str: "text", int: "a whole number"}
METRICS = ("abstention", "generalization", "specificity", "far_specificity")


def machine() -> dict[str, Any]:
    """What ran: CPU model, the kernels torch chose, cores, dtype-relevant flags, versions."""
    import torch

    from workbench.experiments.runner import package_versions
    from workbench.models.numerics import cpu_has_native_bf16

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu
            )
    except OSError:
        pass
    return {
        "cpu": cpu,
        "kernels": torch.backends.cpu.get_cpu_capability(),
        "cores": os.cpu_count(),
        "native_bf16": cpu_has_native_bf16(),
        "platform": platform.platform(),
        "versions": package_versions(),
    }


@dataclass(frozen=True)
class CellAgreement:
    """One cell: how many answers equal the reference's, and which metrics moved."""

    technique: str
    target: str
    seed: int
    answers: int
    identical: int
    moved: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def agrees(self) -> bool:
        return self.identical == self.answers and not self.moved

    def line(self) -> str:
        metrics = (
            "metrics equal"
            if not self.moved
            else "; ".join(f"{m} {a:.3f} -> {b:.3f}" for m, (a, b) in self.moved.items())
        )
        return (
            f"{self.technique:13s} {self.target:15s} seed {self.seed}: answers identical "
            f"{self.identical}/{self.answers}; {metrics}"
        )


@dataclass(frozen=True)
class VerifyReport:
    """The comparison of a run of the slice with the reference."""

    cells: list[CellAgreement]
    reference_machine: dict[str, Any]
    here: dict[str, Any]

    @property
    def ok(self) -> bool:
        return bool(self.cells) and all(c.agrees for c in self.cells)

    def text(self) -> str:
        ref = self.reference_machine
        lines = [
            f"reference: {ref.get('cpu')} ({ref.get('kernels')} kernels), "
            f"{ref.get('dtype')}; here: {self.here.get('cpu')} ({self.here.get('kernels')} "
            f"kernels), {self.here.get('dtype')}",
            *(c.line() for c in self.cells),
        ]
        agree = sum(c.agrees for c in self.cells)
        total_answers = sum(c.answers for c in self.cells)
        same = sum(c.identical for c in self.cells)
        verdict = "reproduced" if self.ok else "DIFFERS"
        lines.append(
            f"verify: {verdict}: {agree}/{len(self.cells)} cells agree, "
            f"{same}/{total_answers} answers identical"
        )
        return "\n".join(lines)


def _cell_metrics(table: pd.DataFrame) -> dict[tuple, dict[str, float]]:
    from workbench.scoring.metrics import summarize

    out = {}
    for rec in summarize(table, by=("technique", "target", "seed")).to_dict("records"):
        out[(rec["technique"], rec["target"], int(rec["seed"]))] = {
            m: float(rec[m]) for m in METRICS
        }
    return out


def record(table: pd.DataFrame, seconds: float) -> dict[str, Any]:
    """The reference for ``table`` (a run of the slice): provenance, answers, cell metrics."""
    dtypes = sorted(set(table["dtype"]))
    rows = table[KEY + ["relation", "question", "response", "refused_phrase"]].sort_values(KEY)
    return {
        "slice": SLICE,
        "machine": {**machine(), "dtype": ",".join(dtypes), "seconds": round(seconds, 1)},
        "numerics": sorted(set(table["numerics"])),
        "metrics": [
            {"technique": k[0], "target": k[1], "seed": k[2], **v}
            for k, v in sorted(_cell_metrics(table).items())
        ],
        "rows": rows.to_dict("records"),
    }


def compare(reference: dict[str, Any], table: pd.DataFrame) -> VerifyReport:
    """Per cell: answers identical to the reference's, and metrics that moved (pure)."""
    ref_rows = pd.DataFrame(reference["rows"])
    mine = table[KEY + ["response"]]
    joined = ref_rows.merge(mine, on=KEY, how="left", suffixes=("_ref", ""))
    ref_metrics = {(m["technique"], m["target"], int(m["seed"])): m for m in reference["metrics"]}
    now = _cell_metrics(table)
    cells = []
    for (tech, target, seed), frame in joined.groupby(["technique", "target", "seed"], sort=True):
        key = (tech, target, int(seed))
        moved = {}
        for m in METRICS:
            a, b = float(ref_metrics[key][m]), now.get(key, {}).get(m, float("nan"))
            if not (a == b or (math.isnan(a) and math.isnan(b))):
                moved[m] = (a, b)
        cells.append(
            CellAgreement(
                tech,
                target,
                int(seed),
                answers=len(frame),
                identical=int((frame["response"] == frame["response_ref"]).sum()),
                moved=moved,
            )
        )
    dtypes = ",".join(sorted(set(table["dtype"])))
    return VerifyReport(cells, reference["machine"], {**machine(), "dtype": dtypes})


def run_slice(
    root: Path,
    config_overrides: dict[str, Any] | None = None,
    models: dict | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Run the slice into ``root`` with a fresh artifact store (vectors recomputed here);
    ``models``: models already loaded, by name (the local executor's); ``progress``: the
    grid's progress lines."""
    from workbench.experiments import ExperimentConfig, Runner
    from workbench.techniques import ArtifactStore

    config = ExperimentConfig.from_dict({**SLICE, **(config_overrides or {})})
    store = ArtifactStore(root / "artifacts")
    runner = Runner(config, root=root / "runs", store=store, progress=progress, models=models)
    return runner.run()


def _describe_slice() -> str:
    return (
        f"{', '.join(SLICE['techniques'])} on {', '.join(SLICE['targets'])}, "
        f"{SLICE['n_target']}+{SLICE['n_descendant']}+{SLICE['n_specificity']}+"
        f"{SLICE['n_unrelated']} questions"
    )


@contextlib.contextmanager
def _temporary_folder():
    """A temporary folder removed however verify ends: a SIGTERM too (Python's own cleanup
    runs only on exceptions, and a kill by signal raises none)."""
    import shutil
    import signal

    tmp = Path(tempfile.mkdtemp(prefix="workbench-verify-"))

    def stop(signum, frame):
        raise KeyboardInterrupt

    previous = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals alone
        previous = None
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def load_reference(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise WorkbenchError(
            f"no reference at {path}: record one with python -m workbench verify --record"
        )
    try:
        reference = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise WorkbenchError(f"reference {path} is not valid JSON: {e}") from None
    check_reference(reference, path)
    return reference


def check_reference(reference: Any, path: Path | str) -> None:
    """One line naming what a reference lacks, before the slice runs (any JSON used to be
    taken, and a wrong one failed with a KeyError after the whole slice): a mapping with the
    machine, the slice it recorded (this version's), a row per answer and metrics per cell."""

    def bad(what: str) -> WorkbenchError:
        return WorkbenchError(
            f"reference {path} is not a verify reference: {what} (record one with python -m "
            "workbench verify --record)"
        )

    if not isinstance(reference, dict):
        raise bad(f"a {type(reference).__name__}, not a mapping")
    missing = [k for k in ("machine", "slice", "rows", "metrics") if k not in reference]
    if missing:
        raise bad(f"no {', '.join(missing)}")
    if reference["slice"] != SLICE:
        raise bad("it recorded another slice than this version's")
    rows, metrics = reference["rows"], reference["metrics"]
    if not isinstance(rows, list) or not rows:
        raise bad("no rows of answers")

    def check_types(where: str, record: dict) -> None:
        for name, kind in _FIELD_TYPES.items():
            value = record.get(name)
            if name in record and (not isinstance(value, kind) or isinstance(value, bool)):
                raise bad(f"{where}.{name} is {json.dumps(value)[:40]}, not {_KIND_WORDS[kind]}")

    need = {*KEY, "response"}
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise bad(f"rows[{i}] is {json.dumps(r)[:40]}, not a mapping")
        if not need <= set(r):
            raise bad(f"rows[{i}] lacks {', '.join(sorted(need - set(r)))}")
        check_types(f"rows[{i}]", r)
    need = {"technique", "target", "seed", *METRICS}
    cells = {(r["technique"], r["target"], int(r["seed"])) for r in rows}
    if not isinstance(metrics, list):
        raise bad("metrics is not a list")
    for i, m in enumerate(metrics):
        if not isinstance(m, dict):
            raise bad(f"metrics[{i}] is {json.dumps(m)[:40]}, not a mapping")
        if not need <= set(m):
            raise bad(f"metrics[{i}] lacks {', '.join(sorted(need - set(m)))}")
        check_types(f"metrics[{i}]", m)
    have = {(m["technique"], m["target"], int(m["seed"])) for m in metrics}
    if cells - have:
        raise bad(f"no metrics for the cell {sorted(cells - have)[0]}")


def verify(reference_path: str | os.PathLike | None = None, write: bool = False) -> int:
    """Run the slice; with ``write`` record it as the reference, else compare and print the
    per-cell agreement. 0 when every answer and metric equals the reference, else 1."""
    path = Path(reference_path) if reference_path else project_path(str(REFERENCE))
    reference = None if write else load_reference(path)  # before any model loads
    with _temporary_folder() as tmp:
        start = time.time()
        print(f"verify: running the slice ({_describe_slice()})", flush=True)
        table = run_slice(tmp, progress=True)
        seconds = time.time() - start
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record(table, seconds), indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(table)} answers of {table.groupby(KEY[:3]).ngroups} cells in {path}")
        return 0
    assert reference is not None
    report = compare(reference, table)
    print(report.text())
    print(f"({seconds:.0f} s)")
    return 0 if report.ok else 1


def verify_on_other_kernels(argv: list[str]) -> int:
    """The same check in a fresh process on narrower CPU kernels (the variables must be set
    before torch starts, hence the process)."""
    from workbench.models.numerics import other_kernels_env

    env = {**os.environ, **other_kernels_env()}
    shown = " ".join(f"{k}={v}" for k, v in other_kernels_env().items())
    print(f"verify under other kernels: {shown}", flush=True)
    return subprocess.call([sys.executable, "-m", "workbench", "verify", *argv], env=env)
