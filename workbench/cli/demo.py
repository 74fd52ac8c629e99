"""``make demo``: the main experiment, then its numbers against the recorded ones.

The README's techniques table is rendered from ``docs/results/demo.json``
(:mod:`workbench.tables.measured`). After the notebook runs, its ``techniques.csv`` is compared
with that record: equal, nothing is written (the exported figures are byte-identical too, so
``git status`` stays clean); different, the record and the pages are rewritten from this run
and the command says which numbers and which figures changed, and under which numerics.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import WorkbenchError
from workbench.paths import run_path
from workbench.plots.save import FIGURES_DIR
from workbench.tables.measured import (
    RESULTS_DIR,
    fill_pages,
    read_record,
    write_record,
)

DEMO_NOTEBOOK = "01_select_abstention"
#: The file name prefix of the figures the demo exports to figures/.
FIGURE_PREFIX = "select_atomic"
RECORD = RESULTS_DIR / "demo.json"
#: The generated table filled from the record (README, The main experiment).
TABLE = "demo-techniques"
METRICS = ("abstention", "generalization", "specificity", "far_specificity", "overall")


def figure_hashes(prefix: str = FIGURE_PREFIX) -> dict[str, str]:
    """sha256 of each exported figure of the demo, by file name."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(FIGURES_DIR.glob(f"{prefix}_*.p[dn][fg]"))
    }


def techniques_record(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The techniques table as recorded: one entry per technique, metrics to 4 decimals."""
    out = []
    for r in table.to_dict("records"):
        out.append(
            {"technique": r["technique"]}
            | {m: None if pd.isna(r.get(m)) else round(float(r[m]), 4) for m in METRICS}
            | {"targets": int(r["targets"])}
        )
    return out


def moved(old: list[dict], new: list[dict]) -> list[str]:
    """``technique metric old -> new`` for every number that changed (and added/removed rows)."""
    before = {r["technique"]: r for r in old}
    after = {r["technique"]: r for r in new}
    out = [f"{t}: new row" for t in after if t not in before]
    out += [f"{t}: row gone" for t in before if t not in after]
    for t in after:
        if t not in before:
            continue
        for m in METRICS:
            a, b = before[t].get(m), after[t].get(m)
            same = a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))
            if not same:
                out.append(f"{t} {m} {a} -> {b}")
    return out


@dataclass
class DemoOutcome:
    """What the demo run changed against the record."""

    changes: list[str]
    figures_changed: list[str]
    machine: dict[str, Any]
    recorded_on: dict[str, Any]
    pages: list[Path] = field(default_factory=list)

    def text(self) -> str:
        ref = f"{self.recorded_on.get('cpu')}, {self.recorded_on.get('dtype')}"
        if not self.changes:
            lines = [f"results equal the recorded ones ({RECORD}, measured on {ref})"]
            if self.figures_changed:
                lines.append(
                    "figures differ though every number is the same (the figures' code, matplotlib "
                    f"or the fonts changed): {', '.join(self.figures_changed)}"
                )
            return "\n".join(lines)
        here = f"{self.machine.get('cpu')}, {self.machine.get('dtype')} ({self.machine.get('numerics')})"
        lines = [
            f"results differ from the recorded ones (measured on {ref}); this run ({here}):",
            *(f"  {c}" for c in self.changes),
            f"rewrote {RECORD} and the tables filled from it: "
            + (", ".join(str(p.name) for p in self.pages) or "none"),
            "figures changed because these numbers did: "
            + (", ".join(self.figures_changed) or "none"),
        ]
        if self.machine.get("numerics") != "reproducible":
            lines.append(
                "this run used speed-first numerics, whose answers depend on batch and CPU; "
                "dtype='auto' reproduces the record"
            )
        return "\n".join(lines)


def compare_and_record(
    run_dir: Path,
    seconds: float,
    figures_before: dict[str, str],
    record: Path = RECORD,
    pages: list[Path] | None = None,
) -> DemoOutcome:
    """Compare ``run_dir``'s techniques table with the record; rewrite the record and the pages
    (default: the README and the docs) only when a number changed."""
    from workbench.experiments.verify import machine

    table = pd.read_csv(run_dir / "techniques.csv")
    rows = pd.read_parquet(run_dir / "results.parquet", columns=["dtype", "numerics"])
    here = {
        **machine(),
        "dtype": ",".join(sorted(set(rows["dtype"].astype(str)))),
        "numerics": ",".join(sorted(set(rows["numerics"].astype(str)))),
        "seconds": round(seconds, 1),
    }
    new = techniques_record(table)
    try:
        old = read_record(record)
    except WorkbenchError:  # no record yet: this run is the first
        old = {"techniques": [], "machine": {}}
    changes = moved(old["techniques"], new)
    after = figure_hashes()
    figures = [n for n, h in after.items() if figures_before.get(n) != h]
    outcome = DemoOutcome(changes, figures, here, old["machine"])
    if changes:
        write_record(record, {"techniques": new, "machine": here, "run": str(run_dir.name)})
        outcome.pages = fill_pages(pages, names={TABLE})
    return outcome


def run_demo() -> DemoOutcome:
    """Run the demo notebook (figures exported to figures/), then compare with the record."""
    from workbench.notebooks import run_notebook

    before = figure_hashes()
    start = time.time()
    out = run_notebook(DEMO_NOTEBOOK, {"export_figures": True}, log_output=True)
    seconds = time.time() - start
    print(f"executed notebook: {out}")
    return compare_and_record(run_path("demo"), seconds, before)
